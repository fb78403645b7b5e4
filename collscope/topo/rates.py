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
    "UnmodelledGpu",
    "UNMODELLED",
    "unmodelled_gpu",
    "unknown_gpu_message",
    "SystemShape",
    "SYSTEMS",
    "system_shape",
    "default_nvl_domain",
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
_QUALIFIERS = ("PCIE", "NVL", "SXM3")


def _name_matches(name: str, text: str) -> bool:
    """``name`` ("H100", "H100 PCIe") in an upper-cased GPU string: the base as a word not followed by a digit
    ("B200" is not in "GB200"; "H100" is in "H100-SXM5"), a qualifier anywhere as a word ("A100 80GB PCIe")."""
    words = name.upper().split()
    qualifier = words.pop() if len(words) > 1 and words[-1] in _QUALIFIERS else None
    base = r"(?<![A-Z0-9])" + re.escape(" ".join(words)) + r"(?![0-9])"
    if not re.search(base, text):
        return False
    return qualifier is None or re.search(r"(?<![A-Z0-9])" + qualifier + r"(?![A-Z0-9])", text) is not None


def gpu_generation(model: str | None = None, *, sm: int | None = None) -> GpuGeneration | None:
    """The generation of a GPU from its model string (``"NVIDIA H100 80GB HBM3"``) or its ``sm``."""
    if model:
        text = re.sub(r"[\s_]+", " ", model.upper())
        for gen in GENERATIONS:
            if _name_matches(gen.name, text):
                return gen
    if sm is not None and sm in _BY_SM:
        name = _BY_SM[sm]
        return next(g for g in GENERATIONS if g.name == name)
    return None


@dataclass(frozen=True, slots=True)
class UnmodelledGpu:
    """A GPU collscope knows by name and does not model, with its interconnect facts and the reason."""

    name: str
    """Short name, e.g. ``"MI300X"`` (matched in ``"AMD Instinct MI300X"``)."""
    arch: str
    """The architecture RCCL's topology XML names (``<gpu arch=...>``)."""
    xgmi_links: int
    """xGMI (Infinity Fabric) links per GPU to its peers."""
    xgmi_link_gbps: float
    """Spec rate of one link, per direction, decimal GB/s."""
    rccl_xgmi_link_gbps: float
    """RCCL's model of one link (``ncclTopoXGMISpeed``), per direction."""
    why: str
    """Why no model: what a figure would have to guess."""


# AMD Instinct 8-GPU platforms (OAM, fully connected: each GPU has one xGMI link to each of its 7 peers).
# MI300X and MI325X: 7 links, 896 GB/s aggregate bidirectional peak = 7 x 128 GB/s = 64 GB/s per link per
# direction (AMD Instinct MI300X and MI325X data sheets, "AMD Infinity Fabric Links: 7", "Peak Infinity Fabric
# Link Bandwidth 128 GB/s"). MI355X: 7 links x 153.6 GB/s bidirectional = 76.8 per direction (AMD Instinct MI355X
# data sheet, 1075 GB/s aggregate). RCCL's model constant per link: 48 GB/s for gfx94x/gfx95x
# (:func:`collscope.topo.nccl_xml.rates.xgmi_gbps_per_link`, rccl src/graph/topo.h).
_RCCL_WHY = ("RCCL builds its rings over a fully connected xGMI mesh (no switch, no NVLS; a ring uses 1 of the "
             "7 links of each GPU, RCCL's direct all-to-all kernels use all 7) and chooses algorithms, channels and "
             "protocols from its own tuning tables, which differ from NCCL's tuning.cc that collscope models; a "
             "figure would be a guess. Model a ring yourself with --alpha-us and --bw-gbps")
# MI250X and MI250 (gfx90a): each package holds two GCDs that ROCm, RCCL and rccl-tests show as two GPUs. Infinity
# Fabric links between GPUs run at 25 GT/s x 16 lanes = 50 GB/s (ROCm docs, "AMD Instinct MI250 microarchitecture");
# the two GCDs of a package are joined by 200 GB/s (4 links), GCDs of different packages by 50-100 GB/s (1 or 2
# links) (OLCF Frontier User Guide, 4 x MI250X per node). RCCL's model constant for gfx90a: 36 GB/s per link.
_MI250_WHY = ("its GCDs are not a full mesh: the two GCDs of a package share 4 links, GCDs of different packages 1 or "
              "2 (50-100 GB/s), so RCCL's rings and their bandwidth depend on which GCDs a job holds, and RCCL "
              "chooses algorithms, channels and protocols from its own tuning tables, which differ from NCCL's "
              "tuning.cc that collscope models; a figure would be a guess. Model a ring yourself with --alpha-us "
              "and --bw-gbps")
