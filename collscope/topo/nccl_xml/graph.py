"""Turn a parsed NCCL/RCCL topology XML into nodes and edges of the topology graph.

Names (the rest of the model relies on them):

* GPUs ``GPU<dev>``; when the XML has no ``<gpu dev=...>`` (hand-written ``NCCL_TOPO_FILE``) the
  index is assumed from PCI bus-id order, as NVML enumerates (``index_source`` says so).
* NICs by net name (``mlx5_0``); a NIC ``<pci>`` without ``<nic><net>`` is ``NIC:<busid>``.
* NUMA nodes ``NUMA<numaid>``; a missing or negative numaid is ``NUMA?`` (``NUMA?#1``, ... for more).
* PCIe bridges/switches ``PCIe:<busid>`` (kind ``pcie_switch``).
* All NVSwitches, bare metal (four targets) or collapsed (``fffffff:ff:ff.0``), are one ``NVSwitch``.

Bandwidths follow NCCL's model (topo.h / topo.cc) in decimal GB/s per direction, with ``bw_source``
saying whether the value was read from the XML (``captured: ...``) or taken from NCCL's constants
(``assumed: ...``). RCCL's xGMI links have no link kind of their own in the schema: they are ``nvlink``
edges with ``fabric="xgmi"``.
"""

from __future__ import annotations

import logging

import networkx as nx

from collscope.topo.gpus import GpuGeneration, gpu_generation
from collscope.topo.nccl_xml.rates import inter_cpu_gbps, nvlink_gbps_per_link, pci_link_gbps, xgmi_gbps_per_link
from collscope.topo.nccl_xml.records import NcclTopoXml, XmlCpu, XmlGpu, XmlNet, XmlPci
from collscope.topo.nccl_xml.undescribed import add_undescribed_nvlinks
from collscope.topo.schema import add_device, add_link

__all__ = ["add_xml_topology", "NVSWITCH_NODE"]

logger = logging.getLogger(__name__)

NVSWITCH_NODE = "NVSwitch"
_NCCL_DEFAULT_PCI_GBPS = 12.0  # topo.cc: width 0 -> 16, unknown speed -> 60; 16 * 60 / 80


def add_xml_topology(graph: nx.Graph, topo: NcclTopoXml, *, source: str, generation: GpuGeneration | None = None
                     ) -> None:
    """Add the devices and links of ``topo`` to ``graph`` (see the module docstring for names). ``generation``: the
    GPU the user named (``--gpu``), used where the file leaves NVLink out (:mod:`.undescribed`)."""
    builder = _Builder(graph, topo, source)
    builder.add_cpus()
    for cpu, numa in zip(topo.cpus, builder.numa_names, strict=True):
        for pci in cpu.pcis:
            builder.add_pci(pci, cpu, parent=numa, parent_is_cpu=True)
        for net in cpu.nets:
            builder.add_nic(net.name, None, cpu, parent=numa, parent_is_cpu=True, net=net)
    builder.add_gpu_links()
    add_undescribed_nvlinks(graph, topo, [(name, pci) for name, pci, _ in builder.gpus], source=source,
                            generation=generation)
    builder.add_smp_links()


