"""Parsers for NCCL's topology XML (``NCCL_TOPO_DUMP_FILE`` / ``NCCL_TOPO_FILE``) and graph XML
(``NCCL_GRAPH_DUMP_FILE`` / ``NCCL_GRAPH_FILE``), RCCL's variant included.

The parsers are pure: text in, frozen records out, :class:`collscope.errors.ParseError` (with the line)
for anything that is not the expected format. Element and attribute names follow NCCL's
``src/graph/xml.cc`` and ``topo.cc`` (see ``reference/nccl-facts.md`` section 6); unknown elements and
attributes are kept (``attrs``) or skipped, because newer NCCL versions add them.

Truncated dumps (people paste the head of a dump into an issue) raise a ``ParseError`` naming the line
where the text ends and the closing tags that are missing. ``allow_truncated=True`` instead keeps the
complete prefix: every element whose start tag was read, with its children so far, and sets
``NcclTopoXml.truncated``. The default stays strict so a cut file is never mistaken for a whole node.

The NCCL bandwidth model for the XML links (``pci_link_gbps``, ``nvlink_gbps_per_link``, ...) lives
here too, since it interprets the same attributes; :mod:`collscope.topo.xml_graph` turns the records
into the topology graph.
"""

from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, cast

from ..errors import ParseError

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
    "parse_nccl_topo_xml",
    "parse_nccl_graph_xml",
    "looks_like_nccl_topo_xml",
    "looks_like_nccl_graph_xml",
    "pci_link_gbps",
    "nvlink_gbps_per_link",
    "xgmi_gbps_per_link",
    "inter_cpu_gbps",
]

logger = logging.getLogger(__name__)

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


# ---------------------------------------------------------------------------------------------- reading


_MAX_DEPTH = 200


@dataclass(slots=True)
class _XmlDoc:
    """An element tree with the line of each start tag (ElementTree keeps none)."""

    source: str
    root: ET.Element
    lines: dict[ET.Element, int]
    truncated: bool

    def line(self, el: ET.Element) -> int | None:
        return self.lines.get(el)


def _read_xml(text: str, source: str, *, root_tag: str, what: str, allow_truncated: bool) -> _XmlDoc:
    """Parse ``text`` line by line with ElementTree's pull parser, recording each element's line.

    A text that is a valid prefix but ends inside open elements raises, naming the missing closing
    tags, unless ``allow_truncated`` (then the elements read so far are returned).
    """
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    lines: dict[ET.Element, int] = {}
    stack: list[ET.Element] = []
    root: ET.Element | None = None

    def drain(lineno: int) -> None:
        nonlocal root
        for event, el in cast("Iterator[tuple[str, ET.Element]]", parser.read_events()):
            if event == "start":
                if root is None:
                    root = el
                    if el.tag != root_tag:
                        raise ParseError(source, lineno, f"<{root_tag}> root element ({what})", f"<{el.tag}>")
                lines[el] = lineno
                stack.append(el)
                if len(stack) > _MAX_DEPTH:  # the record builders recurse; real dumps nest ~10 deep
                    raise ParseError(source, lineno, f"at most {_MAX_DEPTH} nested elements", f"<{el.tag}>")
            elif stack:
                stack.pop()

    pieces = text.split("\n")
    lineno = 1
    try:
        for lineno, piece in enumerate(pieces, start=1):
            parser.feed(piece + "\n" if lineno < len(pieces) else piece)
            drain(lineno)
    except ET.ParseError as exc:
        raise ParseError(source, exc.position[0], f"well-formed {what}", _expat_message(exc)) from None
    except (ValueError, LookupError) as exc:  # e.g. an unknown encoding= in the declaration
        raise ParseError(source, lineno, f"well-formed {what}", str(exc)) from None
    truncated = False
    try:
        parser.close()
        drain(lineno)
    except (ET.ParseError, ValueError, LookupError) as exc:
        if root is None:
            raise ParseError(source, lineno, f"<{root_tag}> root element ({what})", "end of text") from None
        if not stack:
            raise ParseError(source, lineno, f"well-formed {what}", str(exc)) from None
        if not allow_truncated:
            closing = "".join(f"</{el.tag}>" for el in reversed(stack))
            raise ParseError(
                source,
                lineno,
                f"closing tags {closing} (the text ends inside <{stack[-1].tag}> opened on line "
                f"{lines.get(stack[-1])}; a truncated dump?)",
                "end of text",
            ) from None
        truncated = True
    if root is None:
        raise ParseError(source, lineno, f"<{root_tag}> root element ({what})", "end of text")
    return _XmlDoc(source, root, lines, truncated)