UNMODELLED: tuple[UnmodelledGpu, ...] = (
    UnmodelledGpu("MI355X", "gfx950", 7, 76.8, 48.0, _RCCL_WHY),
    UnmodelledGpu("MI350X", "gfx950", 7, 76.8, 48.0, _RCCL_WHY),
    UnmodelledGpu("MI325X", "gfx942", 7, 64.0, 48.0, _RCCL_WHY),
    UnmodelledGpu("MI300X", "gfx942", 7, 64.0, 48.0, _RCCL_WHY),
    UnmodelledGpu("MI250X", "gfx90a", 4, 50.0, 36.0, _MI250_WHY),
    UnmodelledGpu("MI250", "gfx90a", 4, 50.0, 36.0, _MI250_WHY),
)


def unmodelled_gpu(model: str | None) -> UnmodelledGpu | None:
    """The :class:`UnmodelledGpu` row a GPU string names (``"AMD Instinct MI300X"``), ``None`` when none does."""
    if not model:
        return None
    text = re.sub(r"[\s_]+", " ", model.upper())
    return next((row for row in UNMODELLED if _name_matches(row.name, text)), None)


def unknown_gpu_message(model: str) -> str:
    """Why ``model`` gives no GPU generation: known and not modelled (with the reason), or unknown (with the list
    of known names)."""
    row = unmodelled_gpu(model)
    if row is not None:
        return (f"GPU {model!r} is {row.name} ({row.arch}, {row.xgmi_links} xGMI links x {row.xgmi_link_gbps:g} GB/s "
                f"per direction; RCCL's model {row.rccl_xgmi_link_gbps:g} per link), known but not modelled: "
                f"{row.why}")
    known = [g.name for g in GENERATIONS] + [f"{r.name} (not modelled)" for r in UNMODELLED]
    if _PLACEHOLDER.fullmatch(model.strip()):
        return (f"GPU {model!r} is the placeholder a driver prints for a GPU it has no product name for (GB200 "
                "trays printed it in published NVL72 runs, coreweave/nccl-tests pull request 43): the name does not "
                f"say which GPU it is; pass --gpu NAME, one of: {', '.join(known)}")
    return f"unknown GPU {model!r}; known: {', '.join(known)}"


_PLACEHOLDER = re.compile(r"(NVIDIA\s+)?Graphics\s+Device", re.IGNORECASE)
"""The name nvidia-smi and CUDA give a GPU that the driver's name table does not list yet."""


@dataclass(frozen=True, slots=True)
class SystemShape:
    """A system as NVLink joins it: how many GPUs a node (tray) holds and how many one NVLink fabric joins."""

    name: str
    gpu: str
    """The :class:`GpuGeneration` name of its GPUs."""
    gpus_per_node: int
    """GPUs per OS node (a tray of an NVL72 rack, an HGX board)."""
    nvl_domain: int
    """GPUs one NVLink fabric joins (1: no NVLink between GPUs)."""
    mnnvl: bool
    """Whether the domain spans nodes (multi-node NVLink: NCCL's MNNVL, one clique per rack)."""
    note: str = ""
    nic_gbit: float | None = None
    """The compute NIC of each GPU, Gb/s (one per GPU), when the system's reference design fixes it; None: read
    it from the captures."""
    nic_source: str = ""
    """Where ``nic_gbit`` comes from."""
    nic_note: str = ""
    """What a job across these nodes must know of their NICs that ibstat does not say, with its source; shown
    with every model of such a job and with the refusal that asks for the NIC rates."""
    nic_cap_gbit: float | None = None
    """The most one compute NIC of the node carries whatever rate its port reports (a PCIe link narrower than the
    port), Gb/s: captured NIC rates above it are taken at it; ``--nic-gbit`` is taken as given."""


# NVL72: 18 compute trays x 4 GPUs (2 Grace + 4 Blackwell per tray) on one NVLink Switch fabric of 9 switch trays
# (NVIDIA GB200 NVL72 / GB300 NVL72 pages); NCCL joins the rack's trays as one NVLink domain when the fabric
# manager puts them in one clique (MNNVL, NCCL_MNNVL_ENABLE, nccl-2025-2026.md section 4). GB200 NVL4: one board
# of 2 Grace + 4 B200 joined by NVLink, no NVLink Switch tray (NVIDIA GB200 NVL4 announcement, SC24). HGX: 8 GPUs
# on NVSwitch. PCIe boxes: no NVLink between GPUs (bridged pairs at most).
_SPARK_ENDPOINT_GBIT = 100.0
"""What one of a GB10's two ConnectX-7 RoCE devices carries: a PCIe Gen5 x4 endpoint (DGX Spark row below)."""