class _Builder:
    def __init__(self, graph: nx.Graph, topo: NcclTopoXml, source: str) -> None:
        self.graph = graph
        self.topo = topo
        self.source = source
        self.numa_names: list[str] = []
        self.numa_of_cpu: dict[int, str] = {}
        self.gpu_names = self._gpu_names()
        self.gpus: list[tuple[str, XmlPci, XmlCpu]] = []

    # -- names

    def _gpu_names(self) -> dict[str, tuple[str, bool]]:
        """busid -> (GPU name, index assumed from bus order)."""
        gpus = [pci for _, pci in self.topo.pcis() if _is_gpu(pci)]
        taken = {pci.gpu.dev for pci in gpus if pci.gpu is not None and pci.gpu.dev is not None}
        names: dict[str, tuple[str, bool]] = {}
        free = (i for i in range(len(gpus) + len(taken) + 1) if i not in taken)
        for pci in sorted(gpus, key=lambda p: p.busid):
            dev = pci.gpu.dev if pci.gpu is not None else None
            if dev is not None:
                names[pci.busid] = (f"GPU{dev}", False)
        for pci in sorted(gpus, key=lambda p: p.busid):
            if pci.busid not in names:
                names[pci.busid] = (f"GPU{next(free)}", True)
        return names

    def _numa_name(self, cpu: XmlCpu) -> str:
        base = f"NUMA{cpu.numaid}" if cpu.numaid is not None and cpu.numaid >= 0 else "NUMA?"
        name, k = base, 0
        while name in self.numa_names:
            k += 1
            name = f"{base}#{k}"
        return name

    # -- nodes

    def add_cpus(self) -> None:
        for cpu in self.topo.cpus:
            name = self._numa_name(cpu)
            self.numa_names.append(name)
            self.numa_of_cpu[id(cpu)] = name
            add_device(
                self.graph,
                name,
                "numa",
                numa=cpu.numaid if cpu.numaid is not None and cpu.numaid >= 0 else None,
                cpu_affinity=cpu.affinity,
                arch=cpu.arch,
                vendor=cpu.vendor,
                familyid=cpu.familyid,
                modelid=cpu.modelid,
                host_hash=cpu.host_hash,
                source=self.source,
            )

    def add_pci(self, pci: XmlPci, cpu: XmlCpu, *, parent: str, parent_is_cpu: bool) -> None:
        if _is_gpu(pci):
            self._add_gpu(pci, cpu, parent=parent, parent_is_cpu=parent_is_cpu)
        elif pci.nets:
            for net in pci.nets:
                self.add_nic(net.name, pci, cpu, parent=parent, parent_is_cpu=parent_is_cpu, net=net)
        elif pci.is_nic:
            self.add_nic(f"NIC:{pci.busid}", pci, cpu, parent=parent, parent_is_cpu=parent_is_cpu, net=None)
        elif pci.is_nvswitch:
            logger.debug("%s: NVSwitch pci %s is not a data path; skipped", self.source, pci.busid)
        elif pci.is_bridge or pci.children:
            name = f"PCIe:{pci.busid}"
            add_device(
                self.graph,
                name,
                "pcie_switch",
                pci_bus_id=pci.busid,
                vendor=pci.vendor,
                device=pci.device,
                numa=self.numa_of_cpu[id(cpu)],
                numa_id=self._numa_id(cpu),
                source=self.source,
            )
            self._link_up(name, pci, parent, parent_is_cpu)
            for child in pci.children:
                self.add_pci(child, cpu, parent=name, parent_is_cpu=False)
        else:
            logger.debug(
                "%s: pci %s class %s is neither GPU, NIC nor bridge; skipped",
                self.source,
                pci.busid,
                pci.pci_class,
            )

    def _add_gpu(self, pci: XmlPci, cpu: XmlCpu, *, parent: str, parent_is_cpu: bool) -> None:
        name, assumed = self.gpu_names[pci.busid]
        gpu = pci.gpu
        add_device(
            self.graph,
            name,
            "gpu",
            index=int(name[3:]),
            index_source="assumed: NVML PCI bus-id order" if assumed else "captured: <gpu dev=...>",
            pci_bus_id=pci.busid,
            sm=gpu.sm if gpu else None,
            arch=gpu.arch if gpu else None,
            rank=gpu.rank if gpu else None,
            gdr=gpu.gdr if gpu else None,
            pci_device=pci.device,
            numa=self.numa_of_cpu[id(cpu)],
            numa_id=self._numa_id(cpu),
            source=self.source,
        )
        self._link_up(name, pci, parent, parent_is_cpu)
        self.gpus.append((name, pci, cpu))

    def add_nic(
        self,
        name: str,
        pci: XmlPci | None,
        cpu: XmlCpu,
        *,
        parent: str,
        parent_is_cpu: bool,
        net: XmlNet | None,
    ) -> None:
        add_device(
            self.graph,
            name,
            "nic",
            label=None,
            pci_bus_id=pci.busid if pci else None,
            rate_gbps=net.rate_gbitps if net else None,
            speed_gbps=net.rate_gbitps if net else None,
            speed_source=f"captured: NCCL XML <net speed={net.speed_mbps:g}> (Mb/s)"
            if net is not None and net.speed_mbps is not None else None,
            port=net.port if net else None,
            guid=net.guid if net else None,
            net_dev=net.dev if net else None,
            gdr=net.gdr if net else None,
            numa=self.numa_of_cpu[id(cpu)],
            numa_id=self._numa_id(cpu),
            source=self.source,
        )
        pcie = pci_link_gbps(pci.link_speed, pci.link_width) if pci else None
        if net is not None and net.bw_gbps is not None:
            bw: float | None = net.bw_gbps
            bw_source = f"captured: net speed={net.speed_mbps:g} Mb/s (NCCL speed/8000)"
        elif pci is not None:
            bw, bw_source = self._pci_bw(pci)
        else:
            bw, bw_source = None, "unknown: <net> without speed="
        kind = "host" if parent_is_cpu else "pcie"
        add_link(
            self.graph,
            name,
            parent,
            kind,
            bw_gbps=bw,
            bw_source=bw_source,
            pcie_bw_gbps=pcie,
            source=self.source,
        )

    # -- edges

    def _pci_bw(self, pci: XmlPci) -> tuple[float, str]:
        bw = pci_link_gbps(pci.link_speed, pci.link_width)
        if bw is not None:
            return bw, f"captured: link_speed={pci.link_speed} x{pci.link_width} (NCCL width*speed/80)"
        return _NCCL_DEFAULT_PCI_GBPS, (
            f"assumed: NCCL default PCI Gen3 x16 (link_speed={pci.link_speed!r}, link_width={pci.link_width})"
        )

    def _link_up(self, name: str, pci: XmlPci, parent: str, parent_is_cpu: bool) -> None:
        bw, bw_source = self._pci_bw(pci)
        add_link(
            self.graph,
            name,
            parent,
            "host" if parent_is_cpu else "pcie",
            bw_gbps=bw,
            bw_source=bw_source,
            link_speed=pci.link_speed or None,
            link_width=pci.link_width,
            source=self.source,
        )

    def add_gpu_links(self) -> None:
        for name, pci, cpu in self.gpus:
            gpu = pci.gpu
            if gpu is None:
                continue
            to_switch = sum(lk.count for lk in gpu.links if lk.to_nvswitch and lk.kind == "nvlink")
            if to_switch:
                add_device(self.graph, NVSWITCH_NODE, "nvswitch", source=self.source)
                self._nvlink(name, NVSWITCH_NODE, gpu, to_switch, "nvlink")
            for lk in gpu.links:
                if lk.to_nvswitch and lk.kind == "nvlink":
                    continue
                if lk.to_cpu:
                    self._nvlink(name, self.numa_of_cpu[id(cpu)], gpu, lk.count, lk.kind)
                elif lk.target in self.gpu_names:
                    peer = self.gpu_names[lk.target][0]
                    if peer != name:
                        self._nvlink(name, peer, gpu, lk.count, lk.kind)
                else:
                    logger.debug(
                        "%s: %s %s link to %s (not in the XML) skipped", self.source, name, lk.kind, lk.target
                    )
            for c2c in gpu.c2c:
                bw = c2c.total_gbps
                add_link(
                    self.graph,
                    name,
                    self.numa_of_cpu[id(cpu)],
                    "c2c",
                    bw_gbps=bw,
                    bw_source=f"captured: c2c bw={c2c.bw_mbps:g} MB/s x {c2c.count}"
                    if bw is not None
                    else "unknown: <c2c> without bw=",
                    nlinks=c2c.count,
                    source=self.source,
                )

    def _nvlink(self, a: str, b: str, gpu: XmlGpu, count: int, kind: str) -> None:
        if self.graph.has_edge(a, b) and self.graph.edges[a, b].get("nlinks", 0) >= count:
            return  # the peer already described this link (each side lists its own view)
        bw: float | None
        nccl: dict[str, object] = {}
        if kind == "xgmi":
            per = xgmi_gbps_per_link(gpu.arch)
            bw = None if per is None else round(per * count, 6)
            bw_source = (
                f"assumed: RCCL topo.h ncclTopoXGMISpeed({gpu.arch}) {per:g} x {count}"
                if per is not None
                else f"unknown: no xGMI speed for arch {gpu.arch!r}"
            )
        elif gpu.sm is not None:
            bw, bw_source = _nvlink_data_rate(gpu.sm, count)
            nccl_per = nvlink_gbps_per_link(gpu.sm)
            nccl = {"nccl_bw_gbps": round(nccl_per * count, 6),
                    "nccl_bw_source": f"NCCL topo.h {_nvlink_const(gpu.sm)} {nccl_per:g} x {count}"}
        else:
            bw, bw_source = None, "unknown: <gpu> without sm="
        add_link(
            self.graph,
            a,
            b,
            "nvlink",
            bw_gbps=bw,
            bw_source=bw_source,
            nlinks=count,
            fabric=kind,
            source=self.source,
            **nccl,
        )

    def add_smp_links(self) -> None:
        cpus = list(zip(self.topo.cpus, self.numa_names, strict=True))
        for i, (cpu_a, a) in enumerate(cpus):
            for cpu_b, b in cpus[i + 1 :]:
                if cpu_a.host_hash != cpu_b.host_hash:
                    continue  # NCCL connects only the cpus of one system (host)
                bw, const = inter_cpu_gbps(cpu_a)
                bw_source = f"assumed: NCCL topo.h {const}" if bw is not None else f"unknown: {const}"
                add_link(self.graph, a, b, "smp", bw_gbps=bw, bw_source=bw_source, source=self.source)

    @staticmethod
    def _numa_id(cpu: XmlCpu) -> int | None:
        return cpu.numaid if cpu.numaid is not None and cpu.numaid >= 0 else None