def _expat_message(exc: ET.ParseError) -> str:
    return re.sub(r": line \d+, column \d+$", "", str(exc))


def _attr_str(el: ET.Element, name: str) -> str | None:
    value = el.get(name)
    return None if value is None or not value.strip() else value.strip()


def _attr_int(doc: _XmlDoc, el: ET.Element, name: str) -> int | None:
    value = _attr_str(el, name)
    if value is None:
        return None
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        raise ParseError(doc.source, doc.line(el), f"an integer {name}= on <{el.tag}>", value) from None


def _attr_float(doc: _XmlDoc, el: ET.Element, name: str) -> float | None:
    value = _attr_str(el, name)
    if value is None:
        return None
    try:
        result = float(value)
    except ValueError:
        result = float("nan")
    if result != result or result in (float("inf"), float("-inf")):
        raise ParseError(doc.source, doc.line(el), f"a number {name}= on <{el.tag}>", value)
    return result


def _attr_bool(doc: _XmlDoc, el: ET.Element, name: str) -> bool | None:
    value = _attr_int(doc, el, name)
    return None if value is None else value != 0


# ---------------------------------------------------------------------------------------------- sniffers

_PROLOGUE = re.compile(r"\s*(?:<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^\[>]*(?:\[.*?\])?\s*>)", re.DOTALL)


def _root_name(text: str) -> str | None:
    pos = 1 if text.startswith("\ufeff") else 0
    while True:
        m = _PROLOGUE.match(text, pos)
        if m is None:
            break
        pos = m.end()
    m = re.compile(r"\s*<([A-Za-z_][\w.-]*)(?=[\s/>])").match(text, pos)
    return m.group(1) if m else None


def looks_like_nccl_topo_xml(text: str) -> bool:
    """True when the root element is ``<system`` (after whitespace, an XML declaration, comments)."""
    return _root_name(text) == "system"


def looks_like_nccl_graph_xml(text: str) -> bool:
    """True when the root element is ``<graphs`` (after whitespace, an XML declaration, comments)."""
    return _root_name(text) == "graphs"


# ---------------------------------------------------------------------------------------------- topology


def parse_nccl_topo_xml(text: str, source: str = "<text>", *, allow_truncated: bool = False) -> NcclTopoXml:
    """Parse a topology XML written by NCCL/RCCL (``NCCL_TOPO_DUMP_FILE``) or by hand (``NCCL_TOPO_FILE``).

    Raises ParseError when the text is not well-formed XML, its root is not ``<system>``, or an
    attribute NCCL reads as a number is not one. A cut text raises too unless ``allow_truncated``.
    """
    doc = _read_xml(
        text, source, root_tag="system", what="NCCL topology XML", allow_truncated=allow_truncated
    )
    cpus: list[XmlCpu] = []
    for el in doc.root:
        if el.tag == "cpu":
            cpus.append(_cpu(doc, el))
        else:
            logger.debug("%s:%s: skipping <%s> under <system>", source, doc.line(el), el.tag)
    rccl = any(
        pci.gpu is not None and (pci.gpu.arch is not None or any(lk.kind == "xgmi" for lk in pci.gpu.links))
        for cpu in cpus
        for pci in cpu.walk()
    )
    return NcclTopoXml(
        version=doc.root.get("version"),
        cpus=tuple(cpus),
        flavour="rccl" if rccl else "nccl",
        truncated=doc.truncated,
    )


