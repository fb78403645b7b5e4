"""``ibdev2netdev`` (and ``ibdev2netdev -v``): which network interface each RDMA port is, and the CAs of the
other host tools (:mod:`collscope.topo.infiniband.host`) with those interfaces filled in.

``parse_ibdev2netdev`` is pure (text in, records out) and raises only :class:`ParseError`; port states are
normalised as the host tools' are (:func:`~collscope.topo.infiniband.host.normalize_port_state`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from collscope.errors import ParseError
from collscope.topo.infiniband.host import SNIFF_LIMIT, Hca, normalize_port_state

__all__ = ["NetdevMap", "parse_ibdev2netdev", "merge_netdevs", "looks_like_ibdev2netdev"]


@dataclass(frozen=True, slots=True)
class NetdevMap:
    """One ibdev2netdev line; the ``pci_bus_id`` .. ``firmware`` fields come only from ``ibdev2netdev -v``."""

    ca: str
    port: int
    netdev: str
    netdev_state: str | None
    pci_bus_id: str | None = None
    description: str | None = None
    port_state: str | None = None
    firmware: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_NETDEV_PLAIN = re.compile(r"^(\S+)\s+port\s+(\d+)\s+==>\s+(\S+)(?:\s+\(\s*(\w+)\s*\))?$", re.ASCII)
_NETDEV_VERBOSE = re.compile(
    r"^([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(\S+)\s+(.*?)\s*\bport\s+(\d+)\s+"
    r"\(\s*(\w+)\s*\)\s+==>\s+(\S+)(?:\s+\(\s*(\w+)\s*\))?$",
    re.ASCII,
)


def parse_ibdev2netdev(text: str, source: str = "<text>") -> list[NetdevMap]:
    """Parse ``ibdev2netdev`` and ``ibdev2netdev -v`` lines (also re-aligned by ``column -t``).

    A trailing ``# comment`` (added by hand to a pasted copy) is ignored.
    """
    maps: list[NetdevMap] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if match := _NETDEV_PLAIN.match(line):
            ca, port, netdev, state = match.groups()
            maps.append(NetdevMap(ca, int(port), netdev, state))
        elif match := _NETDEV_VERBOSE.match(line):
            bus, ca, middle, port, port_state, netdev, state = match.groups()
            fw = re.search(r"(?:^|\s)fw\s+(\S+)$", middle, re.ASCII)
            desc = " ".join(middle[: fw.start()].split()) if fw else " ".join(middle.split())
            maps.append(
                NetdevMap(ca, int(port), netdev, state, pci_bus_id=bus.lower(), description=desc or None,
                          port_state=normalize_port_state(port_state), firmware=fw.group(1) if fw else None)
            )  # fmt: skip
        else:
            raise ParseError(source, number, "an ibdev2netdev line 'mlx5_0 port 1 ==> ib0 (Up)'", raw.rstrip())
    if not maps:
        raise ParseError(source, None, "at least one ibdev2netdev line")
    return maps


def merge_netdevs(hcas: Iterable[Hca], maps: Iterable[NetdevMap]) -> tuple[Hca, ...]:
    """The CAs with ``IbPort.netdev`` filled from ibdev2netdev lines matched by (CA name, port)."""
    by_port = {(m.ca, m.port): m.netdev for m in maps}
    return tuple(
        dataclasses.replace(
            hca,
            ports=tuple(
                dataclasses.replace(p, netdev=by_port.get((hca.name, p.port), p.netdev)) for p in hca.ports
            ),
        )
        for hca in hcas
    )


def looks_like_ibdev2netdev(text: str) -> bool:
    lines = (line.split("#", 1)[0].strip() for line in text[:SNIFF_LIMIT].splitlines())
    first = next((line for line in lines if line), "")
    return bool(_NETDEV_PLAIN.match(first) or _NETDEV_VERBOSE.match(first))
