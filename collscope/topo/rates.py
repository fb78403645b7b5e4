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
    "nvlink_data_gbps_per_link",
    "nccl_nvlink_gbps_per_link",
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
    nvlink_signal_gbps: float | None = None
    """Per-link rate ``nvidia-smi nvlink -s`` prints, GB/s: the signalling rate, not the data rate (``None`` when
    not known for the family)."""


# THE NVLink bandwidth of collscope: per link, per direction, DATA rate, decimal GB/s (``nvlink_link_gbps``).
# Spec data rates, NVIDIA's per-GPU bidirectional totals / links / 2 directions (nccl-facts.md section 9,
# nvidia.com/en-us/data-center/nvlink): NVLink1 160 / 4 / 2 = 20; NVLink2 300 / 6 / 2 = 25; NVLink3 600 / 12 / 2
# = 25; NVLink4 900 / 18 / 2 = 25 (H100: 18 x 25 = 450 GB/s per direction, "450GB/s is the line rate",
# sjeaugey in NVIDIA/nccl-tests#212); NVLink5 1800 / 18 / 2 = 50. GA10x bridges: 14.0625 GB/s per link per
# direction (NVIDIA GA102 whitepaper, quoted in huggingface/transformers#9371).
# What `nvidia-smi nvlink -s` prints per link (``nvlink_signal_gbps``) is the signalling rate: V100 25.781
# (Azure/azhpc-diagnostics#73; 25 x 66/64), A100 25 (NVIDIA/nccl-tests#228), H100 26.562 (NVIDIA/nccl#1397;
# 25 x 17/16), GB200 53.125 (NVIDIA/k8s-test-infra#371; 50 x 17/16); converted to the data rate by
# :func:`nvlink_data_gbps_per_link`.
# NCCL's model constants (``nccl_nvlink_link_gbps``, src/graph/topo.h SMxx_NVLINK_BW, nccl-facts 1.3): SM60 18,
# SM70 20, SM80 20, SM86 12, SM90 20.6, SM100 40.1 -- NCCL's effective-bandwidth model, shown as NCCL's only.
GENERATIONS: tuple[GpuGeneration, ...] = (
    GpuGeneration("GB200", 100, 5, 18, 50.0, 40.1, 6, 53.125),
    GpuGeneration("B200", 100, 5, 18, 50.0, 40.1, 5, 53.125),
    GpuGeneration("B100", 100, 5, 18, 50.0, 40.1, 5, 53.125),
    GpuGeneration("GH200", 90, 4, 18, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("H200", 90, 4, 18, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("H100", 90, 4, 18, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("H800", 90, 4, 8, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("H20", 90, 4, 18, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("A100", 80, 3, 12, 25.0, 20.0, 4, 25.0),
    GpuGeneration("A800", 80, 3, 8, 25.0, 20.0, 4, 25.0),
    GpuGeneration("A30", 80, 3, 4, 25.0, 20.0, 4, 25.0),
    GpuGeneration("V100", 70, 2, 6, 25.0, 20.0, 3, 25.78125),
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


_PRINTED_TOLERANCE_GBPS = 0.01  # nvidia-smi prints three decimals (26.562 for 26.5625)


def nvlink_data_gbps_per_link(printed_gbps: float, gen: GpuGeneration | None) -> tuple[float, str]:
    """The data rate of one NVLink (per direction, GB/s) from the per-link rate ``nvidia-smi nvlink -s`` printed,
    and how it was obtained. The printed rate is the signalling rate: it is scaled by the family's data/signalling
    ratio (the family from ``gen``, else the one whose signalling rate was printed); unknown rates are kept as
    printed, and said so."""
    if gen is None or gen.nvlink_signal_gbps is None:
        gen = next((g for g in GENERATIONS if g.nvlink_signal_gbps is not None
                    and abs(g.nvlink_signal_gbps - printed_gbps) <= _PRINTED_TOLERANCE_GBPS), gen)
    if gen is None or gen.nvlink_signal_gbps is None or not gen.nvlink_link_gbps:
        return printed_gbps, f"{printed_gbps:g} GB/s per link as printed (signalling rate of an unknown family)"
    ratio = gen.nvlink_link_gbps / gen.nvlink_signal_gbps
    data = round(printed_gbps * ratio, 3)
    if abs(data - gen.nvlink_link_gbps) <= _PRINTED_TOLERANCE_GBPS:
        data = gen.nvlink_link_gbps
    if ratio == 1.0:
        return data, f"{printed_gbps:g} GB/s per link (NVLink{gen.nvlink_gen}: signalling = data rate)"
    return data, (f"{printed_gbps:g} GB/s per link is the signalling rate, NVLink{gen.nvlink_gen} data rate "
                  f"{data:g} GB/s (x {gen.nvlink_link_gbps:g}/{gen.nvlink_signal_gbps:g})")


def nccl_nvlink_gbps_per_link(gen: GpuGeneration | None) -> float | None:
    """NCCL's model constant for one NVLink of this family (topo.h SMxx_NVLINK_BW), ``None`` when unknown."""
    return gen.nccl_nvlink_link_gbps if gen is not None and gen.nccl_nvlink_link_gbps else None