SYSTEMS: tuple[SystemShape, ...] = (
    # Compute NICs per tray: "Cluster network: 4x NVIDIA ConnectX-7 single port 400G OSFP NIC"
    # (docs.nvidia.com/dgx/dgxgb200-user-guide/hardware.html); "4 ConnectX-8 Host Channel Adapters", 800 Gb/s each
    # (docs.nvidia.com/enterprise-reference-architectures/nvl72-ai-factory/latest/components.html).
    SystemShape("GB300 NVL72", "GB300", 4, 72, True, "18 trays x 4 GPUs, one NVLink domain", 800.0,
                "GB300 NVL72 compute tray: 4 x ConnectX-8 800 Gb/s for 4 GPUs (NVIDIA NVL72 Enterprise RA)"),
    SystemShape("GB200 NVL72", "GB200", 4, 72, True, "18 trays x 4 GPUs, one NVLink domain", 400.0,
                "GB200 NVL72 compute tray: 4 x ConnectX-7 400 Gb/s for 4 GPUs (DGX GB200 user guide)"),
    SystemShape("GB200 NVL4", "GB200", 4, 4, False, "one board of 4 GPUs, no NVLink Switch tray"),
    SystemShape("HGX B300", "B300", 8, 8, False),
    SystemShape("HGX B200", "B200", 8, 8, False),
    SystemShape("HGX H200", "H200", 8, 8, False),
    SystemShape("HGX H100", "H100", 8, 8, False),
    SystemShape("HGX H800", "H800", 8, 8, False, "8 NVLinks per GPU (export variant)"),
    SystemShape("HGX H20", "H20", 8, 8, False),
    SystemShape("HGX A100", "A100", 8, 8, False),
    SystemShape("HGX A800", "A800", 8, 8, False, "8 NVLinks per GPU (export variant)"),
    SystemShape("PCIe box", "L40S", 8, 1, False, "no NVLink between the GPUs"),
    SystemShape("DGX Spark", "GB10", 1, 1, False, "one GB10 per system, no NVLink to another system",
                nic_note=("DGX Spark (GB10): its ConnectX-7 QSFP port carries at most 200 Gb/s per cable and shows "
                          f"as two RoCE devices, each a PCIe Gen5 x4 endpoint of about {_SPARK_ENDPOINT_GBIT:g} "
                          "Gb/s, although ibstat prints 'Rate: 200' for each; NCCL reaches 20-24 GB/s of busbw "
                          f"between two systems only with both in NCCL_IB_HCA (--nic-gbit {_SPARK_ENDPOINT_GBIT:g} "
                          f"--nics-per-node 2) and about 12 GB/s with one (--nic-gbit {_SPARK_ENDPOINT_GBIT:g} "
                          "--nics-per-node 1) (NVIDIA/dgx-spark-playbooks nvidia/nccl/README.md and issue 102)"),
                nic_cap_gbit=_SPARK_ENDPOINT_GBIT),
)


def system_shape(name: str) -> SystemShape | None:
    """The :class:`SystemShape` named ``name`` ("GB200 NVL72", case and spacing free), ``None`` if none is."""
    key = re.sub(r"[\s_-]+", " ", name.strip().upper())
    return next((s for s in SYSTEMS if s.name.upper() == key), None)


def default_nvl_domain(gpu: GpuGeneration | str | None, *, gpus_per_node: int, mnnvl: bool = False
                       ) -> tuple[int, str]:
    """The NVLink domain (GPUs) a job's default geometry takes, and why.

    With ``mnnvl`` (the topology says the node is in a multi-node NVLink clique) a GPU whose system is an MNNVL
    rack gets the rack's domain (72 for GB200/GB300); a GPU without all-GPU NVLink (PCIe, bridged pairs) gets 1;
    otherwise the node's GPUs (an HGX board 8, a GB200 tray without MNNVL 4)."""
    gen = gpu_generation(gpu) if isinstance(gpu, str) else gpu
    if gen is not None and not gen.nvlink_links:
        return 1, f"{gen.name}: no NVLink joining all GPUs ({gen.nvlink_fabric}), domain 1"
    if mnnvl and gen is not None:
        rack = next((s for s in SYSTEMS if s.gpu == gen.name and s.mnnvl), None)
        if rack is not None:
            return rack.nvl_domain, f"{rack.name}: multi-node NVLink clique of {rack.nvl_domain} GPUs"
    return gpus_per_node, f"{gpus_per_node} GPUs per node (one NVLink domain per node)"


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
