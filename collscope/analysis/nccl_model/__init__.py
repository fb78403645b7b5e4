"""NCCL's own cost model (``src/graph/tuning.cc``): per-version constants, the channel search over a
topology, and predicted time per algorithm and protocol (:mod:`.model`); the terms a measurement adds to it, fitted
on published results (:mod:`.measured`); NCCL's choice and its expected measurement (:mod:`.choice`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.analysis.nccl_model.choice import nccl_choice
    from collscope.analysis.nccl_model.constants import VERSIONS, NcclConstants, nccl_constants
    from collscope.analysis.nccl_model.model import (
        NCCL_OPS,
        NcclChoice,
        NcclGraph,
        NcclGraphInputs,
        nccl_predictions,
        nccl_time_us,
    )
    from collscope.analysis.nccl_model.search import graph_inputs_from_topology, search_channels

__all__ = [
    "NCCL_OPS",
    "NcclChoice",
    "NcclConstants",
    "NcclGraph",
    "NcclGraphInputs",
    "VERSIONS",
    "graph_inputs_from_topology",
    "nccl_choice",
    "nccl_constants",
    "nccl_predictions",
    "nccl_time_us",
    "search_channels",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.analysis.nccl_model.constants": ["VERSIONS", "NcclConstants", "nccl_constants"],
        "collscope.analysis.nccl_model.model": [
            "NCCL_OPS",
            "NcclChoice",
            "NcclGraph",
            "NcclGraphInputs",
            "nccl_predictions",
            "nccl_time_us",
        ],
        "collscope.analysis.nccl_model.choice": ["nccl_choice"],
        "collscope.analysis.nccl_model.search": ["graph_inputs_from_topology", "search_channels"],
    })
