"""Records and patterns for single NCCL_DEBUG=INFO messages: rings, trees, transport connections, NICs.

Formats come from NCCL's sources (``graph/rings.cc``, ``init.cc``, ``transport/{p2p,shm,net,coll_net}.cc``,
``transport/net_ib.cc``) across versions 2.3 to 2.30; each parser takes the message without its
``host:pid:tid [dev] NCCL INFO`` prefix and returns a record or ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Connection",
    "RingOrder",
    "TreeLink",
    "parse_connection",
    "parse_env_message",
    "parse_ring_order",
    "parse_trees",
    "parse_tree_graph",
    "parse_ib_devices",
    "parse_socket_devices",
    "transport_key",
]

_N = r"\d{1,9}"
_SN = r"-?\d{1,9}"

_RING_ORDER = re.compile(rf"^\s*(?:Channel|Ring) ({_N})(?:/({_N}))? :((?:\s+{_N})+)\s*$")
_CONNECTION = re.compile(
    rf"^\s*(?:Channel|Ring) (?P<ch>{_N})(?:/(?P<conn>{_N}))? : (?P<src>{_N})(?:\[[0-9a-fA-F]+\])? -> "
    rf"(?P<dst>{_N})(?:\[[0-9a-fA-F]+\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>.+?)\s*$"
)
_COLLNET_CONNECTION = re.compile(
    rf"^\s*(?:CollNet|Coll) (?P<ch>{_N})(?:/(?P<conn>{_N}))? : (?P<src>{_N}) \[(?P<dir>send|receive)\] "
    r"via (?P<via>COLLNET/.+?)\s*$"
)
_NET_VIA = re.compile(rf"^(?:NET|COLLNET)/(?P<name>.+?)/(?P<dev>{_N})(?:\((?P<proxy>{_N})\))?(?=$|[/(])")
_TREES = re.compile(r"^\s*Trees((?:\s+\[\d+\]\s*\S+)+)\s*$")
_TREE_ENTRY = re.compile(r"\[(\d{1,9})\]\s*(\S+)")
_TREE_NEW = re.compile(rf"^({_SN})/({_SN})/({_SN})->({_SN})->({_SN})$")
_TREE_SPLIT = re.compile(rf"^({_SN})/({_SN})/({_SN})->({_SN})->({_SN})\|({_SN})->({_SN})->({_SN})/({_SN})/({_SN})$")
_TREE_OLD = re.compile(rf"^({_SN})->({_SN})->({_SN})/({_SN})/({_SN})$")
_TREE_GRAPH = re.compile(rf"^\s*Tree ({_N}) : ({_SN}) -> ({_N}) -> ({_SN})/({_SN})/({_SN})\s*$")
_IB_USING = re.compile(r"^\s*NET/IB ?: Using(?P<devs>.*?)(?P<ro> \[RO\])?\s*(?:;\s*OOB (?P<oob>\S+))?\s*$")
_IB_DEVICE = re.compile(r"\[\d+\]([^\s:\[\]]+):(\d+)/(\S+)")
_SOCKET_USING = re.compile(r"^\s*NET/Socket ?: Using(?P<devs>.*)$")
_SOCKET_DEVICE = re.compile(r"\[\d+\]([^\s:\[\]]+):")


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """One ``Channel NN/c : a[x] -> b[y] [send] via ...`` line: how one rank reaches its peer."""

    channel: int
    src_rank: int
    dst_rank: int | None
    """``None`` for CollNet connections, which name only the local rank."""
    transport: str
    """``P2P/IPC``, ``P2P/CUMEM``, ``P2P/direct pointer``, ``SHM``, ``NET/IB``, ``NET/Socket``, ``COLLNET/SHARP``."""
    via: str
    """Everything after ``via`` as printed (``NET/IB/1(5)/GDRDMA``)."""
    direction: str | None = None
    """``send`` or ``receive`` for network connections."""
    net_device: int | None = None
    proxy_rank: int | None = None
    """The rank whose NIC carries the traffic when PXN routes through another GPU (``NET/IB/1(5)``)."""
    gdr: bool = False
    """GPUDirect RDMA (``/GDRDMA``)."""
    line: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"channel": self.channel, "src_rank": self.src_rank, "dst_rank": self.dst_rank,
                "transport": self.transport, "via": self.via, "direction": self.direction,
                "net_device": self.net_device, "proxy_rank": self.proxy_rank, "gdr": self.gdr}


@dataclass(frozen=True, slots=True, kw_only=True)
class RingOrder:
    """The rank order of one ring channel, as rank 0 prints it (``Channel 00/02 :    0   1   2 ...``)."""

    channel: int
    ranks: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"channel": self.channel, "ranks": list(self.ranks)}


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeLink:
    """One rank's place in the tree of one channel."""

    rank: int
    channel: int
    parent: int | None
    """``None`` for the root (NCCL prints -1)."""
    children: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "channel": self.channel, "parent": self.parent, "children": list(self.children)}


def _opt(value: str) -> int | None:
    number = int(value)
    return None if number < 0 else number


