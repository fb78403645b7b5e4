"""What NCCL really did, from an ``NCCL_DEBUG=INFO`` log: records, the parser, forced-setting checks
and the readable summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.collectives.nccl_log.effects import (
        algorithms_used,
        forced_setting_effects,
        ib_devices_used,
        protocols_used,
    )
    from collscope.collectives.nccl_log.messages import Connection, RingOrder, TreeLink
    from collscope.collectives.nccl_log.parse import parse_nccl_log, read_nccl_log
    from collscope.collectives.nccl_log.records import NcclLog, NetInfo
    from collscope.collectives.nccl_log.render import nccl_log_summary_text
    from collscope.collectives.nccl_log.tuning import TuningTable

__all__ = [
    "Connection",
    "NcclLog",
    "NetInfo",
    "RingOrder",
    "TreeLink",
    "TuningTable",
    "algorithms_used",
    "forced_setting_effects",
    "ib_devices_used",
    "nccl_log_summary_text",
    "parse_nccl_log",
    "protocols_used",
    "read_nccl_log",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.collectives.nccl_log.effects": [
            "algorithms_used",
            "forced_setting_effects",
            "ib_devices_used",
            "protocols_used",
        ],
        "collscope.collectives.nccl_log.messages": ["Connection", "RingOrder", "TreeLink"],
        "collscope.collectives.nccl_log.parse": ["parse_nccl_log", "read_nccl_log"],
        "collscope.collectives.nccl_log.records": ["NcclLog", "NetInfo"],
        "collscope.collectives.nccl_log.render": ["nccl_log_summary_text"],
        "collscope.collectives.nccl_log.tuning": ["TuningTable"],
    })
