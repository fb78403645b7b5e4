"""Assemble one NodeTopology from whatever captures a node has."""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from collscope.topo.gpus import GpuGeneration, gpu_generation
from collscope.topo.infiniband.fabric import IbFabric
from collscope.topo.infiniband.host import Hca
from collscope.topo.infiniband.netdev import NetdevMap, merge_netdevs
from collscope.topo.model import NodeTopology
from collscope.topo.nccl_xml.graph import add_xml_topology
from collscope.topo.nccl_xml.records import NcclGraphs, NcclTopoXml
from collscope.topo.netif import NetInterface, merge_interfaces
from collscope.topo.nvidia_smi.fabric import GpuFabric
from collscope.topo.nvidia_smi.graph import graph_from_matrix
from collscope.topo.nvidia_smi.queries import GpuInfo, NvLink, TopoMatrix
from collscope.topo.rates import nic_gbps, nvlink_data_gbps_per_link, pcie_gbps
from collscope.topo.schema import add_device

__all__ = ["NodeCaptures", "build_node"]


@dataclass
class NodeCaptures:
    """Parsed captures of one node; any of them may be missing."""

    host: str = "localhost"
    matrix: TopoMatrix | None = None
    gpu_info: list[GpuInfo] = field(default_factory=list)
    nvlinks: list[NvLink] = field(default_factory=list)
    hcas: tuple[Hca, ...] = ()
    hca_origins: dict[str, str] = field(default_factory=dict)
    """CA name -> the capture it was first read from (names both sides of a disagreement between tools)."""
    netdevs: list[NetdevMap] = field(default_factory=list)
    xml: NcclTopoXml | None = None
    graphs: NcclGraphs | None = None
    fabric: IbFabric | None = None
    nic_names: list[str] = field(default_factory=list)
    """RDMA devices known only by name (``ibv_devices``)."""
    netifs: list[NetInterface] = field(default_factory=list)
    """Network interfaces (``ip -j addr`` / ``ip -j -s link``)."""
    netif_speeds: dict[str, int] = field(default_factory=dict)
    """Interface -> Mb/s, where the kernel said (``netif-speeds.json`` of ``topo collect``)."""
    gpu_fabric: list[GpuFabric] = field(default_factory=list)
    """Each GPU's NVLink fabric registration (the ``Fabric`` blocks of ``nvidia-smi -q``)."""
    sources: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    """Per kind of capture a node has at most one of (``CaptureFormat.single``): the file it came from."""
    errors: list[str] = field(default_factory=list)
    """Problems met while capturing (tool missing, tool failed); shown, never fatal on their own."""

    @property
    def empty(self) -> bool:
        return (self.matrix is None and self.xml is None and not self.hcas and not self.gpu_info and not self.netifs
                and not self.gpu_fabric)


def build_node(captures: NodeCaptures, *, gpu: str | None = None, sample: str | None = None) -> NodeTopology:
    """The node model. ``gpu`` names the GPU model when the captures do not (``"H100"``)."""
    generation: GpuGeneration | None = gpu_generation(gpu) if gpu else None
    if gpu and generation is None:
        from collscope.errors import ConfigError
        from collscope.topo.unmodelled_gpus import unknown_gpu_message

        raise ConfigError(unknown_gpu_message(gpu))
    models = {f"GPU{info.index}": info.name for info in captures.gpu_info}
    paths: dict[str, dict[str, str]] = {}
    if captures.matrix is not None:
        src = _source_named(captures, "nvidia-smi topo -m")
        graph, paths = graph_from_matrix(captures.matrix, source=src, models=models, generation=generation)
    else:
        graph = nx.Graph()
        if captures.xml is not None:
            add_xml_topology(graph, captures.xml, source=_source_named(captures, "NCCL topology XML"),
                             generation=generation)
    _fill_generation(graph)
    _add_gpu_info(graph, captures.gpu_info)
    _add_measured_nvlink(graph, captures.nvlinks)
    _add_hcas(graph, merge_netdevs(captures.hcas, captures.netdevs) if captures.netdevs else captures.hcas)
    _add_netdev_only(graph, captures.netdevs)
    for name in captures.nic_names:
        if name not in graph:
            add_device(graph, name, "nic")
    interfaces = merge_interfaces(captures.netifs, speeds=captures.netif_speeds)
    _add_interface_nics(graph, interfaces)
    extras: dict[str, object] = {k: v for k, v in (("nccl_graphs", captures.graphs), ("fabric", captures.fabric))
                                 if v is not None}
    if interfaces:
        extras["netifs"] = interfaces
    if captures.gpu_fabric:
        extras["gpu_fabric"] = list(captures.gpu_fabric)
    return NodeTopology(host=captures.host, graph=graph, paths=paths, sources=list(captures.sources), sample=sample,
                        extras=extras)


def _fill_generation(graph: nx.Graph) -> None:
    """GPUs known only by their compute capability (NCCL XML) get the family that ``sm`` implies."""
    for _, d in graph.nodes(data=True):
        if d.get("kind") == "gpu" and not d.get("generation") and d.get("sm") is not None:
            gen = gpu_generation(sm=int(d["sm"]))
            if gen is not None:
                d["generation"] = gen.name


def _source_named(captures: NodeCaptures, what: str) -> str:
    return f"captured: {what}" + (f" ({', '.join(captures.sources)})" if captures.sources else "")


