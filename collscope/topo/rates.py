"""Link rates: what a link of a given kind and generation carries, per direction, in decimal GB/s.

All numbers here are *assumed from tables*; an edge built from them says so in its ``bw_source``.
Sources: ../shared/reference/nccl-facts.md section 9 (NVLink generations: NVIDIA's NVLink page,
per-GPU bidirectional totals divided by links and directions; PCIe per-lane rates from the PCIe
spec with 128b/130b encoding; InfiniBand 4x rates) and section 1.3 (NCCL's own model constants,
src/graph/topo.h), kept next to the spec numbers because NCCL's tuner uses them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "GpuGeneration",
    "gpu_generation",
    "pcie_gbps",
    "nic_gbps",
    "GENERATIONS",
]


@dataclass(frozen=True, slots=True)
class GpuGeneration:
    """What a GPU family brings to the topology."""

    name: str
    """Short family name, e.g. ``"H100"``."""
    sm: int
    """Compute capability x 10 (NCCL's ``sm``)."""
    nvlink_gen: int | None
    """NVLink generation, ``None`` when the family has no NVLink."""
    nvlink_links: int
    """NVLink links per GPU (0 without NVLink)."""
    nvlink_link_gbps: float
    """Spec rate of one link, per direction, decimal GB/s."""
    nccl_nvlink_link_gbps: float
    """NCCL's model of one link (topo.h SMxx_NVLINK_BW), per direction."""
    pcie_gen: int
    """PCIe generation of the GPU's host interface (x16 assumed)."""


# Per-link, per-direction spec rates: NVLink1 160 GB/s bidir / 4 links / 2 = 20; NVLink2 300 / 6 / 2 = 25;
# NVLink3 600 / 12 / 2 = 25; NVLink4 900 / 18 / 2 = 25; NVLink5 1800 / 18 / 2 = 50. GA10x NVLink bridges:
# 112.5 GB/s bidir over 4 links = 14.0625 per link per direction. (nccl-facts.md section 9.)
# NCCL model constants: SM60 18, SM70 20, SM80 20, SM86 12, SM90 20.6, SM100 40.1 (topo.h, nccl-facts 1.3).
GENERATIONS: tuple[GpuGeneration, ...] = (
    GpuGeneration("GB200", 100, 5, 18, 50.0, 40.1, 6),
    GpuGeneration("B200", 100, 5, 18, 50.0, 40.1, 5),
    GpuGeneration("B100", 100, 5, 18, 50.0, 40.1, 5),
    GpuGeneration("GH200", 90, 4, 18, 25.0, 20.6, 5),
    GpuGeneration("H200", 90, 4, 18, 25.0, 20.6, 5),
    GpuGeneration("H100", 90, 4, 18, 25.0, 20.6, 5),
    GpuGeneration("H800", 90, 4, 8, 25.0, 20.6, 5),
    GpuGeneration("H20", 90, 4, 18, 25.0, 20.6, 5),
    GpuGeneration("A100", 80, 3, 12, 25.0, 20.0, 4),
    GpuGeneration("A800", 80, 3, 8, 25.0, 20.0, 4),
    GpuGeneration("A30", 80, 3, 4, 25.0, 20.0, 4),
    GpuGeneration("V100", 70, 2, 6, 25.0, 20.0, 3),
    GpuGeneration("P100", 60, 1, 4, 20.0, 18.0, 3),
    GpuGeneration("RTX A6000", 86, 3, 4, 14.0625, 12.0, 4),
    GpuGeneration("RTX 3090", 86, 3, 4, 14.0625, 12.0, 4),
    GpuGeneration("L40S", 89, None, 0, 0.0, 0.0, 4),
    GpuGeneration("L40", 89, None, 0, 0.0, 0.0, 4),
    GpuGeneration("L4", 89, None, 0, 0.0, 0.0, 4),
    GpuGeneration("RTX 4090", 89, None, 0, 0.0, 0.0, 4),
    GpuGeneration("RTX 5090", 120, None, 0, 0.0, 0.0, 5),
    GpuGeneration("T4", 75, None, 0, 0.0, 0.0, 3),
    GpuGeneration("K80", 37, None, 0, 0.0, 0.0, 3),
)

_BY_SM = {60: "P100", 70: "V100", 80: "A100", 86: "RTX A6000", 89: "L40S", 90: "H100", 100: "B200"}


def gpu_generation(model: str | None = None, *, sm: int | None = None) -> GpuGeneration | None:
    """The generation of a GPU from its model string (``"NVIDIA H100 80GB HBM3"``) or its ``sm``."""
    if model:
        text = re.sub(r"\s+", " ", model.upper())
        for gen in GENERATIONS:
            pattern = r"(?<![A-Z0-9])" + re.escape(gen.name.upper()) + r"(?![0-9])"
            if re.search(pattern, text):
                return gen
    if sm is not None and sm in _BY_SM:
        name = _BY_SM[sm]
        return next(g for g in GENERATIONS if g.name == name)
    return None


# Per direction, x16, 128b/130b (Gen3+) or 8b/10b (Gen1/2): nccl-facts.md section 9 ("derived from spec rates").
_PCIE_X16_GBPS = {1: 4.0, 2: 8.0, 3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}


def pcie_gbps(gen: int | None, width: int | None = 16) -> float | None:
    """Per-direction PCIe bandwidth of a link of generation ``gen`` and ``width`` lanes."""
    if gen is None or gen not in _PCIE_X16_GBPS:
        return None
    lanes = 16 if width is None else width
    return round(_PCIE_X16_GBPS[gen] * lanes / 16, 3)


def nic_gbps(rate_gbit: float | None) -> float | None:
    """A NIC port's data rate in GB/s (bytes) from its signalling rate in Gb/s (bits), e.g. 400 -> 50."""
    if rate_gbit is None:
        return None
    return rate_gbit / 8.0
