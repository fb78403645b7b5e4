"""Sweeps: a spec of knobs x sizes, its plan of points, launchers, and the resumable runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.sweeps.launch_options import LaunchOptions
    from collscope.sweeps.launchers import build_launch
    from collscope.sweeps.plan import load_spec, plan_sweep
    from collscope.sweeps.presets import PRESETS, preset
    from collscope.sweeps.run_options import RunOptions
    from collscope.sweeps.runner import SweepOutcome, run_sweep
    from collscope.sweeps.spec import Plan, Point, SweepSpec

__all__ = [
    "LaunchOptions",
    "PRESETS",
    "Plan",
    "Point",
    "RunOptions",
    "SweepOutcome",
    "SweepSpec",
    "build_launch",
    "load_spec",
    "plan_sweep",
    "preset",
    "run_sweep",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.sweeps.launch_options": ["LaunchOptions"],
        "collscope.sweeps.launchers": ["build_launch"],
        "collscope.sweeps.plan": ["load_spec", "plan_sweep"],
        "collscope.sweeps.presets": ["PRESETS", "preset"],
        "collscope.sweeps.run_options": ["RunOptions"],
        "collscope.sweeps.runner": ["SweepOutcome", "run_sweep"],
        "collscope.sweeps.spec": ["Plan", "Point", "SweepSpec"],
    })
