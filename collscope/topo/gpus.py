"""The NVIDIA GPU table: what each GPU family brings to a topology (NVLink generation, links and rates, NCCL's
model constant, PCIe generation, how its NVLinks join GPUs), and the lookup from the names tools print.

All numbers here are *assumed from tables*; an edge built from them says so in its ``bw_source``. Sources:
../shared/reference/nccl-facts.md section 9 (NVLink generations: NVIDIA's NVLink page, per-GPU bidirectional
totals divided by links and directions) and section 1.3 (NCCL's own model constants, src/graph/topo.h), kept next
to the spec numbers because NCCL's tuner uses them; each family's source is in the comment above its rows.
GPUs known by name and not modelled (AMD Instinct) are in :mod:`collscope.topo.unmodelled_gpus`.
"""

from __future__ import annotations

from dataclasses import dataclass

from collscope.topo.gpu_names import gpu_text, name_matches

__all__ = ["GENERATIONS", "GpuGeneration", "gpu_generation"]


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
    nvlink_fabric: str = "nvswitch"
    """How the family's NVLinks join GPUs on its usual board: ``"nvswitch"`` (HGX/DGX/NVL72: every GPU of the
    domain reaches every other at the full per-GPU rate), ``"mesh"`` (P100/V100 hybrid cube mesh: direct links,
    no switch), ``"bridge"`` (PCIe cards joined in pairs by NVLink bridges: ``nvlink_links`` are the bridge's links
    to the GPU's one peer; a ring over more than the pair crosses PCIe), ``"none"``."""
    no_gdr: str = ""
    """Why GPUDirect RDMA cannot work on this GPU's platform whatever NCCL is told, with the source; empty where
    NCCL's rule (:mod:`collscope.topo.gdr`) decides it."""