def _cpu(doc: _XmlDoc, el: ET.Element) -> XmlCpu:
    pcis: list[XmlPci] = []
    nets: list[XmlNet] = []
    for sub in el:
        if sub.tag == "pci":
            pcis.append(_pci(doc, sub))
        elif sub.tag == "nic":
            nets.extend(_nets(doc, sub))
        else:
            logger.debug("%s:%s: skipping <%s> under <cpu>", doc.source, doc.line(sub), sub.tag)
    return XmlCpu(
        numaid=_attr_int(doc, el, "numaid"),
        affinity=_attr_str(el, "affinity"),
        arch=_attr_str(el, "arch"),
        vendor=_attr_str(el, "vendor"),
        familyid=_attr_int(doc, el, "familyid"),
        modelid=_attr_int(doc, el, "modelid"),
        host_hash=_attr_str(el, "host_hash"),
        pcis=tuple(pcis),
        nets=tuple(nets),
    )


def _pci(doc: _XmlDoc, el: ET.Element) -> XmlPci:
    busid = _attr_str(el, "busid")
    if busid is None:
        raise ParseError(doc.source, doc.line(el), "a busid= attribute on <pci>", found=_start_tag(el))
    children: list[XmlPci] = []
    nets: list[XmlNet] = []
    gpu: XmlGpu | None = None
    pcilinks: list[str] = []
    for sub in el:
        if sub.tag == "pci":
            children.append(_pci(doc, sub))
        elif sub.tag == "gpu":
            gpu = _gpu(doc, sub)
        elif sub.tag == "nic":
            nets.extend(_nets(doc, sub))
        elif sub.tag == "pcilink" and sub.get("target"):
            pcilinks.append(sub.get("target", "").strip().lower())
        else:
            logger.debug("%s:%s: skipping <%s> under <pci>", doc.source, doc.line(sub), sub.tag)
    return XmlPci(
        busid=busid.lower(),
        pci_class=_attr_str(el, "class"),
        vendor=_attr_str(el, "vendor"),
        device=_attr_str(el, "device"),
        link_speed=el.get("link_speed"),
        link_width=_attr_int(doc, el, "link_width"),
        children=tuple(children),
        gpu=gpu,
        nets=tuple(nets),
        pcilinks=tuple(pcilinks),
        attrs=dict(el.attrib),
    )


def _gpu(doc: _XmlDoc, el: ET.Element) -> XmlGpu:
    links: list[XmlNvLink] = []
    c2c: list[XmlC2c] = []
    for sub in el:
        if sub.tag in ("nvlink", "xgmi"):
            target = _attr_str(sub, "target")
            count = _attr_int(doc, sub, "count")
            if target is None or count is None:
                raise ParseError(
                    doc.source, doc.line(sub), f"target= and count= on <{sub.tag}>", found=_start_tag(sub)
                )
            links.append(XmlNvLink(target.lower(), count, _attr_str(sub, "tclass"), kind=sub.tag))
        elif sub.tag == "c2c":
            c2c.append(XmlC2c(_attr_int(doc, sub, "count") or 0, _attr_float(doc, sub, "bw")))
        else:
            logger.debug("%s:%s: skipping <%s> under <gpu>", doc.source, doc.line(sub), sub.tag)
    return XmlGpu(
        dev=_attr_int(doc, el, "dev"),
        sm=_attr_int(doc, el, "sm"),
        rank=_attr_int(doc, el, "rank"),
        gdr=_attr_bool(doc, el, "gdr"),
        links=tuple(links),
        arch=_attr_str(el, "gcn"),
        c2c=tuple(c2c),
        attrs=dict(el.attrib),
    )


