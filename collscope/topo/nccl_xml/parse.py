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

The records live in :mod:`collscope.topo.nccl_xml.records` and NCCL's bandwidth model for the XML
links (``pci_link_gbps``, ``nvlink_gbps_per_link``, ...) in :mod:`collscope.topo.nccl_xml.rates`; both are
re-exported here. :mod:`collscope.topo.nccl_xml.graph` turns the records into the topology graph.
"""

from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from collscope.errors import ParseError
from collscope.topo.nccl_xml.records import (
    GRAPH_KINDS,
    NcclGraph,
    NcclGraphs,
    NcclTopoXml,
    XmlC2c,
    XmlCpu,
    XmlGpu,
    XmlNet,
    XmlNvLink,
    XmlPci,
)

__all__ = ["parse_nccl_topo_xml", "parse_nccl_graph_xml", "looks_like_nccl_topo_xml", "looks_like_nccl_graph_xml"]

logger = logging.getLogger(__name__)


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