_GB10_NO_GDR = ("GB10 (DGX Spark and its OEM twins): GPUDirect RDMA is not supported on this platform: its GPU "
                "memory is the unified LPDDR5X, which PCIe devices cannot access coherently, so nvidia-peermem, "
                "DMA-BUF and GDRCopy do not work (NVIDIA's answer on the NVIDIA developer forum thread 'DGX Spark "
                "GPUDirect RDMA'); NCCL logs 'GPU Direct RDMA Disabled' for each HCA and stages every transfer "
                "through host memory")


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
# Per-family links (NVIDIA datasheets, per-GPU NVLink bandwidth bidirectional / 2 / per-link rate):
# A800 and H800 are the export variants with 400 GB/s NVLink: 8 links (A100 12, H100 18; NVIDIA A800 40GB/80GB
# and H800 SXM5 product briefs: "NVLink 400GB/s"; nccl-facts.md section 12: "8 x H800 (reduced NVLink)",
# NVIDIA/nccl#1374). H20: 900 GB/s NVLink4 = 18 links, low compute (FP16 148 TFLOPS) that NCCL's model does not
# see. B300/GB300 (Blackwell Ultra, sm 103 = compute capability 10.3): NVLink5, 18 links, 1.8 TB/s per GPU
# (NVIDIA HGX B300 and GB300 NVL72 pages); NCCL's constant is SM100_NVLINK_BW for every sm >= 100
# (src/graph/topo.h ncclTopoNVLinkBw, NVIDIA/nccl 5067397). PCIe cards join pairs through NVLink bridges only
# ("bridge"; links = bridge bandwidth bidirectional / 2 / 25): H100 PCIe and H100 NVL 600 GB/s = 12, H200 NVL
# 900 GB/s = 18, A100 PCIe 600 GB/s = 12, A800/H800 PCIe 400 GB/s = 8 (NVIDIA product briefs).
# GB10 (DGX Spark and its OEM twins, "NVIDIA GB10" in nccl-tests' rank lines): one Blackwell GPU per system, sm
# 121 (NVIDIA/dgx-spark-playbooks nvidia/nccl/README.md builds NCCL with "-gencode=arch=compute_121,code=sm_121"),
# joined to its Grace CPU by NVLink-C2C only: no NVLink to another GPU ("none"). Its PCIe generation is the
# platform's, Gen5 (the same README: the ConnectX-7 port is "two PCIe Gen5 x4 endpoints"; ServeTheHome, "The
# NVIDIA GB10 ConnectX-7 200GbE Networking is Really Different": two 32 GT/s x4 links on DGX Spark, Dell Pro Max
# GB10 and ASUS Ascent GX10 alike).
# Ampere GA102 data-center cards (sm 86, PCIe Gen4 x16): A40 joins pairs by an NVLink bridge of 112.5 GB/s
# bidirectional, 4 links as RTX A6000 (NVIDIA A40 data sheet; NVIDIA/nccl-tests#74 runs 8 of them); A10 and AWS's
# A10G (g5 instances: 8 per g5.48xlarge, NVIDIA/nccl#1298) have no NVLink (NVIDIA A10 data sheet).
# More GA102 workstation cards (sm 86, PCIe Gen4 x16): RTX A5000 and RTX A4500 join pairs by an NVLink bridge of
# 112.5 GB/s bidirectional, 4 links as RTX A6000; RTX A4000 has no NVLink (NVIDIA RTX A5000, A4500 and A4000 data
# sheets; 4 x RTX A5000 in one host in NVIDIA/nccl#757).
# Turing (sm 75, NVLink 2 at 25 GB/s per link per direction, PCIe Gen3 x16) joins pairs by NVLink bridges: Quadro
# RTX 8000 and 6000, TITAN RTX and GeForce RTX 2080 Ti 100 GB/s bidirectional = 2 links, Quadro RTX 5000 50 GB/s =
# 1 link (NVIDIA Quadro RTX 8000/6000/5000 data sheets, TITAN RTX and RTX 2080 Ti product pages; two 2080 Ti on a
# bridge in NVIDIA/nccl-tests#44). NCCL's constant for sm 75 is SM70_NVLINK_BW. "Quadro RTX 6000" is not the
# Ada "RTX 6000": its rows come first.
# Volta and Pascal by form factor: the PCIe cards (Tesla V100-PCIE, V100S-PCIE, P100-PCIE) have no NVLink (NVIDIA
# Tesla V100 and P100 PCIe data sheets: "Interconnect Bandwidth: PCIe 32 GB/s"); the SXM2 boards join 8 GPUs in the
# hybrid cube mesh ("mesh"); the SXM3 boards of DGX-2/HGX-2 (Tesla V100-SXM3-32GB) join 16 GPUs through NVSwitches,
# 6 links each (NVIDIA DGX-2 data sheet: "2.4 TB/s bisection bandwidth", 300 GB/s per GPU).
# Row order matters: a row whose name has a qualifier ("H100 PCIe") is tried before its base ("H100"), and "A10G"
# before "A10" (the base matches any name where no digit follows it).
GENERATIONS: tuple[GpuGeneration, ...] = (
    GpuGeneration("GB300", 103, 5, 18, 50.0, 40.1, 6, 53.125),
    GpuGeneration("GB200", 100, 5, 18, 50.0, 40.1, 6, 53.125),
    GpuGeneration("GB10", 121, None, 0, 0.0, 0.0, 5, None, "none", no_gdr=_GB10_NO_GDR),
    GpuGeneration("B300", 103, 5, 18, 50.0, 40.1, 6, 53.125),
    GpuGeneration("B200", 100, 5, 18, 50.0, 40.1, 5, 53.125),
    GpuGeneration("B100", 100, 5, 18, 50.0, 40.1, 5, 53.125),
    GpuGeneration("GH200", 90, 4, 18, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("H200 NVL", 90, 4, 18, 25.0, 20.6, 5, 26.5625, "bridge"),
    GpuGeneration("H200", 90, 4, 18, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("H100 PCIe", 90, 4, 12, 25.0, 20.6, 5, 26.5625, "bridge"),
    GpuGeneration("H100 NVL", 90, 4, 12, 25.0, 20.6, 5, 26.5625, "bridge"),
    GpuGeneration("H100", 90, 4, 18, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("H800 PCIe", 90, 4, 8, 25.0, 20.6, 5, 26.5625, "bridge"),
    GpuGeneration("H800", 90, 4, 8, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("H20", 90, 4, 18, 25.0, 20.6, 5, 26.5625),
    GpuGeneration("A100 PCIe", 80, 3, 12, 25.0, 20.0, 4, 25.0, "bridge"),
    GpuGeneration("A100", 80, 3, 12, 25.0, 20.0, 4, 25.0),
    GpuGeneration("A800 PCIe", 80, 3, 8, 25.0, 20.0, 4, 25.0, "bridge"),
    GpuGeneration("A800", 80, 3, 8, 25.0, 20.0, 4, 25.0),
    GpuGeneration("A30", 80, 3, 4, 25.0, 20.0, 4, 25.0, "bridge"),
    GpuGeneration("V100 PCIe", 70, None, 0, 0.0, 0.0, 3, None, "none"),
    GpuGeneration("V100 SXM3", 70, 2, 6, 25.0, 20.0, 3, 25.78125),
    GpuGeneration("V100", 70, 2, 6, 25.0, 20.0, 3, 25.78125, "mesh"),
    GpuGeneration("P100 PCIe", 60, None, 0, 0.0, 0.0, 3, None, "none"),
    GpuGeneration("P100", 60, 1, 4, 20.0, 18.0, 3, None, "mesh"),
    GpuGeneration("RTX A6000", 86, 3, 4, 14.0625, 12.0, 4, None, "bridge"),
    GpuGeneration("RTX A5000", 86, 3, 4, 14.0625, 12.0, 4, None, "bridge"),
    GpuGeneration("RTX A4500", 86, 3, 4, 14.0625, 12.0, 4, None, "bridge"),
    GpuGeneration("RTX A4000", 86, None, 0, 0.0, 0.0, 4, None, "none"),
    GpuGeneration("A40", 86, 3, 4, 14.0625, 12.0, 4, None, "bridge"),
    GpuGeneration("A10G", 86, None, 0, 0.0, 0.0, 4, None, "none"),
    GpuGeneration("A10", 86, None, 0, 0.0, 0.0, 4, None, "none"),
    GpuGeneration("RTX 3090", 86, 3, 4, 14.0625, 12.0, 4, None, "bridge"),
    GpuGeneration("Quadro RTX 8000", 75, 2, 2, 25.0, 20.0, 3, None, "bridge"),
    GpuGeneration("Quadro RTX 6000", 75, 2, 2, 25.0, 20.0, 3, None, "bridge"),
    GpuGeneration("Quadro RTX 5000", 75, 2, 1, 25.0, 20.0, 3, None, "bridge"),
    GpuGeneration("TITAN RTX", 75, 2, 2, 25.0, 20.0, 3, None, "bridge"),
    GpuGeneration("RTX 2080 Ti", 75, 2, 2, 25.0, 20.0, 3, None, "bridge"),
    GpuGeneration("RTX PRO 6000", 120, None, 0, 0.0, 0.0, 5, None, "none"),
    GpuGeneration("RTX 6000", 89, None, 0, 0.0, 0.0, 4, None, "none"),
    GpuGeneration("L40S", 89, None, 0, 0.0, 0.0, 4, None, "none"),
    GpuGeneration("L40", 89, None, 0, 0.0, 0.0, 4, None, "none"),
    GpuGeneration("L20", 89, None, 0, 0.0, 0.0, 4, None, "none"),
    GpuGeneration("L4", 89, None, 0, 0.0, 0.0, 4, None, "none"),
    GpuGeneration("RTX 4090", 89, None, 0, 0.0, 0.0, 4, None, "none"),
    GpuGeneration("RTX 5090", 120, None, 0, 0.0, 0.0, 5, None, "none"),
    GpuGeneration("T4", 75, None, 0, 0.0, 0.0, 3, None, "none"),
    GpuGeneration("K80", 37, None, 0, 0.0, 0.0, 3, None, "none"),
)

_BY_SM = {60: "P100", 70: "V100", 80: "A100", 86: "RTX A6000", 89: "L40S", 90: "H100", 100: "B200", 103: "B300",
          121: "GB10"}


def gpu_generation(model: str | None = None, *, sm: int | None = None) -> GpuGeneration | None:
    """The generation of a GPU from its model string (``"NVIDIA H100 80GB HBM3"``) or its ``sm``."""
    if model:
        text = gpu_text(model)
        for gen in GENERATIONS:
            if name_matches(gen.name, text):
                return gen
    if sm is not None and sm in _BY_SM:
        name = _BY_SM[sm]
        return next(g for g in GENERATIONS if g.name == name)
    return None
