"""Systems as NVLink joins them: GPUs per node (tray), GPUs per NVLink fabric, and the NIC facts of a system's
reference design that ibstat does not say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SYSTEMS", "SystemShape", "system_shape"]


@dataclass(frozen=True, slots=True)
class SystemShape:
    """A system as NVLink joins it: how many GPUs a node (tray) holds and how many one NVLink fabric joins."""

    name: str
    gpu: str
    """The :class:`~collscope.topo.gpus.GpuGeneration` name of its GPUs."""
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

