"""Merge the CA records that several host tools give for the same node (ibstat, ibstatus, ibv_devinfo, rdma link).

Each tool knows part of a port: ibstat the rate and link layer, ``ibv_devinfo`` (without ``-v``) no rate,
``rdma link`` the netdev but no rate. The records of one CA are merged field by field: a field one record
leaves unknown (``None``) is filled from the other; where both know a field and disagree, the value read first
is kept and the disagreement is named (both values, both sources), never silently dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from collscope.topo.infiniband.host import Hca, IbPort

__all__ = ["merge_hcas"]

_CA_FIELDS = ("ca_type", "firmware", "node_guid")
_PORT_FIELDS = ("state", "physical_state", "rate_gbps", "link_layer", "lid", "netdev", "sm_lid", "port_guid")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return abs(float(a) - float(b)) < 0.5
    return bool(a == b)


def _merge_fields(old: Any, new: Any, fields: tuple[str, ...], what: str, old_source: str, source: str,
                  notes: list[str]) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    differ: list[str] = []
    for name in fields:
        a, b = getattr(old, name), getattr(new, name)
        if b is None:
            continue
        if a is None:
            changes[name] = b
        elif not _same(a, b):
            differ.append(f"{name} {a!r} vs {b!r}")
    if differ:
        notes.append(f"{what} disagrees between {old_source} and {source}: {', '.join(differ)}; kept the first "
                     "(the values read first)")
    return changes


def _merge_ports(old: Hca, new: Hca, old_source: str, source: str, notes: list[str]) -> tuple[IbPort, ...]:
    ports = {p.port: p for p in old.ports}
    for port in new.ports:
        if port.port not in ports:
            ports[port.port] = port
            continue
        what = f"{old.name} port {port.port}"
        changes = _merge_fields(ports[port.port], port, _PORT_FIELDS, what, old_source, source, notes)
        ports[port.port] = dataclasses.replace(ports[port.port], **changes)
    return tuple(sorted(ports.values(), key=lambda p: p.port))


def merge_hcas(existing: Iterable[Hca], origins: dict[str, str], new: Iterable[Hca],
               source: str) -> tuple[tuple[Hca, ...], list[str]]:
    """``existing`` with ``new`` (read from ``source``) merged in: new CAs appended, known ones filled field by
    field. ``origins`` maps a CA name to the source it was first read from and is updated. Returns the CAs and a
    note per CA or port whose records disagree (``mlx5_2 port 1 disagrees between a and b: state 'Active' vs
    'Down'; kept the first (the values read first)``)."""
    merged = {h.name: h for h in existing}
    notes: list[str] = []
    for hca in new:
        old = merged.get(hca.name)
        if old is None:
            merged[hca.name] = hca
            origins.setdefault(hca.name, source)
            continue
        first = origins.get(hca.name, "an earlier capture")
        changes = _merge_fields(old, hca, _CA_FIELDS, hca.name, first, source, notes)
        changes["ports"] = _merge_ports(old, hca, first, source, notes)
        merged[hca.name] = dataclasses.replace(old, **changes)
    return tuple(merged.values()), notes