def _add_gpu_info(graph: nx.Graph, infos: list[GpuInfo]) -> None:
    for info in infos:
        name = f"GPU{info.index}"
        add_device(graph, name, "gpu", index=info.index, model=info.name, pci_bus_id=info.pci_bus_id,
                   pcie_gen_max=info.pcie_gen_max, pcie_width_max=info.pcie_width_max)
        bw = pcie_gbps(info.pcie_gen_max, info.pcie_width_max)
        if bw is None:
            continue
        for other in list(graph.neighbors(name)):
            edge = graph.edges[name, other]
            if edge["kind"] == "pcie":
                edge["bw_gbps"] = bw
                edge["bw_source"] = (f"captured: nvidia-smi --query-gpu pcie.link Gen{info.pcie_gen_max} "
                                     f"x{info.pcie_width_max}")


def _add_measured_nvlink(graph: nx.Graph, links: list[NvLink]) -> None:
    """NVLink rates from ``nvidia-smi nvlink -s``: its per-link speed is the signalling rate, converted to the data
    rate (:func:`collscope.topo.rates.nvlink_data_gbps_per_link`), so the edge keeps one definition of NVLink
    bandwidth whatever the capture."""
    per_gpu: dict[str, list[float]] = {}
    for link in links:
        if link.active and link.speed_gbps is not None:
            per_gpu.setdefault(f"GPU{link.gpu_index}", []).append(link.speed_gbps)
    for gpu, speeds in per_gpu.items():
        if gpu not in graph:
            continue
        gen = gpu_generation(graph.nodes[gpu].get("generation") or graph.nodes[gpu].get("model"))
        per_link, how = nvlink_data_gbps_per_link(min(speeds), gen)
        for other in list(graph.neighbors(gpu)):
            edge = graph.edges[gpu, other]
            if edge["kind"] == "nvlink" and edge.get("nlinks"):
                edge["bw_gbps"] = round(per_link * edge["nlinks"], 3)
                edge["bw_source"] = f"captured: nvidia-smi nvlink -s: {how} x {edge['nlinks']}"


def _add_hcas(graph: nx.Graph, hcas: tuple[Hca, ...]) -> None:
    for hca in hcas:
        ports = [
            {"port": p.port, "state": p.state, "physical_state": p.physical_state, "rate_gbps": p.rate_gbps,
             "link_layer": p.link_layer, "lid": p.lid, "netdev": p.netdev}
            for p in hca.ports
        ]
        active = [p.rate_gbps for p in hca.ports if p.is_up and p.rate_gbps is not None]
        speed = max(active) if active else None
        netdevs = [p.netdev for p in hca.ports if p.netdev]
        add_device(graph, hca.name, "nic", ports=ports, ca_type=hca.ca_type, firmware=hca.firmware,
                   node_guid=hca.node_guid,
                   speed_gbps=speed, netdev=netdevs[0] if netdevs else None)
        bw = nic_gbps(speed)
        if bw is None:
            continue
        for other in list(graph.neighbors(hca.name)):
            edge = graph.edges[hca.name, other]
            if edge["kind"] == "pcie" and edge["bw_gbps"] is None:
                edge["bw_gbps"] = bw
                edge["bw_source"] = f"captured: ibstat rate {speed:g} Gb/s (NIC line rate)"





def _add_interface_nics(graph: nx.Graph, interfaces: list[NetInterface]) -> None:
    """On a node without RDMA NICs, its data interfaces (Ethernet/IPoIB, not loopback) are its NICs: the rails of a
    CPU cluster, by interface name. With RDMA NICs they stay in ``extras["netifs"]`` only (``ib0`` is already an
    HCA's netdev, ``eth0`` a front-end port)."""
    if any(d.get("kind") == "nic" for _, d in graph.nodes(data=True)):
        return
    for nif in interfaces:
        if not nif.is_rail_candidate:
            continue
        gbps = nif.speed_mbps / 1000 if nif.speed_mbps else None
        layer = "InfiniBand" if nif.link_type == "infiniband" else "Ethernet"
        add_device(graph, nif.name, "nic", ifname=nif.name, addresses=list(nif.addresses), mtu=nif.mtu,
                   netdev=nif.name, speed_gbps=gbps if nif.is_up else None, rdma=False,  # a plain netdev: no RoCE
                   ports=[{"port": 1, "state": "Active" if nif.is_up else "Down", "physical_state": nif.operstate,
                           "rate_gbps": gbps, "link_layer": layer, "lid": None, "netdev": nif.name}])


def _add_netdev_only(graph: nx.Graph, maps: list[NetdevMap]) -> None:
    """NICs that only ``ibdev2netdev`` reported (no ibstat): ports with the state it prints."""
    for m in maps:
        if m.ca in graph and graph.nodes[m.ca].get("ports"):
            continue
        add_device(graph, m.ca, "nic")
        ports = list(graph.nodes[m.ca].get("ports") or [])
        ports.append({"port": m.port, "state": m.port_state, "physical_state": None, "rate_gbps": None,
                      "link_layer": None, "lid": None, "netdev": m.netdev})
        graph.nodes[m.ca]["ports"] = ports
        graph.nodes[m.ca].setdefault("netdev", m.netdev)
        if m.pci_bus_id:
            graph.nodes[m.ca].setdefault("pci_bus_id", m.pci_bus_id)