def _is_gpu(pci: XmlPci) -> bool:
    return pci.gpu is not None or pci.is_gpu


def _nvlink_data_rate(sm: int, count: int) -> tuple[float | None, str]:
    """The NVLink data rate of ``count`` links of a GPU of compute capability ``sm`` (collscope's one NVLink
    bandwidth, :mod:`collscope.topo.gpus`), not NCCL's model constant (kept beside it as ``nccl_bw_gbps``)."""
    gen = gpu_generation(sm=sm)
    if gen is None or not gen.nvlink_link_gbps:
        return None, f"unknown: no NVLink data rate known for sm={sm} (NCCL's model constant kept as nccl_bw_gbps)"
    return round(gen.nvlink_link_gbps * count, 6), (
        f"assumed: table rate NVLink{gen.nvlink_gen} {gen.nvlink_link_gbps:g} GB/s per link per direction x {count} "
        f"({gen.name} class from sm={sm})")


def _nvlink_const(sm: int) -> str:
    if sm >= 100:
        return "SM100_NVLINK_BW"
    if sm >= 90:
        return "SM90_NVLINK_BW"
    if sm == 86:
        return "SM86_NVLINK_BW"
    if sm >= 80:
        return "SM80_NVLINK_BW"
    if sm >= 70:
        return "SM70_NVLINK_BW"
    if sm >= 60:
        return "SM60_NVLINK_BW"
    return "SM80_NVLINK_BW (default)"
