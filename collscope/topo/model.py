"""NodeTopology: one node's hardware as a networkx graph, with the queries people ask of it.

The graph follows :mod:`collscope.topo.schema`. ``paths`` keeps the path classes exactly as captured
(``nvidia-smi topo -m``); pairs the capture did not cover are classified from the graph.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import pandas as pd

from collscope.topo.advice import topology_warnings
from collscope.topo.naming import natural_key
from collscope.topo.nic_choice import NicChoice, classify_nics
from collscope.topo.nvidia_smi.fabric import GpuFabric
from collscope.topo.nvlink_partition import NvlinkPartition, node_partition
from collscope.topo.paths import is_nvlink, nvlink_count, path_rank
from collscope.topo.schema import nodes_of_kind

__all__ = ["NodeTopology"]


@dataclass
class NodeTopology:
    """One node: GPUs, NICs, PCIe switches, host bridges, NUMA nodes, NVLink/NVSwitch."""

    host: str
    graph: nx.Graph
    paths: dict[str, dict[str, str]] = field(default_factory=dict)
    """Captured path classes, device name -> device name -> class (``"NV12"``, ``"PIX"``, ...)."""
    sources: list[str] = field(default_factory=list)
    """The captures this node was built from (file names or commands)."""
    sample: str | None = None
    """Name of the bundled sample when this is not a real capture of a machine."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Captures that describe more than the node's hardware: ``nccl_graphs`` (NCCL_GRAPH_DUMP_FILE,
    :class:`~collscope.topo.nccl_xml.records.NcclGraphs`), ``fabric`` (ibnetdiscover/iblinkinfo,
    :class:`~collscope.topo.infiniband.fabric.IbFabric`) and ``gpu_fabric`` (:attr:`gpu_fabric`)."""

    # ---- inventory -------------------------------------------------------------------------
    @property
    def gpus(self) -> list[str]:
        return nodes_of_kind(self.graph, "gpu")

    @property
    def nics(self) -> list[str]:
        return nodes_of_kind(self.graph, "nic")

    @property
    def has_nvswitch(self) -> bool:
        return bool(nodes_of_kind(self.graph, "nvswitch"))

    @property
    def gpu_fabric(self) -> list[GpuFabric]:
        """Each GPU's NVLink fabric registration (the Fabric blocks of ``nvidia-smi -q``); empty when not captured."""
        return list(self.extras.get("gpu_fabric", ()))

    def nvlink_partition(self) -> NvlinkPartition | None:
        """The NVLink partition every GPU of the node is registered in (:func:`~.nvlink_partition.node_partition`)."""
        return node_partition(self.gpu_fabric)

    def _devices(self) -> list[str]:
        return self.gpus + self.nics

    # ---- paths -----------------------------------------------------------------------------
    def path_class(self, a: str, b: str) -> str:
        """The ``nvidia-smi topo -m`` class of the path between two devices (GPUs or NICs)."""
        for name in (a, b):
            if name not in self.graph:
                raise KeyError(f"{name!r} is not a device of {self.host}; devices: {', '.join(self._devices())}")
        if a == b:
            return "X"
        captured = self.paths.get(a, {}).get(b)
        if captured is not None:
            return captured
        return self._classify(a, b)

    def _nvlinks_between(self, a: str, b: str) -> int:
        g = self.graph
        if g.has_edge(a, b) and g.edges[a, b]["kind"] == "nvlink":
            return int(g.edges[a, b].get("nlinks") or 1)
        for sw in nodes_of_kind(g, "nvswitch"):
            if g.has_edge(a, sw) and g.has_edge(b, sw):
                return min(int(g.edges[a, sw].get("nlinks") or 1), int(g.edges[b, sw].get("nlinks") or 1))
        return 0

    def _pcie_path(self, a: str, b: str) -> list[str] | None:
        g = self.graph
        view = nx.subgraph_view(g, filter_edge=lambda u, v: g.edges[u, v]["kind"] not in ("nvlink", "c2c"))
        try:
            return list(nx.shortest_path(view, a, b))
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            return None

    def _classify(self, a: str, b: str) -> str:
        links = self._nvlinks_between(a, b)
        if links:
            return f"NV{links}"
        path = self._pcie_path(a, b)
        if path is None:
            return "SYS"
        kinds = [self.graph.nodes[n]["kind"] for n in path[1:-1]]
        if kinds.count("numa") > 1:
            return "SYS"
        if "numa" in kinds:
            return "NODE" if kinds.count("host_bridge") != 1 else "PHB"
        if "host_bridge" in kinds:
            return "PHB"
        return "PIX" if kinds.count("pcie_switch") <= 1 else "PXB"

    def links(self) -> dict[str, dict[str, str]]:
        """Path class of every ordered pair of devices (both directions), self included as ``X``."""
        devices = self._devices()
        return {a: {b: self.path_class(a, b) for b in devices} for a in devices}

    def nic_choices(self) -> dict[str, NicChoice]:
        """Each NIC's role for NCCL (compute, front-end, slower, down, unknown): :mod:`collscope.topo.nic_choice`."""
        return classify_nics(self.graph, self.nics, gpus=self.gpus, distance=self.path_class)

    def left_out_nics(self) -> list[dict[str, Any]]:
        """The NICs never chosen as nearest (down ports, slower front-end NICs), each with its reason."""
        return [c.to_dict() for c in self.nic_choices().values() if c.left_out]

    def nearest_nics(self, gpu: str) -> tuple[list[str], str | None]:
        """The active compute NICs closest to ``gpu`` and the path class that reaches them (``None`` without one).

        Down ports and slower front-end NICs are never nearest (:meth:`left_out_nics` says which and why); NICs
        whose state the captures do not give (``topo -m`` alone) are kept."""
        nics = [n for n, c in self.nic_choices().items() if not c.left_out]
        if not nics:
            return [], None
        classes = {nic: self.path_class(gpu, nic) for nic in nics}
        best = min(classes.values(), key=path_rank)
        return [n for n in nics if classes[n] == best], best

    # ---- NVLink ----------------------------------------------------------------------------
    def nvlink_known(self) -> tuple[bool, str]:
        """Whether the captures say which NVLinks the GPUs have (``False`` with the reason when they do not).

        ``nvidia-smi topo -m`` and an NCCL dump's ``<gpu>`` elements do (no NVLink there means none); a
        hand-written NCCL_TOPO_FILE (``<pci>`` only) or ``--query-gpu`` alone do not."""
        g = self.graph
        gpus = self.gpus
        if not gpus or self.paths or any(d["kind"] == "nvlink" for _, _, d in g.edges(data=True)):
            return True, ""
        if any(g.nodes[gpu].get("sm") is not None for gpu in gpus):
            return True, ""
        if any(str(g.nodes[gpu].get("index_source", "")).startswith("assumed") for gpu in gpus):
            return False, ("the NCCL topology XML has no <gpu> elements (an NCCL_TOPO_FILE that describes PCIe "
                           "placement only; NCCL fills the GPUs and NVLinks in from the live system)")
        return False, "no capture describes the GPUs' links"

    def nvlink_domains(self) -> list[list[str]]:
        """Groups of GPUs that reach each other over NVLink (directly or through NVSwitch)."""
        g = self.graph
        nv = nx.Graph()
        nv.add_nodes_from(self.gpus)
        for u, v, d in g.edges(data=True):
            ends = {g.nodes[u].get("kind"), g.nodes[v].get("kind")}
            if d["kind"] == "nvlink" and ends <= {"gpu", "nvswitch"}:
                nv.add_edge(u, v)  # GPU-GPU, or GPU-NVSwitch (the switch joins its GPUs into one domain)
        for a, b in itertools.combinations(self.gpus, 2):
            if is_nvlink(self.paths.get(a, {}).get(b, "")):
                nv.add_edge(a, b)
        domains = []
        for comp in nx.connected_components(nv):
            gpus = sorted((n for n in comp if n in set(self.gpus)), key=natural_key)
            if gpus:
                domains.append(gpus)
        return sorted(domains, key=lambda d: natural_key(d[0]))

    def gpu_bandwidth_gbps(self, a: str, b: str) -> float | None:
        """Per-direction bandwidth between two GPUs in GB/s: NVLink if any, else the PCIe bottleneck."""
        if a == b:
            return None
        g = self.graph
        if g.has_edge(a, b) and g.edges[a, b]["kind"] == "nvlink":
            bw = g.edges[a, b]["bw_gbps"]
            return None if bw is None else float(bw)
        for sw in nodes_of_kind(g, "nvswitch"):
            if g.has_edge(a, sw) and g.has_edge(b, sw):
                bws = [g.edges[a, sw]["bw_gbps"], g.edges[b, sw]["bw_gbps"]]
                return None if None in bws else float(min(bws))
        path = self._pcie_path(a, b)
        if path is None:
            return None
        bws = [g.edges[u, v]["bw_gbps"] for u, v in itertools.pairwise(path)]
        known = [bw for bw in bws if bw is not None]
        return float(min(known)) if known else None

    def bandwidth_matrix(self) -> pd.DataFrame:
        """GPU x GPU per-direction bandwidth in decimal GB/s (NaN on the diagonal or when unknown)."""
        gpus = self.gpus
        data = [[self.gpu_bandwidth_gbps(a, b) for b in gpus] for a in gpus]
        return pd.DataFrame(data, index=gpus, columns=gpus, dtype=float)

    # ---- reports ---------------------------------------------------------------------------
    def warnings(self) -> list[str]:
        """What an expert would warn about on this node (:func:`collscope.topo.advice.topology_warnings`)."""
        return topology_warnings(self)

    def summary(self) -> dict[str, Any]:
        """A per-node summary: counts, models, NVLink domains, NIC rates, warnings."""
        g = self.graph
        models = sorted({str(g.nodes[n].get("model")) for n in self.gpus if g.nodes[n].get("model")})
        found = (nvlink_count(c) for row in self.paths.values() for c in row.values())
        nv_counts = sorted({n for n in found if n is not None})
        return {
            "host": self.host,
            "sample": self.sample,
            "gpus": len(self.gpus),
            "gpu_models": models,
            "nics": len(self.nics),
            "numa_nodes": len(nodes_of_kind(g, "numa")),
            "pcie_switches": len(nodes_of_kind(g, "pcie_switch")),
            "nvswitch": self.has_nvswitch,
            "nvlink_domains": self.nvlink_domains(),
            "nvlink_counts": nv_counts,
            "warnings": self.warnings(),
        }
