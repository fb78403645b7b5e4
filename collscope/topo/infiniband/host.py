"""Parsers for the per-host InfiniBand / RDMA tools: ibstat, ibstatus, ibv_devinfo, ibv_devices (ibdev2netdev:
:mod:`collscope.topo.infiniband.netdev`).

Every ``parse_*`` is pure (text in, typed records out) and raises only :class:`ParseError`. The CA order
is kept as printed (the tools print lexical order: mlx5_0, mlx5_1, mlx5_10, mlx5_2 ...); sort with
:func:`collscope.topo.naming.natural_key` when a numeric order is wanted.

Normalisation shared by all tools: port states are capitalised words ("Active", "Down", "Initializing",
"Armed"), physical states CamelCase ("LinkUp", "Disabled", "Polling"), GUIDs ``0x`` + 16 lowercase hex
digits (ibv_devinfo's ``043f:7203:00da:2130`` and ibv_devices' ``043f720300da2130`` become
``0x043f720300da2130``), link rates in Gb/s (bits) as the tool prints them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from collscope.errors import ParseError

__all__ = [
    "IbPort", "Hca", "HcaListing",
    "parse_ibstat", "parse_ibstatus", "parse_ibv_devinfo", "parse_ibv_devices",
    "normalize_guid", "normalize_port_state", "normalize_physical_state",
    "looks_like_ibstat", "looks_like_ibstatus", "looks_like_ibv_devinfo", "looks_like_ibv_devices",
    "port_transport", "SNIFF_LIMIT",
]  # fmt: skip

_A = re.ASCII


def port_transport(link_layer: str | None, *, rdma: bool) -> str | None:
    """What a NIC port carries: ``"InfiniBand"``; ``"RoCE"``, an RDMA device's port on an Ethernet link (what
    ibstat, ibv_devinfo and ``rdma link`` list: RoCE needs the RDMA device, and only then has GIDs and a use for
    ``NCCL_IB_GID_INDEX``); ``"Ethernet"``, a plain network interface with no RDMA device (``ip`` only: TCP,
    NCCL's socket transport); None when the link layer is unknown."""
    if link_layer == "InfiniBand":
        return "InfiniBand"
    if link_layer == "Ethernet":
        return "RoCE" if rdma else "Ethernet"
    return None


@dataclass(frozen=True, slots=True)
class IbPort:
    """One port of a CA (host channel adapter) as one of the per-host tools reports it."""

    port: int
    state: str
    physical_state: str | None
    rate_gbps: float | None
    """Link rate in Gb/s (bits), as the tool prints it; down ports often report 10 or 40."""
    link_layer: str | None
    """``"InfiniBand"`` or ``"Ethernet"`` (RoCE)."""
    lid: int | None
    """Base LID; 0 (RoCE) or 65535 (down IB port) kept as printed."""
    netdev: str | None = None
    sm_lid: int | None = None
    port_guid: str | None = None

    @property
    def is_roce(self) -> bool:
        """An RDMA device's port on an Ethernet link (every CA these tools list is an RDMA device)."""
        return port_transport(self.link_layer, rdma=True) == "RoCE"

    @property
    def is_up(self) -> bool:
        return self.state == "Active"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class Hca:
    """One CA: ``name`` is the verbs device name (``mlx5_0``); fields a tool does not print are None."""

    name: str
    ca_type: str | None
    firmware: str | None
    node_guid: str | None
    ports: tuple[IbPort, ...]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class HcaListing:
    """The CAs of an ibstat / ibstatus / ibv_devinfo output, plus the error line it ended with, if any.

    A tool that aborts half way (``ibpanic: ... stat of IB device 'mlx5_8' failed``) still printed
    complete records for the CAs before it; those are kept and ``error`` holds the error line.
    """

    hcas: tuple[Hca, ...]
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------------------- helpers

_STATES = {"ACTIVE": "Active", "DOWN": "Down", "INIT": "Initializing", "INITIALIZE": "Initializing",
           "INITIALIZING": "Initializing", "ARMED": "Armed", "ACTIVEDEFER": "Active/Defer"}  # fmt: skip
_PHYS = {"LINKUP": "LinkUp", "DISABLED": "Disabled", "POLLING": "Polling", "SLEEP": "Sleep",
         "PORTCONFIGURATIONTRAINING": "PortConfigurationTraining", "LINKERRORRECOVERY": "LinkErrorRecovery",
         "LINKERRORRECOVER": "LinkErrorRecovery",
         "PHYTEST": "PhyTest", "NOSTATECHANGE": "No state change", "NOP": "No state change"}  # fmt: skip
_ERROR_LINE = re.compile(r"^(ibpanic:|ibwarn:|ibstat:|ibv_devinfo:|Fatal error|Failed to|No IB devices)")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9 _]*")


