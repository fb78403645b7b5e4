"""The adaptive sweep: measure a first round, then only the sizes and configurations still in doubt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.sweeps.adaptive.planner import decide, first_round_sizes, size_ranges
    from collscope.sweeps.adaptive.run import AdaptiveOptions, AdaptiveOutcome, run_adaptive

__all__ = [
    "AdaptiveOptions",
    "AdaptiveOutcome",
    "decide",
    "first_round_sizes",
    "run_adaptive",
    "size_ranges",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.sweeps.adaptive.planner": ["decide", "first_round_sizes", "size_ranges"],
        "collscope.sweeps.adaptive.run": ["AdaptiveOptions", "AdaptiveOutcome", "run_adaptive"],
    })
