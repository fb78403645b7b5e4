"""Path classes as ``nvidia-smi topo -m`` prints them, ordered from closest to farthest."""

from __future__ import annotations

import re

__all__ = ["PATH_ORDER", "path_rank", "nvlink_count", "is_nvlink", "PATH_MEANING"]

PATH_ORDER: tuple[str, ...] = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")
PATH_MEANING = {
    "X": "self",
    "NV": "a bonded set of NVLinks",
    "PIX": "at most a single PCIe bridge",
    "PXB": "multiple PCIe bridges, no host bridge",
    "PHB": "a PCIe host bridge (the CPU)",
    "NODE": "the interconnect between host bridges within a NUMA node",
    "SYS": "the SMP interconnect between NUMA nodes (QPI/UPI/xGMI)",
}

_NV = re.compile(r"^NV(\d+)$")


def nvlink_count(path: str) -> int | None:
    """``"NV12"`` -> 12; anything else -> ``None``."""
    m = _NV.match(path)
    return int(m.group(1)) if m else None


def is_nvlink(path: str) -> bool:
    return nvlink_count(path) is not None


def path_rank(path: str) -> tuple[int, int]:
    """Sort key: lower is closer. More NVLinks are closer than fewer."""
    count = nvlink_count(path)
    if count is not None:
        return (PATH_ORDER.index("NV"), -count)
    return (PATH_ORDER.index(path) if path in PATH_ORDER else len(PATH_ORDER), 0)