def _key_value(line: str) -> tuple[str, str] | None:
    """``  Key name: value `` -> ``("Key name", "value")``; None when the line is not one.

    Split at the first colon and stripped, not a regular expression with lazy groups and blanks on both sides:
    that one rescanned a long run of blanks once per character (an 80,000-space line took minutes).
    """
    key, colon, value = line.partition(":")
    key = key.strip()
    if not colon or _KEY.fullmatch(key) is None:
        return None
    return key, value.strip()


def _norm(raw: str, table: dict[str, str]) -> str:
    """``4: ACTIVE`` / ``PORT_ACTIVE (4)`` / ``Active`` -> the table's spelling (else as printed)."""
    text = re.sub(r"^\d+:\s*|\s*\(\d+\)$", "", raw.strip(), flags=_A).strip()
    key = re.sub(r"^PORT_|[_ /]", "", text.upper())
    return table.get(key, text.title() if text.isupper() else text)


def normalize_port_state(raw: str) -> str:
    """A port state as any tool prints it (``4: ACTIVE``, ``PORT_ACTIVE (4)``, ``ACTIVE``) -> ``Active``."""
    return _norm(raw, _STATES)


def normalize_physical_state(raw: str) -> str:
    """A physical state as any tool prints it (``5: LinkUp``, ``LINK_UP``) -> ``LinkUp``."""
    return _norm(raw, _PHYS)


def normalize_guid(raw: str) -> str | None:
    """``0x946DAE..``, ``043f:7203:00da:2130`` or bare hex -> ``0x`` + 16 lowercase digits, else None."""
    text = raw.strip().lower().replace(":", "")
    text = text[2:] if text.startswith("0x") else text
    return "0x" + text.zfill(16) if re.fullmatch(r"[0-9a-f]{1,16}", text, _A) else None


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), 1):
        yield number, line.rstrip()


def _int(value: str, source: str, number: int) -> int:
    text = value.split()[0] if value.split() else ""
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text, _A):
        return int(text, 16)
    if re.fullmatch(r"\d+", text, _A):
        return int(text)
    raise ParseError(source, number, "a decimal or 0x-hex number", value)


def _float(value: str, source: str, number: int) -> float:
    """Leading number of ``400``, ``200 Gb/sec (4X HDR)``, ``4X (2)``, ``100.0 Gbps (128)``."""
    match = re.match(r"\s*(\d+(?:\.\d+)?)", value, _A)
    if not match:
        raise ParseError(source, number, "a number (rate, width or lane speed)", value)
    return float(match.group(1))


_Convert = Callable[[str, str, int], Any]
_STATE: _Convert = lambda v, s, n: _norm(v, _STATES)  # noqa: E731
_PHYS_STATE: _Convert = lambda v, s, n: _norm(v, _PHYS)  # noqa: E731
_TEXT: _Convert = lambda v, s, n: v or None  # noqa: E731
_GUID: _Convert = lambda v, s, n: normalize_guid(v)  # noqa: E731


def _maybe_float(value: str, source: str, number: int) -> float | None:
    """``4X (2)`` -> 4.0, ``25.0 Gbps (32)`` -> 25.0, ``invalid width (0)`` -> None."""
    match = re.match(r"(\d+(?:\.\d+)?)", value, _A)
    return float(match.group(1)) if match else None



