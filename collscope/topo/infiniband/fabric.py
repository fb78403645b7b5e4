"""Parsers for InfiniBand fabric dumps: ``ibnetdiscover`` topology files and ``iblinkinfo``.

Both return an :class:`IbFabric`: nodes keyed by node GUID (``0x`` + 16 lowercase hex digits) and
undirected links, each listed once however many times the dump shows it (ibnetdiscover prints every
cable from both ends).

Decisions worth knowing:

* ibnetdiscover: a node that is only named as the far end of a port line (an EXCERPT of a dump, or a
  discovery that stopped early) still becomes an :class:`IbNode`, with ``from_record=False`` and
  ``nports`` the highest port number seen on it (a lower bound).
* A degenerate dump with a single CA record and no switch (a host that only discovered itself) parses
  to one node and no links; it is not an error, the caller decides whether a fabric without links is.
* A cable whose two ends report different widths or speeds keeps the slower reading.
* iblinkinfo names the far end of a link only by LID, port and description: links whose far end has no
  block of its own in the output (so no GUID) are left out.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Literal

from collscope.errors import ParseError
from collscope.topo.infiniband.host import SNIFF_LIMIT, normalize_guid

__all__ = [
    "IbNode", "IbLink", "IbFabric", "LANE_GBPS", "parse_ibnetdiscover", "parse_iblinkinfo",
    "looks_like_ibnetdiscover", "looks_like_iblinkinfo",
]  # fmt: skip

NodeKind = Literal["switch", "ca", "router"]
LANE_GBPS: dict[str, float] = {"SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0,
                               "EDR": 25.0, "HDR": 50.0, "NDR": 100.0, "XDR": 200.0}  # fmt: skip
"""Nominal data rate of one lane in Gb/s per speed name; a link's rate is width x this."""
_SIGNALLING = {2.5: "SDR", 5.0: "DDR", 10.0: "QDR", 10.3125: "FDR10", 14.0625: "FDR", 25.78125: "EDR",
               53.125: "HDR", 106.25: "NDR", 212.5: "XDR"}  # fmt: skip
_KINDS: dict[str, NodeKind] = {"Switch": "switch", "Ca": "ca", "Rt": "router", "S": "switch", "H": "ca",
                               "R": "router", "CA": "ca", "Router": "router"}  # fmt: skip
_A = re.ASCII