def _kids(*values: str) -> tuple[int, ...]:
    return tuple(int(v) for v in values if int(v) >= 0)


def transport_key(via: str) -> str:
    """The transport class of a ``via`` text: ``NET/IB/0/GDRDMA`` -> ``NET/IB``, ``SHM/direct/direct`` -> ``SHM``."""
    m = _NET_VIA.match(via)
    if m:
        return f"{via.split('/', 1)[0]}/{m.group('name')}"
    if via.startswith("SHM") or "shared memory" in via:
        return "SHM"
    parts = via.split("/")
    if parts[0] in ("P2P", "NET", "COLLNET") and len(parts) > 1:
        return f"{parts[0]}/{parts[1].split('(')[0]}"
    return parts[0]


_ENV = re.compile(r"^\s*(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*?)\s*$")


def parse_env_message(message: str) -> tuple[str, str] | None:
    """(name, value) of ``NCCL_ALGO set by environment to Ring`` (src/misc/param.cc; an integer's line ends with
    a period, ``NCCL_MAX_NCHANNELS set by environment to 2.``, which is not part of the value); None otherwise."""
    m = _ENV.match(message)
    if m is None:
        return None
    value = m.group(2)
    if value.endswith(".") and not value.endswith(".."):
        value = value[:-1]
    return m.group(1), value


def parse_connection(message: str, line: int = 0) -> Connection | None:
    """A transport line (P2P, SHM, NET, CollNet; ``Ring``/``Channel``, with or without ``/connIndex``)."""
    m = _CONNECTION.match(message) or _COLLNET_CONNECTION.match(message)
    if m is None:
        return None
    groups = m.groupdict()
    via = groups["via"]
    net = _NET_VIA.match(via)
    return Connection(
        channel=int(groups["ch"]),
        src_rank=int(groups["src"]),
        dst_rank=int(groups["dst"]) if groups.get("dst") else None,
        transport=transport_key(via),
        via=via,
        direction=groups["dir"],
        net_device=int(net.group("dev")) if net else None,
        proxy_rank=int(net.group("proxy")) if net and net.group("proxy") else None,
        gdr="/GDRDMA" in via,
        line=line,
    )


def parse_ring_order(message: str) -> tuple[RingOrder, int | None] | None:
    """A ring order line and the channel count it names (``Channel 00/02``: 2), or ``None``."""
    m = _RING_ORDER.match(message)
    if m is None:
        return None
    ranks = tuple(int(r) for r in m.group(3).split())
    total = int(m.group(2)) if m.group(2) else None
    return RingOrder(channel=int(m.group(1)), ranks=ranks), total


def parse_trees(message: str) -> list[TreeLink] | None:
    """A ``Trees [0] ...`` line in any of NCCL's three formats, or ``None``.

    NCCL <= 2.5: ``[c] up->rank->d0/d1/d2``; 2.6-2.7: ``[c] d0/d1/d2->rank->up|up->rank->d0/d1/d2``
    (separate up and down trees, the up tree is kept); 2.8+: ``[c] d0/d1/d2->rank->up``.
    """
    m = _TREES.match(message)
    if m is None:
        return None
    links = []
    for channel, body in _TREE_ENTRY.findall(m.group(1)):
        new = _TREE_NEW.match(body) or _TREE_SPLIT.match(body)
        if new:
            d0, d1, d2, rank, up = new.groups()[:5]
            links.append(TreeLink(rank=int(rank), channel=int(channel), parent=_opt(up), children=_kids(d0, d1, d2)))
            continue
        old = _TREE_OLD.match(body)
        if old:
            up, rank, d0, d1, d2 = old.groups()
            links.append(TreeLink(rank=int(rank), channel=int(channel), parent=_opt(up), children=_kids(d0, d1, d2)))
    return links


def parse_tree_graph(message: str) -> TreeLink | None:
    """A GRAPH-subsystem ``Tree 0 : up -> rank -> d0/d1/d2`` line, or ``None``."""
    m = _TREE_GRAPH.match(message)
    if m is None:
        return None
    channel, up, rank, d0, d1, d2 = m.groups()
    return TreeLink(rank=int(rank), channel=int(channel), parent=_opt(up), children=_kids(d0, d1, d2))


def parse_ib_devices(message: str) -> tuple[list[str], bool, str | None] | None:
    """``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/IB [RO]; OOB ib0:10.0.0.1<0>``.

    Returns the devices as ``name:port`` in NCCL's order, whether relaxed ordering is on, and the OOB
    interface; ``None`` for other messages.
    """
    m = _IB_USING.match(message)
    if m is None:
        return None
    devices = [f"{name}:{port}" for name, port, _ in _IB_DEVICE.findall(m.group("devs"))]
    return devices, m.group("ro") is not None, m.group("oob")


def parse_socket_devices(message: str) -> list[str] | None:
    """``NET/Socket : Using [0]eth0:10.0.0.1<0> [1]...`` -> interface names; ``None`` for other messages."""
    m = _SOCKET_USING.match(message)
    if m is None:
        return None
    return _SOCKET_DEVICE.findall(m.group("devs"))
