"""Frozen records of NCCL's topology XML and graph XML, as :mod:`collscope.topo.nccl_xml.parse` reads them.

Element and attribute names follow NCCL's ``src/graph/xml.cc`` and ``topo.cc`` (see
``reference/nccl-facts.md`` section 6); unknown attributes are kept in ``attrs``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from collscope.topo.nccl_xml.rates import pci_link_gbps

__all__ = [
    "XmlNet",
    "XmlNvLink",
    "XmlC2c",
    "XmlGpu",
    "XmlPci",
    "XmlCpu",
    "NcclTopoXml",
    "NcclGraph",
    "NcclGraphs",
    "GRAPH_KINDS",
    "NVSWITCH_FABRIC_TARGET",
]

NVSWITCH_FABRIC_TARGET = "fffffff:ff:ff.0"
"""The ``<nvlink target=...>`` NCCL writes when the NVSwitches are collapsed into one (VMs)."""

GRAPH_KINDS: dict[int, str] = {0: "ring", 1: "tree", 2: "collnet", 3: "nvls", 4: "collnet_direct"}
"""Graph id -> kind (comment in NCCL's ``src/include/graph.h``)."""

_PATTERN_NAMES = {1: "balanced_tree", 2: "split_tree", 3: "tree", 4: "ring", 5: "nvls", 6: "collnet_direct"}


# ---------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class XmlNet:
    """One ``<net>`` (a network device port) below a ``<nic>``."""

    name: str
    dev: int | None
    speed_mbps: float | None
    port: int | None
    gdr: bool | None
    guid: str | None
    attrs: dict[str, str] = field(default_factory=dict)
    """Every attribute as written (``latency``, ``maxconn``, ``coll``, ...)."""

    @property
    def rate_gbitps(self) -> float | None:
        """Line rate in Gb/s (``speed`` is Mb/s)."""
        return None if self.speed_mbps is None else self.speed_mbps / 1000.0

    @property
    def bw_gbps(self) -> float | None:
        """Bandwidth NCCL gives the NET node, GB/s: ``speed / 8000`` (400000 -> 50)."""
        return None if self.speed_mbps is None else self.speed_mbps / 8000.0


@dataclass(frozen=True, slots=True)
class XmlNvLink:
    """One ``<nvlink>`` below a ``<gpu>`` (or, with ``kind="xgmi"``, an RCCL ``<xgmi>``)."""

    target: str
    """Bus id of the peer (lower case); ``fffffff:ff:ff.0`` is the collapsed NVSwitch fabric."""
    count: int
    """Number of links to that peer."""
    tclass: str | None
    """PCI class of the peer: ``0x0302..`` GPU, ``0x068000`` NVSwitch, a CPU class for NVLink-to-CPU."""
    kind: str = "nvlink"

    @property
    def to_nvswitch(self) -> bool:
        """The peer is an NVSwitch: ``tclass="0x068000"`` or the collapsed fabric target."""
        return self.target == NVSWITCH_FABRIC_TARGET or (self.tclass or "").lower() == "0x068000"

    @property
    def to_cpu(self) -> bool:
        """NVLink to the CPU (POWER9): ``tclass="0x068001"`` (kvDictPciClass in NCCL topo.cc)."""
        return (self.tclass or "").lower() == "0x068001"


@dataclass(frozen=True, slots=True)
class XmlC2c:
    """One Grace ``<c2c>`` below a ``<gpu>``: ``count`` links of ``bw`` MB/s each (NCCL topo.cc)."""

    count: int
    bw_mbps: float | None

    @property
    def total_gbps(self) -> float | None:
        return None if self.bw_mbps is None else self.bw_mbps * self.count / 1000.0


@dataclass(frozen=True, slots=True)
class XmlGpu:
    """The ``<gpu>`` below a GPU ``<pci>``."""

    dev: int | None
    sm: int | None
    """Compute capability x 10 (90 for H100)."""
    rank: int | None
    gdr: bool | None
    links: tuple[XmlNvLink, ...]
    arch: str | None
    """RCCL only: the gcn architecture name (``gfx942``); ``None`` for NCCL."""
    c2c: tuple[XmlC2c, ...] = ()
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class XmlPci:
    """One ``<pci>``: a bridge/switch, a GPU, a NIC or another device, with what sits below it."""

    busid: str
    """``dddd:bb:dd.f``, lower case."""
    pci_class: str | None
    vendor: str | None
    device: str | None
    link_speed: str | None
    """As written: ``"32.0 GT/s PCIe"``, older kernels ``"16 GT/s"``, sometimes empty."""
    link_width: int | None
    children: tuple[XmlPci, ...]
    gpu: XmlGpu | None
    nets: tuple[XmlNet, ...]
    """The ``<net>`` elements of a ``<nic>`` below this pci."""
    pcilinks: tuple[str, ...] = ()
    """Targets of ``<pcilink>`` elements (PCI switch to PCI switch links)."""
    attrs: dict[str, str] = field(default_factory=dict)

    def _class_starts(self, prefix: str) -> bool:
        return (self.pci_class or "").lower().startswith(prefix)

    @property
    def is_bridge(self) -> bool:
        return self._class_starts("0x0604")

    @property
    def is_gpu(self) -> bool:
        return self._class_starts("0x03")

    @property
    def is_nic(self) -> bool:
        return self._class_starts("0x02")

    @property
    def is_nvswitch(self) -> bool:
        """Class ``0x068000`` (``0x068001`` is NCCL's CPU class, not a switch)."""
        return self._class_starts("0x0680") and not self._class_starts("0x068001")

    @property
    def link_gbps(self) -> float | None:
        """NCCL's bandwidth for this device's upstream link, GB/s (see :func:`pci_link_gbps`)."""
        return pci_link_gbps(self.link_speed, self.link_width)

    def walk(self) -> Iterator[XmlPci]:
        """This pci and every pci below it, in document order."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True, slots=True)
class XmlCpu:
    """One ``<cpu>`` (a NUMA node)."""

    numaid: int | None
    affinity: str | None
    arch: str | None
    vendor: str | None
    familyid: int | None
    modelid: int | None
    host_hash: str | None
    pcis: tuple[XmlPci, ...]
    nets: tuple[XmlNet, ...]
    """NICs attached directly to the cpu (``<nic>`` under ``<cpu>``, e.g. a VM's eth0)."""

    def walk(self) -> Iterator[XmlPci]:
        for pci in self.pcis:
            yield from pci.walk()


@dataclass(frozen=True, slots=True)
class NcclTopoXml:
    """A parsed ``<system>``."""

    version: str | None
    cpus: tuple[XmlCpu, ...]
    flavour: Literal["nccl", "rccl"]
    """``rccl`` when a ``<gpu>`` carries ``gcn`` or an ``<xgmi>`` link appears."""
    truncated: bool = False
    """True when parsed with ``allow_truncated=True`` from a cut text (the complete prefix only)."""

    def pcis(self) -> Iterator[tuple[XmlCpu, XmlPci]]:
        """Every pci with its cpu, in document order."""
        for cpu in self.cpus:
            for pci in cpu.walk():
                yield cpu, pci

    @property
    def gpu_count(self) -> int:
        return sum(1 for _, pci in self.pcis() if pci.gpu is not None or pci.is_gpu)

    @property
    def nets(self) -> tuple[XmlNet, ...]:
        """Every net, in document order (cpu-attached ones after that cpu's pci tree)."""
        out: list[XmlNet] = []
        for cpu in self.cpus:
            for pci in cpu.walk():
                out.extend(pci.nets)
            out.extend(cpu.nets)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class NcclGraph:
    """One ``<graph>`` of a graph dump: the channels NCCL's search chose for one algorithm."""

    id: int
    kind: str
    """From the id: ring, tree, collnet, nvls, collnet_direct (``unknown`` for other ids)."""
    pattern: int | None
    crossnic: int | None
    nchannels: int
    speed_intra: float | None
    """GB/s per channel inside the node (``speedintra``)."""
    speed_inter: float | None
    """GB/s per channel across nodes (``speedinter``)."""
    type_intra: str | None
    type_inter: str | None
    same_channels: int | None
    channels: tuple[tuple[tuple[str, int], ...], ...]
    """Each channel in order, e.g. ``(("net", 0), ("gpu", 3), ..., ("net", 0))``; gpu entries by ``dev``."""
    channel_ranks: tuple[tuple[int | None, ...], ...] = ()
    """Parallel to ``channels``: the ``rank`` attribute of each entry when written, else ``None``."""
    latency_inter: float | None = None

    @property
    def pattern_name(self) -> str | None:
        """NCCL_TOPO_PATTERN_* name (graph.h), e.g. ``ring`` for 4."""
        return None if self.pattern is None else _PATTERN_NAMES.get(self.pattern, "unknown")


@dataclass(frozen=True, slots=True)
class NcclGraphs:
    """A parsed ``<graphs>``."""

    version: str | None
    graphs: tuple[NcclGraph, ...]

    def by_kind(self, kind: str) -> tuple[NcclGraph, ...]:
        return tuple(g for g in self.graphs if g.kind == kind)