@dataclass(frozen=True, slots=True)
class IbNode:
    """A switch, CA or router of the fabric; ``name`` is its node description without the quotes."""

    guid: str
    kind: NodeKind
    name: str
    nports: int
    lid: int | None
    """Switch LID (port 0), or for a CA the LID of its first listed port."""
    from_record: bool = True
    """False when the node was only seen as the far end of a link (no record of its own)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class IbLink:
    """One cable; ``a`` is the end first seen in the dump; ``rate_gbps`` = width x lane rate (4x NDR: 400)."""

    a_guid: str
    a_port: int
    b_guid: str
    b_port: int
    width: str | None
    speed: str | None
    rate_gbps: float | None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class IbFabric:
    """Nodes in the order first seen, links once each."""

    nodes: tuple[IbNode, ...]
    links: tuple[IbLink, ...]

    def switches(self) -> list[IbNode]:
        return [n for n in self.nodes if n.kind == "switch"]

    def cas(self) -> list[IbNode]:
        return [n for n in self.nodes if n.kind == "ca"]

    def node(self, guid: str) -> IbNode | None:
        """The node with this GUID (any spelling :func:`normalize_guid` accepts), or None."""
        key = normalize_guid(guid)
        return next((n for n in self.nodes if n.guid == key), None)

    def leaf_of(self, ca_guid: str) -> str | None:
        """GUID of the switch the CA's lowest-numbered cabled port connects to; None if not cabled to a
        switch or if ``ca_guid`` is not a CA of this fabric."""
        key = normalize_guid(ca_guid)
        kinds = {n.guid: n.kind for n in self.nodes}
        if kinds.get(key or "") != "ca":
            return None
        ends = sorted(
            [(lk.a_port, lk.b_guid) for lk in self.links if lk.a_guid == key]
            + [(lk.b_port, lk.a_guid) for lk in self.links if lk.b_guid == key]
        )
        return next((guid for _, guid in ends if kinds.get(guid) == "switch"), None)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class _Collector:
    """Nodes by GUID (records win over far-end mentions) and links deduplicated by their two ends."""

    def __init__(self) -> None:
        self.nodes: dict[str, IbNode] = {}
        self.links: dict[frozenset[tuple[str, int]], IbLink] = {}

    def record(self, node: IbNode) -> None:
        old = self.nodes.get(node.guid)
        if old is not None and not old.from_record:
            node = dataclasses.replace(node, nports=max(node.nports, old.nports))
        self.nodes[node.guid] = node

    def mention(self, guid: str, kind: NodeKind, name: str, port: int, lid: int | None) -> None:
        old = self.nodes.get(guid)
        if old is None:
            self.nodes[guid] = IbNode(guid, kind, name, port, lid, from_record=False)
        elif port > old.nports:
            self.nodes[guid] = dataclasses.replace(old, nports=port)

    def link(self, link: IbLink) -> None:
        key = frozenset({(link.a_guid, link.a_port), (link.b_guid, link.b_port)})
        old = self.links.get(key)
        if old is None:
            self.links[key] = link
        elif link.rate_gbps is not None and (old.rate_gbps is None or link.rate_gbps < old.rate_gbps):
            # the two ends disagree (seen in the man-page example: 4xSDR one way, 1xSDR back): keep the
            # slower reading, in the orientation first seen
            new = (link.width, link.speed, link.rate_gbps)
            self.links[key] = IbLink(old.a_guid, old.a_port, old.b_guid, old.b_port, *new)

    def fabric(self) -> IbFabric:
        return IbFabric(tuple(self.nodes.values()), tuple(self.links.values()))


def _width_speed(width: str | None, speed: str | None) -> tuple[str | None, str | None, float | None]:
    if width is None:
        return None, speed, None
    lanes = LANE_GBPS.get(speed or "")
    return f"{width}x", speed, int(width) * lanes if lanes is not None else None


# ----------------------------------------------------------------------------------- ibnetdiscover

_HEX = r"[0-9a-fA-F]{1,16}"
_NODE = re.compile(rf'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-({_HEX})"\s*(?:#\s*"(.*)"(.*))?$', _A)
_PORT = re.compile(
    rf'^\[(\d+)\](?:\[ext \d+\])?(?:\(({_HEX})\))?\s+"([SHR])-({_HEX})"\[(\d+)\](?:\[ext \d+\])?'
    rf"(?:\(({_HEX})\))?\s*(?:#(.*))?$",
    _A,
)
_PORT_COMMENT = re.compile(r'^\s*(?:lid (\d+) lmc \d+\s+)?"(.*)"\s*(?:lid (\d+))?\s*(?:(\d+)x(\w+))?\s*$', _A)
_HEADER_KEY = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|routerguid)=\S*$", _A)
_CHASSIS = re.compile(r"^(Non-Chassis Nodes|.*\bChassis\b.*)$")


def parse_ibnetdiscover(text: str, source: str = "<text>") -> IbFabric:
    """Parse an ``ibnetdiscover`` topology file (tabs or spaces, any common indentation)."""
    out = _Collector()
    current: IbNode | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or _HEADER_KEY.match(line):
            continue
        if match := _NODE.match(line):
            word, nports, _, guid_hex, name, rest = match.groups()
            lid = re.search(r"\blid (\d+)", rest or "", _A)
            guid = normalize_guid(guid_hex)
            assert guid is not None  # the pattern only admits 1-16 hex digits
            current = IbNode(guid, _KINDS[word], name or "", int(nports), int(lid.group(1)) if lid else None)
            out.record(current)
        elif match := _PORT.match(line):
            if current is None:
                raise ParseError(source, number, "a Switch/Ca/Rt record before its port lines", raw)
            current = _ibnd_port(out, current, match.groups(), source, number, raw)
        elif _CHASSIS.match(line):
            continue
        else:
            raise ParseError(source, number, 'an ibnetdiscover line (Switch N "S-guid" ..., [port] ...)', raw)
    if not out.nodes:
        raise ParseError(source, None, "at least one Switch, Ca or Rt record")
    return out.fabric()


def _ibnd_port(
    out: _Collector, current: IbNode, groups: tuple[str | Any, ...], source: str, number: int, raw: str
) -> IbNode:
    port, _, far_prefix, far_hex, far_port, _, comment = groups
    if int(port) > current.nports:
        raise ParseError(source, number, f"a port number <= {current.nports} for {current.name!r}", raw)
    fields = _PORT_COMMENT.match(comment or '""')
    if fields is None:
        raise ParseError(source, number, 'a port comment like # "name" lid N 4xHDR', raw)
    own_lid, far_name, far_lid, width, speed = fields.groups()
    far_guid = normalize_guid(far_hex)
    assert far_guid is not None
    out.mention(far_guid, _KINDS[far_prefix], far_name, int(far_port), int(far_lid) if far_lid else None)
    out.link(IbLink(current.guid, int(port), far_guid, int(far_port), *_width_speed(width, speed)))
    if current.lid is None and own_lid is not None:
        current = dataclasses.replace(current, lid=int(own_lid))
        out.record(current)
    return current


# -------------------------------------------------------------------------------------- iblinkinfo

_LI_HEAD = re.compile(r"^(CA|Switch|Router):\s+(?:(0x[0-9a-fA-F]{1,16})\s+)?(.*):$", _A)
_LI_LINK = re.compile(
    r"^(?:(0x[0-9a-fA-F]{1,16})\s+)?(\d+)\s+(\d+)\[[^\]]*\]\s+==\(\s*(.*?)\s*\)==>\s*(.*)$", _A
)
_LI_STATE = re.compile(r"^(?:(\d+)X\s+(\d+(?:\.\d+)?)\s+Gbps\s+)?(\w+)/\s*(\w+)$", _A)
_LI_FAR = re.compile(r'^(\d+)\s+(\d+)\[[^\]]*\]\s+"(.*)"\s*(?:\(.*\))?$', _A)
_LI_NO_FAR = re.compile(r'^\[[^\]]*\]\s+"(.*)"\s*(?:\(.*\))?$', _A)


def parse_iblinkinfo(text: str, source: str = "<text>") -> IbFabric:
    """Parse ``iblinkinfo`` output (PARTIAL: links to a far end without a block of its own are dropped).

    ``...`` lines (elisions in a pasted copy) and ports that are down (no far end) are skipped.
    """
    nodes: dict[str, dict[str, Any]] = {}
    by_lid: dict[int, str] = {}
    pending: list[tuple[str, int, int, int, tuple[str | None, str | None, float | None]]] = []
    head: tuple[NodeKind, str | None, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.strip(". ") == "":
            continue
        if match := _LI_HEAD.match(line):
            head = (_KINDS[match.group(1)], normalize_guid(match.group(2) or ""), match.group(3))
            continue
        match = _LI_LINK.match(line)
        if match is None or head is None:
            raise ParseError(source, number, "an iblinkinfo line (CA: name:, Switch: guid name:, port)", raw)
        guid_hex, lid, port, state, far = match.groups()
        guid = head[1] or normalize_guid(guid_hex or "")
        status = _LI_STATE.match(state)
        if guid is None or status is None:
            raise ParseError(source, number, "a GUID for the node and '4X 53.125 Gbps Active/ LinkUp'", raw)
        node = nodes.setdefault(guid, {"kind": head[0], "name": head[2], "nports": 0, "lid": int(lid)})
        node["nports"] = max(node["nports"], int(port))
        by_lid.setdefault(int(lid), guid)
        if far_match := _LI_FAR.match(far):
            width, lane, _, _ = status.groups()
            speed = _SIGNALLING.get(float(lane)) if lane else None
            ws = _width_speed(width, speed)
            if width and speed is None:
                ws = (f"{width}x", None, int(width) * float(lane))
            pending.append((guid, int(port), int(far_match.group(1)), int(far_match.group(2)), ws))
        elif not _LI_NO_FAR.match(far):
            raise ParseError(source, number, 'the far end: LID port[ext] "name"', raw)
    if not nodes:
        raise ParseError(source, None, "at least one 'CA:' or 'Switch:' block")
    out = _Collector()
    for guid, fields in nodes.items():
        out.record(IbNode(guid, **fields))
    for guid, port, far_lid, far_port, ws in pending:
        if (far_guid := by_lid.get(far_lid)) is not None:
            out.link(IbLink(guid, port, far_guid, far_port, *ws))
    return out.fabric()


# ---------------------------------------------------------------------------------------- sniffers


def looks_like_ibnetdiscover(text: str) -> bool:
    record = r'^[ \t]*(Switch|Ca|Rt)[ \t]+\d+[ \t]+"[SHR]-[0-9a-fA-F]+"'
    return re.search(record, text[:SNIFF_LIMIT], re.MULTILINE) is not None


def looks_like_iblinkinfo(text: str) -> bool:
    head = text[:SNIFF_LIMIT]
    return (
        re.search(r"^(CA|Switch|Router):[ \t]", head, re.MULTILINE) is not None
        and re.search(r"\d+\[[^\]\n]*\][ \t]+==\(", head) is not None
    )
