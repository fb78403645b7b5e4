"""Link rates: what a link of a given kind and generation carries, per direction, in decimal GB/s.

All numbers here are *assumed from tables*; an edge built from them says so in its ``bw_source``.
Sources: ../shared/reference/nccl-facts.md section 9 (PCIe per-lane rates from the PCIe spec with 128b/130b
encoding; InfiniBand 4x rates; NVLink rates from the GPU table, :mod:`collscope.topo.gpus`).
"""

from __future__ import annotations

from collscope.topo.gpus import GENERATIONS, GpuGeneration

__all__ = ["nccl_nvlink_gbps_per_link", "nic_gbps", "nvlink_data_gbps_per_link", "pcie_gbps"]


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