def _nets(doc: _XmlDoc, nic: ET.Element) -> list[XmlNet]:
    nets: list[XmlNet] = []
    for sub in nic:
        if sub.tag != "net":
            logger.debug("%s:%s: skipping <%s> under <nic>", doc.source, doc.line(sub), sub.tag)
            continue
        name = _attr_str(sub, "name")
        if name is None:
            raise ParseError(doc.source, doc.line(sub), "a name= attribute on <net>", found=_start_tag(sub))
        nets.append(
            XmlNet(
                name=name,
                dev=_attr_int(doc, sub, "dev"),
                speed_mbps=_attr_float(doc, sub, "speed"),
                port=_attr_int(doc, sub, "port"),
                gdr=_attr_bool(doc, sub, "gdr"),
                guid=_attr_str(sub, "guid"),
                attrs=dict(sub.attrib),
            )
        )
    return nets


def _start_tag(el: ET.Element) -> str:
    attrs = "".join(f' {k}="{v}"' for k, v in el.attrib.items())
    return f"<{el.tag}{attrs}>"


# ---------------------------------------------------------------------------------------------- graphs


def parse_nccl_graph_xml(text: str, source: str = "<text>") -> NcclGraphs:
    """Parse a graph XML (``NCCL_GRAPH_DUMP_FILE`` output or an ``NCCL_GRAPH_FILE`` input)."""
    doc = _read_xml(text, source, root_tag="graphs", what="NCCL graph XML", allow_truncated=False)
    graphs: list[NcclGraph] = []
    for el in doc.root:
        if el.tag != "graph":
            logger.debug("%s:%s: skipping <%s> under <graphs>", source, doc.line(el), el.tag)
            continue
        graph_id = _attr_int(doc, el, "id")
        if graph_id is None:
            raise ParseError(source, doc.line(el), "an id= attribute on <graph>", found=_start_tag(el))
        channels: list[tuple[tuple[str, int], ...]] = []
        ranks: list[tuple[int | None, ...]] = []
        for ch in el:
            if ch.tag != "channel":
                logger.debug("%s:%s: skipping <%s> under <graph>", source, doc.line(ch), ch.tag)
                continue
            steps: list[tuple[str, int]] = []
            step_ranks: list[int | None] = []
            for step in ch:
                dev = _attr_int(doc, step, "dev")
                if dev is None:
                    raise ParseError(
                        source, doc.line(step), f"a dev= attribute on <{step.tag}>", found=_start_tag(step)
                    )
                steps.append((step.tag, dev))
                step_ranks.append(_attr_int(doc, step, "rank"))
            channels.append(tuple(steps))
            ranks.append(tuple(step_ranks))
        nchannels = _attr_int(doc, el, "nchannels")
        graphs.append(
            NcclGraph(
                id=graph_id,
                kind=GRAPH_KINDS.get(graph_id, "unknown"),
                pattern=_attr_int(doc, el, "pattern"),
                crossnic=_attr_int(doc, el, "crossnic"),
                nchannels=len(channels) if nchannels is None else nchannels,
                speed_intra=_first_float(doc, el, "speedintra", "bwintra"),
                speed_inter=_first_float(doc, el, "speedinter", "bwinter"),
                type_intra=_attr_str(el, "typeintra"),
                type_inter=_attr_str(el, "typeinter"),
                same_channels=_attr_int(doc, el, "samechannels"),
                channels=tuple(channels),
                channel_ranks=tuple(ranks),
                latency_inter=_attr_float(doc, el, "latencyinter"),
            )
        )
    return NcclGraphs(version=doc.root.get("version"), graphs=tuple(graphs))


def _first_float(doc: _XmlDoc, el: ET.Element, *names: str) -> float | None:
    for name in names:
        value = _attr_float(doc, el, name)
        if value is not None:
            return value
    return None


