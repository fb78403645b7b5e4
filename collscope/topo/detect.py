"""Recognise a captured tool output from its content and load captures into NodeCaptures.

``--from`` takes files or directories; each file's format is detected from its text, never from its
name. A directory made by ``collscope topo collect`` also has a ``meta.json`` naming the host.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collscope.errors import ParseError
from collscope.topo import netif
from collscope.topo.infiniband import fabric as ibnd
from collscope.topo.infiniband import host as ib
from collscope.topo.nccl_xml import parse as xml
from collscope.topo.node import NodeCaptures
from collscope.topo.nvidia_smi import queries as nvsmi

__all__ = ["FORMATS", "detect_format", "add_capture", "load_captures", "read_capture_text"]


@dataclass(frozen=True)
class CaptureFormat:
    name: str
    looks_like: Callable[[str], bool]
    store: Callable[[NodeCaptures, str, str], None]
    """Parse ``text`` (from ``source``) and put the result into the captures."""


def _set_matrix(c: NodeCaptures, text: str, source: str) -> None:
    c.matrix = nvsmi.parse_topo_matrix(text, source)


def _set_gpu_info(c: NodeCaptures, text: str, source: str) -> None:
    c.gpu_info = nvsmi.parse_gpu_query_csv(text, source)


def _set_nvlinks(c: NodeCaptures, text: str, source: str) -> None:
    c.nvlinks = nvsmi.parse_nvlink_status(text, source)


def _hcas(parse: Callable[[str, str], ib.HcaListing]) -> Callable[[NodeCaptures, str, str], None]:
    def store(c: NodeCaptures, text: str, source: str) -> None:
        listing = parse(text, source)
        known = {h.name for h in c.hcas}
        c.hcas = c.hcas + tuple(h for h in listing.hcas if h.name not in known)
        if listing.error:
            c.errors.append(f"{source}: output ends in an error after {len(listing.hcas)} CA(s): {listing.error}")

    return store


def _set_netdevs(c: NodeCaptures, text: str, source: str) -> None:
    c.netdevs = ib.parse_ibdev2netdev(text, source)


def _set_nic_names(c: NodeCaptures, text: str, source: str) -> None:
    for name, _guid in ib.parse_ibv_devices(text, source):  # names only; ibstat/ibv_devinfo carry the ports
        if name not in c.nic_names:
            c.nic_names.append(name)


def _set_xml(c: NodeCaptures, text: str, source: str) -> None:
    c.xml = xml.parse_nccl_topo_xml(text, source)


def _set_graphs(c: NodeCaptures, text: str, source: str) -> None:
    c.graphs = xml.parse_nccl_graph_xml(text, source)


def _set_fabric(parse: Callable[[str, str], ibnd.IbFabric]) -> Callable[[NodeCaptures, str, str], None]:
    def store(c: NodeCaptures, text: str, source: str) -> None:
        c.fabric = parse(text, source)

    return store


def _netifs(parse: Callable[[str, str], list[netif.NetInterface]]) -> Callable[[NodeCaptures, str, str], None]:
    def store(c: NodeCaptures, text: str, source: str) -> None:
        c.netifs = netif.merge_interfaces(c.netifs, parse(text, source))

    return store


def _set_speeds(c: NodeCaptures, text: str, source: str) -> None:
    c.netif_speeds.update(netif.parse_speeds_json(text, source))


# Order matters: the more specific sniffers first.
FORMATS: tuple[CaptureFormat, ...] = (
    CaptureFormat("nccl-graph-xml", xml.looks_like_nccl_graph_xml, _set_graphs),
    CaptureFormat("nccl-topo-xml", xml.looks_like_nccl_topo_xml, _set_xml),
    CaptureFormat("ibnetdiscover", ibnd.looks_like_ibnetdiscover, _set_fabric(ibnd.parse_ibnetdiscover)),
    CaptureFormat("iblinkinfo", ibnd.looks_like_iblinkinfo, _set_fabric(ibnd.parse_iblinkinfo)),
    CaptureFormat("nvidia-smi-topo", nvsmi.looks_like_topo_matrix, _set_matrix),
    CaptureFormat("nvidia-smi-nvlink", nvsmi.looks_like_nvlink_status, _set_nvlinks),
    CaptureFormat("nvidia-smi-query-gpu", nvsmi.looks_like_gpu_query_csv, _set_gpu_info),
    CaptureFormat("ibstat", ib.looks_like_ibstat, _hcas(ib.parse_ibstat)),
    CaptureFormat("ibstatus", ib.looks_like_ibstatus, _hcas(ib.parse_ibstatus)),
    CaptureFormat("ibv_devinfo", ib.looks_like_ibv_devinfo, _hcas(ib.parse_ibv_devinfo)),
    CaptureFormat("ibv_devices", ib.looks_like_ibv_devices, _set_nic_names),
    CaptureFormat("ibdev2netdev", ib.looks_like_ibdev2netdev, _set_netdevs),
    CaptureFormat("ip-addr-json", netif.looks_like_ip_addr_json, _netifs(netif.parse_ip_addr_json)),
    CaptureFormat("ip-link-json", netif.looks_like_ip_link_json, _netifs(netif.parse_ip_link_json)),
    CaptureFormat("netif-speeds", netif.looks_like_speeds_json, _set_speeds),
)
FORMAT_NAMES = tuple(f.name for f in FORMATS)


def detect_format(text: str) -> str | None:
    """The name of the format of ``text`` (one of :data:`FORMAT_NAMES`), or ``None``."""
    for fmt in FORMATS:
        try:
            if fmt.looks_like(text):
                return fmt.name
        except Exception:  # a sniffer must never decide the outcome by crashing
            continue
    return None


def add_capture(captures: NodeCaptures, text: str, source: str) -> str:
    """Detect, parse and store one capture; returns the format name. Raises ParseError if unknown."""
    name = detect_format(text)
    if name is None:
        raise ParseError(source, None, "a capture of one of: " + ", ".join(FORMAT_NAMES),
                         found=next((ln.strip() for ln in text.splitlines() if ln.strip()), "an empty file"))
    fmt = next(f for f in FORMATS if f.name == name)
    fmt.store(captures, text, source)
    captures.sources.append(source)
    return name


def read_capture_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ParseError(str(path), None, "a readable file", found=exc.strerror) from exc


def _capture_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and p.name != "meta.json"
                  and not p.name.startswith("."))


def load_captures(paths: Iterable[Path | str]) -> NodeCaptures:
    """One node from files and/or capture directories (all merged into the same node)."""
    captures = NodeCaptures(host="unknown")
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            meta = _read_meta(path)
            if meta.get("host"):
                captures.host = str(meta["host"])
            for err in meta.get("errors", []):
                captures.errors.append(str(err))
            files = _capture_files(path)
            if not files:
                raise ParseError(str(path), None, "a directory with captured tool outputs", found="no files")
            for f in files:
                text = read_capture_text(f)
                if not text.strip():
                    continue
                add_capture(captures, text, str(f))
        elif path.exists():
            add_capture(captures, read_capture_text(path), str(path))
        else:
            raise ParseError(str(path), None, "an existing file or directory", found="no such path")
    return captures


def _read_meta(directory: Path) -> dict[str, Any]:
    meta_path = directory / "meta.json"
    if not meta_path.exists():
        return {}
    try:
        data = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise ParseError(str(meta_path), exc.lineno, "JSON written by collscope topo collect") from exc
    if not isinstance(data, dict):
        raise ParseError(str(meta_path), 1, "a JSON object")
    return data
