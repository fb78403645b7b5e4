"""Network interfaces of a node without GPUs or InfiniBand: ``ip -j addr``, ``ip -j -s link`` and link speeds.

On a CPU cluster the rails are interfaces (``cl0``, ``eth1``): Open MPI's TCP transport and gloo pick them by
name. Parsers are pure (text in, records out); :func:`read_speeds` reads ``/sys/class/net/<if>/speed`` only
when that /sys belongs to the caller's network namespace (inside a namespace without a /sys remount,
/sys/class/net shows the root namespace's interfaces, so its speeds would describe other links).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collscope.errors import ParseError
from collscope.json_input import load_json

__all__ = ["NetInterface", "looks_like_ip_addr_json", "looks_like_ip_link_json", "looks_like_speeds_json",
           "parse_ip_addr_json", "parse_ip_link_json", "parse_speeds_json", "parse_proc_net_dev",
           "merge_interfaces", "read_speeds", "SPEEDS_KEY"]

SPEEDS_KEY = "collscope_netif_speeds_mbps"
"""The key of the JSON object ``topo collect`` writes with the speeds it read (``{"cl0": 10000}``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NetInterface:
    """One network interface as ``ip`` reports it."""

    name: str
    ifindex: int
    link_type: str
    """``ether``, ``loopback``, ``infiniband`` (IPoIB), ``none`` (tunnels) ..."""
    operstate: str
    """``UP``, ``DOWN``, ``LOWERLAYERDOWN``, ``UNKNOWN`` (loopback and some virtual links)."""
    flags: tuple[str, ...] = ()
    mtu: int | None = None
    mac: str | None = None
    addresses: tuple[str, ...] = ()
    """``address/prefix`` of every address (IPv4 and IPv6)."""
    rx_bytes: int | None = None
    tx_bytes: int | None = None
    speed_mbps: int | None = None
    """Link speed in Mb/s where the kernel says (``None``: unknown)."""

    @property
    def is_up(self) -> bool:
        return self.operstate == "UP" or (self.operstate == "UNKNOWN" and "LOWER_UP" in self.flags)

    @property
    def is_rail_candidate(self) -> bool:
        """A physical-looking data interface: Ethernet or IPoIB, not loopback."""
        return self.link_type in ("ether", "infiniband")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ifindex": self.ifindex, "link_type": self.link_type,
                "operstate": self.operstate, "flags": list(self.flags), "mtu": self.mtu, "mac": self.mac,
                "addresses": list(self.addresses), "rx_bytes": self.rx_bytes, "tx_bytes": self.tx_bytes,
                "speed_mbps": self.speed_mbps}


def _load_list(text: str, source: str, what: str) -> list[dict[str, Any]]:
    data = load_json(text, source, f"{what} (a JSON list)")
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise ParseError(source, 1, f"{what}: a JSON list of interface objects", found=type(data).__name__)
    return data


def _sniff(text: str, key: str) -> bool:
    head = text.lstrip()[:4096]
    return head.startswith("[") and '"ifname"' in head and (key in head if key else True)


def looks_like_ip_addr_json(text: str) -> bool:
    return _sniff(text, '"addr_info"')


def looks_like_ip_link_json(text: str) -> bool:
    return _sniff(text, '"stats64"') or (_sniff(text, '"stats"') and '"addr_info"' not in text[:4096])


def looks_like_speeds_json(text: str) -> bool:
    return text.lstrip().startswith("{") and f'"{SPEEDS_KEY}"' in text[:4096]


def _str(obj: dict[str, Any], key: str, source: str, index: int) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise ParseError(source, None, f"interface {index}: a text field {key!r}", found=repr(value))
    return value


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _base(obj: dict[str, Any], source: str, index: int) -> dict[str, Any]:
    name = _str(obj, "ifname", source, index)
    ifindex = _int(obj.get("ifindex"))
    if ifindex is None:
        raise ParseError(source, None, f"interface {name}: an integer 'ifindex'", found=repr(obj.get("ifindex")))
    flags = obj.get("flags") or []
    return {"name": name, "ifindex": ifindex, "link_type": str(obj.get("link_type") or "none"),
            "operstate": str(obj.get("operstate") or "UNKNOWN"),
            "flags": tuple(str(f) for f in flags) if isinstance(flags, list) else (),
            "mtu": _int(obj.get("mtu")), "mac": obj.get("address") if isinstance(obj.get("address"), str) else None}


