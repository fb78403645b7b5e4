"""NVLink a topology file leaves out: NCCL reads the file, then adds the NVLinks it finds through NVML at run time.

A hand-written ``NCCL_TOPO_FILE`` (the files cloud providers ship for their VMs: Azure ND A100 v4 / ND H100 v5,
``Azure/azhpc-images`` ``topology/ndv4-topo.xml``, ``ndv5-topo.xml``) describes the PCIe placement of GPUs and NICs
and no ``<nvlink>``: NCCL fills the ``<gpu>`` and ``<nvlink>`` elements in from the live system (NCCL
src/graph/xml.cc ``ncclTopoFillGpu`` -> ``ncclTopoGetXmlFromGpu``, which queries ``nvmlDeviceGetNvLinkState`` and
``nvmlDeviceGetNvLinkRemotePciInfo`` for every link). So "no ``<nvlink>``" in such a file means "NVLink not
described", never "no NVLink". An NCCL dump (``NCCL_TOPO_DUMP_FILE``) is different: NCCL wrote its ``<nvlink>``
elements itself, so a dump without them and without NVSwitch is a machine without NVLink.

When the GPU is known (``--gpu``, else the ``sm`` of its ``<gpu>``) and its family joins GPUs through NVSwitch
(:data:`collscope.topo.gpus.GENERATIONS`, ``nvlink_fabric``), the NVLinks are modelled from that table row: each
GPU to one NVSwitch with the family's links, the edge saying it was not described.
"""

from __future__ import annotations

import networkx as nx

from collscope.topo.gpus import GpuGeneration, gpu_generation
from collscope.topo.nccl_xml.rates import nvlink_gbps_per_link
from collscope.topo.nccl_xml.records import NcclTopoXml, XmlPci
from collscope.topo.schema import add_device, add_link

__all__ = ["NOT_DESCRIBED", "NVLINK_NOT_DESCRIBED_KEY", "add_undescribed_nvlinks", "written_by_hand"]

NOT_DESCRIBED = "NVLink not described in the topology file: NCCL detects it at run time through NVML"
NVLINK_NOT_DESCRIBED_KEY = "nvlink_not_described"
"""``graph.graph[...]``: why the file's NVLink is taken as not described, and how it was modelled (or not)."""


def written_by_hand(topo: NcclTopoXml) -> str | None:
    """Why ``topo`` reads as a hand-written (provider's) topology file rather than NCCL's own dump, ``None`` if it
    reads as a dump. NCCL's dumps write ``vendor``/``device`` on every GPU ``<pci>`` and a ``<gpu>`` element below
    it (NCCL src/graph/xml.cc ``ncclTopoGetXmlFromSys``); providers' files place GPUs under virtual bridges of PCI
    domain ``ffff`` (the Azure files) and leave those out."""
    gpus = [pci for _, pci in topo.pcis() if pci.gpu is not None or pci.is_gpu]
    if topo.truncated and gpus and gpus[-1].gpu is None:
        gpus = gpus[:-1]  # the cut may have fallen inside the last GPU's <pci>, before the <gpu> a dump writes
    if not gpus:
        return None
    if any(pci.gpu is None for pci in gpus):
        return "GPU <pci> elements without <gpu> (NCCL fills the GPUs in from the live system)"
    if any(not pci.vendor or not pci.device for pci in gpus):
        return "GPU <pci> elements without vendor/device (NCCL's own dumps write both)"
    if any(pci.busid.startswith("ffff:") for _, pci in topo.pcis()):
        return "virtual PCI bridges of domain ffff (a VM's topology file)"
    return None


def _has_nvswitch(topo: NcclTopoXml) -> bool:
    return any(pci.is_nvswitch for _, pci in topo.pcis())


def add_undescribed_nvlinks(graph: nx.Graph, topo: NcclTopoXml, gpus: list[tuple[str, XmlPci]], *, source: str,
                            generation: GpuGeneration | None) -> None:
    """Model the NVLinks of ``gpus`` (graph name, pci) when ``topo`` has no ``<nvlink>``/``<xgmi>`` at all and
    reads as a provider's file or shows an NVSwitch board (see the module docstring); record why in
    ``graph.graph[NVLINK_NOT_DESCRIBED_KEY]``."""
    if not gpus or any(pci.gpu is not None and pci.gpu.links for _, pci in gpus):
        return
    by_hand = written_by_hand(topo)
    board = "NVSwitch devices in the file" if _has_nvswitch(topo) else None
    why = by_hand or board
    if why is None:
        return  # an NCCL dump without NVLink and without NVSwitch: the machine has none
    sms = {pci.gpu.sm for _, pci in gpus if pci.gpu is not None and pci.gpu.sm is not None}
    gen = generation or (gpu_generation(sm=min(sms)) if sms else None)
    if gen is None:
        graph.graph[NVLINK_NOT_DESCRIBED_KEY] = (f"{NOT_DESCRIBED} ({why}); the file does not name the GPU: "
                                                 "pass --gpu NAME to model its NVLink")
        return
    if not gen.nvlink_links or gen.nvlink_fabric != "nvswitch":
        graph.graph[NVLINK_NOT_DESCRIBED_KEY] = (f"{NOT_DESCRIBED} ({why}); {gen.name} has no NVSwitch NVLink "
                                                 f"({gen.nvlink_fabric}), so none is modelled")
        return
    named = "--gpu" if generation is not None else f"sm={min(sms)}"
    caveat = "" if generation is not None or gen.sm != 90 else " (H800 has 8 links: pass --gpu H800 for it)"
    how = (f"modelled from the GPU table: {gen.name} ({named}) {gen.nvlink_links} x NVLink{gen.nvlink_gen} "
           f"{gen.nvlink_link_gbps:g} GB/s per direction to NVSwitch{caveat}")
    graph.graph[NVLINK_NOT_DESCRIBED_KEY] = f"{NOT_DESCRIBED} ({why}); {how}"
    add_device(graph, "NVSwitch", "nvswitch", source=source)
    nccl_per = nvlink_gbps_per_link(gen.sm)
    for name, _ in gpus:
        graph.nodes[name].setdefault("generation", gen.name)
        graph.nodes[name]["nvlink_described"] = False
        add_link(graph, name, "NVSwitch", "nvlink",
                 bw_gbps=round(gen.nvlink_links * gen.nvlink_link_gbps, 6),
                 bw_source=f"assumed: {NOT_DESCRIBED}; {how}",
                 nlinks=gen.nvlink_links, fabric="nvlink", described=False, source=source,
                 nccl_bw_gbps=round(nccl_per * gen.nvlink_links, 6),
                 nccl_bw_source=f"NCCL topo.h ncclTopoNVLinkBw(sm {gen.sm}) {nccl_per:g} x {gen.nvlink_links}")
