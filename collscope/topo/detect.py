"""Recognise a captured tool output from its content and load captures into NodeCaptures.

``--from`` takes files or directories; each file's format is detected from its text, never from its
name. A directory made by ``collscope topo collect`` also has a ``meta.json`` naming the host.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from collscope.errors import ParseError
from collscope.files import kind_of, read_input_text
from collscope.line_cap import drop_long_lines
from collscope.sniff import first_accepting
from collscope.topo import netif
from collscope.topo.foreign import foreign_format
from collscope.topo.infiniband import fabric as ibnd
from collscope.topo.infiniband import host as ib
from collscope.topo.infiniband import netdev
from collscope.topo.infiniband.merge import merge_hcas
from collscope.topo.infiniband.rdma_link import looks_like_rdma_link, parse_rdma_link
from collscope.topo.meta import META_FILE, read_meta
from collscope.topo.nccl_xml import parse as xml
from collscope.topo.node import NodeCaptures
from collscope.topo.nvidia_smi import fabric as nvsmi_fabric
from collscope.topo.nvidia_smi import queries as nvsmi
from collscope.topo.pasted import SPLIT_FORMATS, PastedPart, split_pasted

__all__ = ["FORMATS", "detect_format", "add_capture", "load_captures", "read_capture_text", "skip_reason"]


EXPECTED_CAPTURE = "a captured tool output (UTF-8 text)"


@dataclass(frozen=True)
class CaptureFormat:
    name: str
    looks_like: Callable[[str], bool]
    store: Callable[[NodeCaptures, str, str], None]
    """Parse ``text`` (from ``source``) and put the result into the captures."""
    single: str | None = None
    """What the capture is, in words, where it describes the whole node so a node has at most one (the
    ``nvidia-smi topo -m`` matrix); ``None`` where captures merge (ibstat and ibv_devinfo listings)."""


def _set_matrix(c: NodeCaptures, text: str, source: str) -> None:
    c.matrix = nvsmi.parse_topo_matrix(text, source)


def _set_gpu_info(c: NodeCaptures, text: str, source: str) -> None:
    c.gpu_info = nvsmi.parse_gpu_query_csv(text, source)


def _set_nvlinks(c: NodeCaptures, text: str, source: str) -> None:
    c.nvlinks = nvsmi.parse_nvlink_status(text, source)


def _set_gpu_fabric(c: NodeCaptures, text: str, source: str) -> None:
    c.gpu_fabric = nvsmi_fabric.parse_nvsmi_fabric(text, source)


def _hcas(parse: Callable[[str, str], ib.HcaListing]) -> Callable[[NodeCaptures, str, str], None]:
    def store(c: NodeCaptures, text: str, source: str) -> None:
        listing = parse(text, source)
        c.hcas, conflicts = merge_hcas(c.hcas, c.hca_origins, listing.hcas, source)
        c.errors.extend(conflicts)
        if listing.error:
            c.errors.append(f"{source}: output ends in an error after {len(listing.hcas)} CA(s): {listing.error}")

    return store


def _set_netdevs(c: NodeCaptures, text: str, source: str) -> None:
    c.netdevs = netdev.parse_ibdev2netdev(text, source)


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
    CaptureFormat("nccl-graph-xml", xml.looks_like_nccl_graph_xml, _set_graphs, "NCCL graph XML"),
    CaptureFormat("nccl-topo-xml", xml.looks_like_nccl_topo_xml, _set_xml, "NCCL topology XML"),
    CaptureFormat("ibnetdiscover", ibnd.looks_like_ibnetdiscover, _set_fabric(ibnd.parse_ibnetdiscover),
                  "fabric capture (ibnetdiscover or iblinkinfo)"),
    CaptureFormat("iblinkinfo", ibnd.looks_like_iblinkinfo, _set_fabric(ibnd.parse_iblinkinfo),
                  "fabric capture (ibnetdiscover or iblinkinfo)"),
    CaptureFormat("nvidia-smi-q", nvsmi_fabric.looks_like_nvsmi_query, _set_gpu_fabric, "`nvidia-smi -q` output"),
    CaptureFormat("nvidia-smi-topo", nvsmi.looks_like_topo_matrix, _set_matrix, "`nvidia-smi topo -m` matrix"),
    CaptureFormat("nvidia-smi-nvlink", nvsmi.looks_like_nvlink_status, _set_nvlinks, "`nvidia-smi nvlink -s` status"),
    CaptureFormat("nvidia-smi-query-gpu", nvsmi.looks_like_gpu_query_csv, _set_gpu_info,
                  "`nvidia-smi --query-gpu` CSV"),
    CaptureFormat("ibstat", ib.looks_like_ibstat, _hcas(ib.parse_ibstat)),
    CaptureFormat("ibstatus", ib.looks_like_ibstatus, _hcas(ib.parse_ibstatus)),
    CaptureFormat("ibv_devinfo", ib.looks_like_ibv_devinfo, _hcas(ib.parse_ibv_devinfo)),
    CaptureFormat("ibv_devices", ib.looks_like_ibv_devices, _set_nic_names),
    CaptureFormat("rdma-link", looks_like_rdma_link, _hcas(parse_rdma_link)),
    CaptureFormat("ibdev2netdev", netdev.looks_like_ibdev2netdev, _set_netdevs, "ibdev2netdev listing"),
    CaptureFormat("ip-addr-json", netif.looks_like_ip_addr_json, _netifs(netif.parse_ip_addr_json)),
    CaptureFormat("ip-link-json", netif.looks_like_ip_link_json, _netifs(netif.parse_ip_link_json)),
    CaptureFormat("netif-speeds", netif.looks_like_speeds_json, _set_speeds),
)
FORMAT_NAMES = tuple(f.name for f in FORMATS)


def detect_format(text: str) -> str | None:
    """The name of the format of ``text`` (one of :data:`FORMAT_NAMES`), or ``None``."""
    fmt = first_accepting(FORMATS, text)
    return None if fmt is None else fmt.name


def add_capture(captures: NodeCaptures, text: str, source: str) -> str:
    """Detect, parse and store one capture; returns the format name. Raises ParseError if unknown.

    A file holding several tool outputs pasted together (``ibstat`` then ``ibv_devinfo``, prompt lines kept) is
    split by content (:mod:`collscope.topo.pasted`); each part is read by its own parser and the CA facts merged,
    disagreements named in ``captures.errors``. The returned name is then the parts' formats joined by ``+``.
    A line longer than :data:`~collscope.line_cap.MAX_LINE_CHARS` is skipped, with a note there (JSON, read by
    the json module and no pattern, is kept whole)."""
    if next((c for c in text[:4096] if not c.isspace()), "") not in ("[", "{"):
        text, long_lines = drop_long_lines(text)
        captures.errors.extend(f"{source}: {note}" for note in long_lines)
    foreign = foreign_format(text)
    if foreign is not None:
        raise ParseError(source, None, f"a topology capture: {foreign.instead}", found=foreign.what)
    name = detect_format(text)
    parts = split_pasted(text) if name is None or name in SPLIT_FORMATS else None
    if parts is not None:
        return "+".join(_add_part(captures, part, source) for part in parts)
    if name is None:
        raise ParseError(source, None, "a capture of one of: " + ", ".join(FORMAT_NAMES),
                         found=next((ln.strip() for ln in text.splitlines() if ln.strip()), "an empty file"))
    _store(captures, name, text, source)
    captures.sources.append(source)
    return name


def _store(captures: NodeCaptures, name: str, text: str, source: str) -> None:
    fmt = next(f for f in FORMATS if f.name == name)
    if fmt.single is not None:
        first = captures.origins.setdefault(fmt.single, source)
        if first != source:
            raise ParseError(source, None, f"at most one {fmt.single} per node, but {first} is one too (pass "
                             "each node's captures on their own, or leave one of the two out)")
    fmt.store(captures, text, source)


def _add_part(captures: NodeCaptures, part: PastedPart, source: str) -> str:
    """One part of a pasted file, read by the parser its content names; errors point at the file's lines."""
    name = detect_format(part.text)
    label = f"{source} ({part.where}: {name or part.fmt})"
    if name is None:
        first = next((ln.strip() for ln in part.text.splitlines() if ln.strip()), "")
        raise ParseError(source, part.first_line, "a capture of one of: " + ", ".join(FORMAT_NAMES), found=first)
    try:
        _store(captures, name, part.text, label)
    except ParseError as exc:
        if exc.source != label or exc.line is None:
            raise
        raise ParseError(source, part.first_line - 1 + exc.line, exc.expected, exc.found) from None
    if source not in captures.sources:
        captures.sources.append(source)
    return name