def parse_ip_addr_json(text: str, source: str = "ip -j addr") -> list[NetInterface]:
    """The interfaces of ``ip -j addr`` (iproute2's JSON), with their addresses."""
    out = []
    for i, obj in enumerate(_load_list(text, source, "ip -j addr output")):
        addrs = []
        for info in obj.get("addr_info") or []:
            if (isinstance(info, dict) and isinstance(info.get("local"), str)
                    and _int(info.get("prefixlen")) is not None):
                addrs.append(f"{info['local']}/{info['prefixlen']}")
        out.append(NetInterface(**_base(obj, source, i), addresses=tuple(addrs)))
    return out


def parse_ip_link_json(text: str, source: str = "ip -j -s link") -> list[NetInterface]:
    """The interfaces of ``ip -j -s link``, with their byte counters (``stats64``, else ``stats``)."""
    out = []
    for i, obj in enumerate(_load_list(text, source, "ip -j -s link output")):
        stats = obj.get("stats64") or obj.get("stats") or {}
        rx = stats.get("rx") if isinstance(stats, dict) else None
        tx = stats.get("tx") if isinstance(stats, dict) else None
        out.append(NetInterface(**_base(obj, source, i),
                                rx_bytes=_int(rx.get("bytes")) if isinstance(rx, dict) else None,
                                tx_bytes=_int(tx.get("bytes")) if isinstance(tx, dict) else None))
    return out


def parse_speeds_json(text: str, source: str = "netif speeds") -> dict[str, int]:
    """``{"collscope_netif_speeds_mbps": {"cl0": 10000}}`` -> ``{"cl0": 10000}`` (what ``topo collect`` saves)."""
    data = load_json(text, source, "a JSON object of interface speeds")
    speeds = data.get(SPEEDS_KEY) if isinstance(data, dict) else None
    if not isinstance(speeds, dict):
        raise ParseError(source, 1, f"an object under {SPEEDS_KEY!r}")
    return {str(k): v for k, v in speeds.items() if _int(v) is not None and v > 0}


def parse_proc_net_dev(text: str, source: str = "/proc/self/net/dev") -> dict[str, tuple[int, int]]:
    """Interface -> (rx bytes, tx bytes) from ``/proc/self/net/dev`` (the caller's network namespace)."""
    out: dict[str, tuple[int, int]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if ":" not in line or "|" in line:
            continue
        name, _, rest = line.partition(":")
        fields = rest.split()
        if len(fields) < 16 or not all(f.isdigit() for f in fields):
            raise ParseError(source, number, "an interface line with 16 counters", found=line.strip())
        out[name.strip()] = (int(fields[0]), int(fields[8]))
    return out


def merge_interfaces(*listings: Iterable[NetInterface], speeds: dict[str, int] | None = None) -> list[NetInterface]:
    """One record per interface (by name): addresses from ``ip addr``, counters from ``ip -s link``, speeds."""
    merged: dict[str, NetInterface] = {}
    for listing in listings:
        for nif in listing:
            old = merged.get(nif.name)
            if old is None:
                merged[nif.name] = nif
                continue
            merged[nif.name] = NetInterface(
                name=nif.name, ifindex=old.ifindex, link_type=old.link_type, operstate=old.operstate,
                flags=old.flags or nif.flags, mtu=old.mtu or nif.mtu, mac=old.mac or nif.mac,
                addresses=old.addresses or nif.addresses,
                rx_bytes=old.rx_bytes if old.rx_bytes is not None else nif.rx_bytes,
                tx_bytes=old.tx_bytes if old.tx_bytes is not None else nif.tx_bytes, speed_mbps=old.speed_mbps)
    for name, mbps in (speeds or {}).items():
        if name in merged:
            nif = merged[name]
            merged[name] = NetInterface(**{**_fields(nif), "speed_mbps": mbps})
    return sorted(merged.values(), key=lambda n: n.ifindex)


def _fields(nif: NetInterface) -> dict[str, Any]:
    return {f: getattr(nif, f) for f in NetInterface.__slots__}


def read_speeds(names: Iterable[str], sys_net: Path = Path("/sys/class/net")) -> dict[str, int]:
    """Speeds (Mb/s) from ``/sys/class/net/<if>/speed`` for ``names``, only when the interfaces listed there are
    exactly ``names`` (the /sys of this network namespace); an empty dict otherwise or when the kernel has none
    (virtual links report -1 or fail to read)."""
    wanted = set(names)
    try:
        present = {p.name for p in sys_net.iterdir()}
    except OSError:
        return {}
    if present != wanted:
        return {}
    speeds = {}
    for name in sorted(wanted):
        try:
            value = int((sys_net / name / "speed").read_text().strip())
        except (OSError, ValueError):
            continue
        if value > 0:
            speeds[name] = value
    return speeds