class _Builder:
    """Collects CA and port fields line by line into :class:`Hca` records."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.hcas: list[Hca] = []
        self.ca: dict[str, Any] | None = None
        self.port_fields: dict[str, Any] | None = None

    def start_ca(self, name: str) -> None:
        self.finish_ca()
        self.ca = {"name": name, "ca_type": None, "firmware": None, "node_guid": None, "ports": []}

    def start_port(self, port: int, number: int) -> None:
        if self.ca is None:
            raise ParseError(self.source, number, "a CA header before the first port")
        self.finish_port()
        self.port_fields = {"port": port, "line": number}

    def set(self, table: dict[str, tuple[str, _Convert]], key: str, value: str, number: int) -> None:
        """Store ``key`` if ``table`` knows it: port tables fill the open port, CA tables the open CA."""
        target = self.port_fields if any(table is t for t in _PORT_TABLES) else self.ca
        if key in table and target is not None:
            name, convert = table[key]
            target[name] = convert(value, self.source, number)

    def finish_port(self) -> None:
        if self.port_fields is None or self.ca is None:
            return
        fields, self.port_fields = self.port_fields, None
        number = fields.pop("line")
        width, lane = fields.pop("_width", None), fields.pop("_lane_gbps", None)
        if width is not None and lane is not None:  # ibv_devinfo -v
            fields["rate_gbps"] = width * lane
        if "state" not in fields:
            raise ParseError(self.source, number, f"a state line for port {fields['port']}")
        defaults = {"physical_state": None, "rate_gbps": None, "link_layer": None, "lid": None}
        self.ca["ports"].append(IbPort(**{**defaults, **fields}))

    def finish_ca(self) -> None:
        self.finish_port()
        if self.ca is not None:
            self.hcas.append(Hca(**{**self.ca, "ports": tuple(self.ca["ports"])}))
            self.ca = None

    def result(self, error: str | None, expected: str) -> HcaListing:
        self.finish_ca()
        if not self.hcas and error is None:
            raise ParseError(self.source, None, expected)
        return HcaListing(tuple(self.hcas), error)


# ------------------------------------------------------------------------------------------ ibstat

_IBSTAT_CA = re.compile(r"^CA '([^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^\s*Port (\d+):\s*$", _A)
_IBSTAT_CA_KEYS = {"CA type": ("ca_type", _TEXT), "Firmware version": ("firmware", _TEXT),
                   "Node GUID": ("node_guid", _GUID)}  # fmt: skip
_IBSTAT_PORT_KEYS = {"State": ("state", _STATE), "Physical state": ("physical_state", _PHYS_STATE),
                     "Rate": ("rate_gbps", _float), "Base lid": ("lid", _int), "SM lid": ("sm_lid", _int),
                     "Port GUID": ("port_guid", _GUID), "Link layer": ("link_layer", _TEXT)}  # fmt: skip


def parse_ibstat(text: str, source: str = "<text>") -> HcaListing:
    """Parse ``ibstat`` output (tab or space indented, trimmed headers, a trailing ``ibpanic:`` line)."""
    b = _Builder(source)
    for number, line in _lines(text):
        if not line.strip() or line.strip().startswith("ibwarn:"):
            continue
        if _ERROR_LINE.match(line.strip()):
            return b.result(line.strip(), "")
        if match := _IBSTAT_CA.match(line):
            b.start_ca(match.group(1))
        elif match := _IBSTAT_PORT.match(line):
            b.start_port(int(match.group(1)), number)
        elif (pair := _key_value(line)) and b.ca is not None:
            key = pair[0]
            table = _IBSTAT_CA_KEYS if key in _IBSTAT_CA_KEYS else _IBSTAT_PORT_KEYS
            b.set(table, key, pair[1], number)
        else:
            raise ParseError(source, number, "an ibstat line (CA 'name', Port N:, Key: value)", line)
    return b.result(None, "at least one CA 'name' block")


# ---------------------------------------------------------------------------------------- ibstatus

_IBSTATUS_HEAD = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:\s*$", _A)
_IBSTATUS_KEYS = {"state": ("state", _STATE), "phys state": ("physical_state", _PHYS_STATE),
                  "rate": ("rate_gbps", _float), "base lid": ("lid", _int), "sm lid": ("sm_lid", _int),
                  "link_layer": ("link_layer", _TEXT)}  # fmt: skip


def parse_ibstatus(text: str, source: str = "<text>") -> HcaListing:
    """Parse ``ibstatus`` output: one block per (device, port), grouped into CAs in printed order."""
    b = _Builder(source)
    for number, line in _lines(text):
        if not line.strip():
            continue
        if _ERROR_LINE.match(line.strip()):
            return b.result(line.strip(), "")
        if match := _IBSTATUS_HEAD.match(line):
            if b.ca is None or b.ca["name"] != match.group(1):
                b.start_ca(match.group(1))
            b.start_port(int(match.group(2)), number)
        elif (pair := _key_value(line)) and b.port_fields is not None:
            b.set(_IBSTATUS_KEYS, pair[0], pair[1], number)
        else:
            raise ParseError(source, number, "an ibstatus line (Infiniband device 'x' port N status:)", line)
    return b.result(None, "at least one \"Infiniband device 'name' port N status:\" block")


# ------------------------------------------------------------------------------------- ibv_devinfo

_DEVINFO_CA_KEYS = {"fw_ver": ("firmware", _TEXT), "node_guid": ("node_guid", _GUID),
                    "vendor_part_id": ("ca_type", lambda v, s, n: f"MT{_int(v, s, n)}")}  # fmt: skip
_DEVINFO_PORT_KEYS = {"state": ("state", _STATE), "phys_state": ("physical_state", _PHYS_STATE),
                      "port_lid": ("lid", _int), "sm_lid": ("sm_lid", _int),
                      "link_layer": ("link_layer", _TEXT), "active_width": ("_width", _maybe_float),
                      "active_speed": ("_lane_gbps", _maybe_float)}  # fmt: skip
_PORT_TABLES = (_IBSTAT_PORT_KEYS, _IBSTATUS_KEYS, _DEVINFO_PORT_KEYS)


def parse_ibv_devinfo(text: str, source: str = "<text>") -> HcaListing:
    """Parse ``ibv_devinfo`` (plain or ``-v``); the rate is width x lane speed, which only ``-v`` prints."""
    b = _Builder(source)
    for number, line in _lines(text):
        if not line.strip():
            continue
        if not line[0].isspace() and _ERROR_LINE.match(line):
            return b.result(line.strip(), "")
        pair = _key_value(line)
        if pair is None:
            if line[0].isspace():  # -v flag lists (device_cap_flags ...) are bare names
                continue
            raise ParseError(source, number, "an ibv_devinfo line (hca_id: name, key: value)", line)
        key, value = pair
        if key == "hca_id" and not line[0].isspace():
            b.start_ca(value)
        elif b.ca is None:
            raise ParseError(source, number, "an 'hca_id:' line first", line)
        elif key == "port":
            b.start_port(_int(value, source, number), number)
        else:
            b.set(_DEVINFO_CA_KEYS if b.port_fields is None else _DEVINFO_PORT_KEYS, key, value, number)
    return b.result(None, "at least one 'hca_id:' block")


# ------------------------------------------------------------------------------------- ibv_devices

_DEVICES_HEAD = re.compile(r"^\s*device\s+node GUID\s*$")
_DEVICES_RULE = re.compile(r"^\s*-+\s+-+\s*$")


def parse_ibv_devices(text: str, source: str = "<text>") -> list[tuple[str, str]]:
    """Parse ``ibv_devices``: (device, node GUID) pairs in printed order, GUIDs as ``0x`` + 16 hex digits."""
    rows: list[tuple[str, str]] = []
    seen_head = False
    for number, line in _lines(text):
        if not line.strip() or _DEVICES_RULE.match(line):
            continue
        if _DEVICES_HEAD.match(line):
            seen_head = True
            continue
        fields = line.split()
        guid = normalize_guid(fields[-1]) if len(fields) == 2 and seen_head else None
        if guid is None:
            raise ParseError(source, number, "an ibv_devices row 'device  GUID' after the header", line)
        rows.append((fields[0], guid))
    if not seen_head:
        raise ParseError(source, None, "the ibv_devices header 'device  node GUID'")
    return rows


# ---------------------------------------------------------------------------------------- sniffers

SNIFF_LIMIT = 65536
"""How much of a text the InfiniBand readers' sniffers look at (here and in the package's other modules)."""


def _has(pattern: str, text: str) -> bool:
    return re.search(pattern, text[:SNIFF_LIMIT], re.MULTILINE) is not None


def looks_like_ibstat(text: str) -> bool:
    return _has(r"^CA '[^'\n]+'[ \t]*$", text) and _has(r"^[ \t]+(CA type|Port \d+):", text)


def looks_like_ibstatus(text: str) -> bool:
    return _has(r"^Infiniband device '[^'\n]+' port \d+ status:", text)


def looks_like_ibv_devinfo(text: str) -> bool:
    return _has(r"^hca_id:[ \t]*\S+[ \t]*$", text)


def looks_like_ibv_devices(text: str) -> bool:
    return _has(r"^[ \t]*device[ \t]+node GUID[ \t]*$", text)