def read_capture_text(path: Path) -> str:
    """The text of one capture file: a regular UTF-8 file (ParseError naming the file, and the line of bytes
    that are not text, otherwise; a FIFO is refused without blocking)."""
    return read_input_text(path, EXPECTED_CAPTURE)


def _listing(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name != META_FILE and not p.name.startswith("."))


def skip_reason(path: Path) -> str | None:
    """Why a directory entry is no capture file (a dangling symlink, a FIFO, a subdirectory...), else None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"a symlink to a missing target ({os.readlink(path)})" if path.is_symlink() else "gone"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None if stat.S_ISREG(mode) else kind_of(mode)


def _add_directory(captures: NodeCaptures, directory: Path) -> None:
    """Every capture file of ``directory``; what is skipped (empty files, dangling symlinks, FIFOs, ...) is named
    in ``captures.errors``, which the commands show as notes. A directory whose every entry is skipped is a
    ParseError naming the first one."""
    meta = read_meta(directory)
    if meta is not None:
        captures.host = meta.host or captures.host
        captures.errors.extend(meta.errors)
    entries = _listing(directory)
    if not entries:
        raise ParseError(str(directory), None, "a directory with captured tool outputs", found="no files")
    skipped: list[str] = []
    for entry in entries:
        why = skip_reason(entry)
        text = read_capture_text(entry) if why is None else ""
        if why is None and not text.strip():
            why = "an empty file"
        if why is not None:
            skipped.append(f"{entry}: {why}")
            continue
        add_capture(captures, text, str(entry))
    if len(skipped) == len(entries):
        raise ParseError(str(directory), None, "a directory with captured tool outputs",
                         found=f"only skipped entries ({skipped[0]})")
    captures.errors.extend(f"{note}, skipped" for note in skipped)


def load_captures(paths: Iterable[Path | str]) -> NodeCaptures:
    """One node from files and/or capture directories (all merged into the same node).

    Each kind of capture that describes the whole node (the ``nvidia-smi topo -m`` matrix, the GPU query, the
    NCCL XML...) may come from one file only: a second one is a ParseError naming both files.
    """
    captures = NodeCaptures(host="unknown")
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            _add_directory(captures, path)
        elif path.exists() or path.is_symlink():  # a dangling symlink is named as such by the reader
            add_capture(captures, read_capture_text(path), str(path))
        else:
            raise ParseError(str(path), None, "an existing file or directory", found="no such path")
    return captures
