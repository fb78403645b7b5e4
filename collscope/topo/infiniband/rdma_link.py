"""Parser for iproute2's ``rdma link`` (``rdma link show``, ``rdma -d link``, ``rdma -j [-p] link``).

``rdma link`` prints one line per RDMA port, read into the same :class:`~collscope.topo.infiniband.host.Hca`
records as ibstat and ibdev2netdev (port state, physical state, LID, netdev), in printed order::

    link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 12 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP netdev ib0
    link mlx5_4/1 state ACTIVE physical_state LINK_UP netdev ens1f0np0

Shapes read (iproute2 rdma/link.c, link_parse_cb): the current ``link DEV/PORT key value ...`` line, the
first releases' ``1/1: mlx5_0/1: key value ...`` line, ``-d``'s ``netdev_index N`` and the ``caps: <...>`` line
below a port (ignored), and ``-j``'s JSON array of objects (``ifname`` the device and ``port`` the port, or
``ifname`` ``"mlx5_0/1"`` in the first releases), pretty-printed with ``-p`` or not.

The link layer is read from what the kernel sends: it puts ``subnet_prefix``, ``lid``, ``sm_lid`` and ``lmc``
only for ports that speak the InfiniBand protocol (Linux drivers/infiniband/core/nldev.c, fill_port_info), so a
port with them is ``InfiniBand`` and one without them ``Ethernet`` (RoCE; iWARP devices also run on Ethernet).
``rdma link`` prints no rate: that comes from ibstat, ibstatus or ``ibv_devinfo -v``.
"""

from __future__ import annotations

import re
from typing import Any

from collscope.errors import ParseError
from collscope.json_input import load_json
from collscope.topo.infiniband.host import (
    SNIFF_LIMIT,
    Hca,
    HcaListing,
    IbPort,
    normalize_physical_state,
    normalize_port_state,
)

__all__ = ["parse_rdma_link", "looks_like_rdma_link", "looks_like_json"]

_A = re.ASCII
# ``link mlx5_0/1 ...`` (iproute2 >= 4.19) and ``1/1: mlx5_0/1: ...`` (4.16-4.18)
_LINE = re.compile(r"^(?:link[ \t]+|\d+/\d+:[ \t]+)([^\s/]+)/(\d+):?(?:[ \t]+(.*))?$", _A)
_CAPS = re.compile(r"^[ \t]+caps:[ \t]*<[^>\n]*>[ \t]*$", _A)
_INT_KEYS = {"lid", "sm_lid", "lmc", "netdev_index"}
_IB_KEYS = ("subnet_prefix", "lid", "sm_lid", "lmc")
EXPECTED_LINE = "an 'rdma link' line 'link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ib0'"


def _port(name: str, port: int, fields: dict[str, Any], source: str, line: int | None) -> IbPort:
    state = fields.get("state")
    if not isinstance(state, str) or not state:
        raise ParseError(source, line, f"a 'state' for {name}/{port}", str(fields) if line is None else None)
    phys = fields.get("physical_state")
    netdev = fields.get("netdev")
    ib = any(key in fields for key in _IB_KEYS)
    return IbPort(
        port=port,
        state=normalize_port_state(state),
        physical_state=normalize_physical_state(phys) if isinstance(phys, str) and phys else None,
        rate_gbps=None,
        link_layer="InfiniBand" if ib else "Ethernet",
        lid=fields.get("lid") if isinstance(fields.get("lid"), int) else None,
        netdev=netdev if isinstance(netdev, str) and netdev else None,
        sm_lid=fields.get("sm_lid") if isinstance(fields.get("sm_lid"), int) else None,
    )


def _group(ports: list[tuple[str, IbPort]]) -> HcaListing:
    """Ports in printed order -> one Hca per device, devices in the order they first appear."""
    by_name: dict[str, list[IbPort]] = {}
    for name, port in ports:
        by_name.setdefault(name, []).append(port)
    return HcaListing(tuple(Hca(name, None, None, None, tuple(p)) for name, p in by_name.items()), None)


def _pairs(rest: str, source: str, number: int, raw: str) -> dict[str, Any]:
    tokens = rest.split()
    if len(tokens) % 2:
        raise ParseError(source, number, "'key value' pairs after the port (state ACTIVE physical_state ...)", raw)
    fields: dict[str, Any] = {}
    for key, value in zip(tokens[::2], tokens[1::2], strict=True):
        if key in _INT_KEYS:
            if not value.isdigit():
                raise ParseError(source, number, f"a decimal number after '{key}'", raw)
            fields[key] = int(value)
        else:
            fields[key] = value
    return fields


def _parse_text(text: str, source: str) -> HcaListing:
    ports: list[tuple[str, IbPort]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or _CAPS.match(line):
            continue
        match = _LINE.match(line)
        if match is None:
            raise ParseError(source, number, EXPECTED_LINE, raw)
        name, port, rest = match.group(1), int(match.group(2)), match.group(3) or ""
        ports.append((name, _port(name, port, _pairs(rest, source, number, raw), source, number)))
    if not ports:
        raise ParseError(source, None, "at least one 'rdma link' line")
    return _group(ports)


def _parse_json(text: str, source: str) -> HcaListing:
    doc = load_json(text, source, "'rdma -j link' JSON (an array of port objects)")
    items = doc if isinstance(doc, list) else [doc]
    ports: list[tuple[str, IbPort]] = []
    for index, item in enumerate(items):
        where = f"{source} (object {index + 1})"
        ifname = item.get("ifname") if isinstance(item, dict) else None
        if not isinstance(ifname, str) or not ifname:
            raise ParseError(where, None, "an object with 'ifname' (the RDMA device)", str(item)[:200])
        name, _, slash_port = ifname.partition("/")  # "mlx5_0" with "port": 1, or "mlx5_0/1" (first releases)
        port = item.get("port", int(slash_port) if slash_port.isdigit() else None)
        if not isinstance(port, int) or isinstance(port, bool):
            raise ParseError(where, None, f"a port number for {ifname} ('port' or 'mlx5_0/1')", str(item)[:200])
        ports.append((name, _port(name, port, item, where, None)))
    if not ports:
        raise ParseError(source, None, "at least one port object in 'rdma -j link' JSON", "[]")
    return _group(ports)


def looks_like_json(text: str) -> bool:
    """Whether ``text`` opens a JSON object or array (``[{``, ``[ ``, ``[]``), not a ``[root@node ~]#`` prompt."""
    head = text.lstrip()[:2]
    return head[:1] == "{" or (head[:1] == "[" and (len(head) == 1 or head[1] in "{[]\" \t\r\n"))


def parse_rdma_link(text: str, source: str = "<text>") -> HcaListing:
    """Parse ``rdma link`` text or ``rdma -j link`` JSON into CAs with their ports (no rate, no firmware)."""
    if looks_like_json(text):
        return _parse_json(text, source)
    return _parse_text(text, source)


def looks_like_rdma_link(text: str) -> bool:
    head = text[:SNIFF_LIMIT]
    if looks_like_json(head):
        return '"physical_state"' in head and '"ifname"' in head
    first = next((line.rstrip() for line in head.splitlines() if line.strip()), "")
    match = _LINE.match(first)
    return match is not None and "state" in (match.group(3) or "").split()