# ---------------------------------------------------------------------------------------------- NCCL's model

# kvDictPciGen in NCCL src/graph/topo.cc: GT/s -> "x100 Mb/s per lane"; a link is width * value / 80 GB/s.
_PCI_GEN_SPEED = {2.5: 15, 5.0: 30, 8.0: 60, 16.0: 120, 32.0: 240, 64.0: 480}
_GT_S = re.compile(r"\s*(\d+(?:\.\d+)?)\s*GT/s", re.IGNORECASE)


def pci_link_gbps(link_speed: str | None, link_width: int | None) -> float | None:
    """NCCL's bandwidth for a PCIe link, GB/s: ``width * speed / 80`` (Gen3 x16 12, Gen4 x16 24,
    Gen5 x16 48). ``None`` when the speed or width is missing, empty, zero or not a known generation
    (NCCL then falls back to x16 and 60, i.e. Gen3 x16 = 12 GB/s; the graph builder says so)."""
    if not link_speed or not link_width or link_width <= 0:
        return None
    m = _GT_S.match(link_speed)
    if m is None:
        return None
    speed = _PCI_GEN_SPEED.get(float(m.group(1)))
    return None if speed is None else link_width * speed / 80.0


def nvlink_gbps_per_link(sm: int) -> float:
    """GB/s per NVLink for a compute capability, as NCCL's ``ncclTopoNVLinkBw`` (src/graph/topo.h):
    SM60_NVLINK_BW 18, SM70 20, SM80 20, SM86 12, SM90 20.6, SM100 40.1; SM80's value below 60."""
    if sm >= 100:
        return 40.1
    if sm >= 90:
        return 20.6
    if sm == 86:
        return 12.0
    if sm >= 70:
        return 20.0
    if sm >= 60:
        return 18.0
    return 20.0


def xgmi_gbps_per_link(arch: str | None) -> float | None:
    """GB/s per xGMI link as RCCL's ``ncclTopoXGMISpeed`` (rccl src/graph/topo.h): gfx90a 36,
    gfx94x and gfx95x 48; ``None`` for other or unknown architectures."""
    if not arch:
        return None
    arch = arch.lower().split(":")[0]
    if arch == "gfx90a":
        return 36.0
    if arch.startswith(("gfx94", "gfx95")):
        return 48.0
    return None


def inter_cpu_gbps(cpu: XmlCpu) -> tuple[float | None, str]:
    """NCCL's inter-socket bandwidth for a cpu (``ncclTopoGetInterCpuBw``, topo.cc/topo.h) and its name.

    POWER 32 (P9_BW), ARM 6, Intel by model (NCCL 2.30: ERP >= 0xCF 40, SRP >= 0x8F 22, SKL >= 0x55
    10, else BDW 6), AMD 16, Zhaoxin 6. ``(None, reason)`` when arch/vendor are missing or unknown.
    """
    arch = (cpu.arch or "").strip().lower()
    vendor = (cpu.vendor or "").strip()
    if arch == "ppc64":
        return 32.0, "P9_BW"
    if arch == "arm64":
        return 6.0, "ARM_BW"
    if arch != "x86_64":
        return None, f"unknown cpu arch {cpu.arch!r}"
    if vendor == "GenuineIntel":
        model = cpu.modelid if cpu.familyid == 6 and cpu.modelid is not None else -1
        if model >= 0xCF:
            return 40.0, "ERP_QPI_BW"
        if model >= 0x8F:
            return 22.0, "SRP_QPI_BW"
        if model >= 0x55:
            return 10.0, "SKL_QPI_BW"
        return 6.0, "BDW_QPI_BW"
    if vendor == "AuthenticAMD":
        return 16.0, "AMD_BW"
    if vendor in ("CentaurHauls", "Shanghai"):
        return 6.0, "ZPI_BW"
    return None, f"unknown cpu vendor {cpu.vendor!r}"
