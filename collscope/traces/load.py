"""Read trace files and directories (one file per rank) into :class:`RankTrace` records.

Each file's format is detected from its content through the registry :data:`collscope.traces.formats.FORMATS`
(Kineto JSON, Flight Recorder JSON or pickle, NCCL Inspector JSON lines, pretty JSON or Prometheus text); gzip
(by its magic bytes) is inflated first, under a cap. Files are read with :func:`collscope.files.read_input_bytes`
(a FIFO or a device is refused). A file named on the command line must be a trace; in a directory, every file is
looked at, whatever its name (Flight Recorder writes ``nccl_trace_rank_3``, ``trace_0``), and one no format
recognises (a README, a launch script, a job's ``.out``, an ``nvidia-smi`` log) is skipped with a note naming it,
while one a format recognises but cannot read is an error. Every problem is a ParseError naming the file and
what was expected there.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from collscope.errors import ParseError
from collscope.files import kind_of, read_input_bytes, size_limit_from_env
from collscope.traces.formats import EXPECTED, SNIFF_BYTES, TraceFormat, describe_head, detect_trace_format
from collscope.traces.record import RankTrace
from collscope.units import format_size

__all__ = ["read_traces", "read_trace_file", "parse_trace_bytes", "trace_files", "MAX_INFLATED_BYTES",
           "MAX_TRACE_BYTES_ENV", "max_inflated_bytes", "MAX_INFLATE_RATIO", "MIN_INFLATED_BYTES", "TraceEntry"]

_RANK = re.compile(r"(?:rank|_r)[-_]?(\d+)", re.IGNORECASE)
_DIGITS = re.compile(r"(\d+)(?=\D*$)")
MAX_INFLATED_BYTES = 4 * 1024**3
"""A gzip trace inflates to at most 4 GiB, and :data:`MAX_INFLATE_RATIO` times its size, unless
``$COLLSCOPE_MAX_TRACE_BYTES`` says otherwise: a 10 MB file can hold 10 GiB of spaces (a "gzip bomb")."""
MAX_INFLATE_RATIO = 100
"""Profiler JSON compresses 10-20 times with gzip; 100 leaves room for repetitive traces."""
MIN_INFLATED_BYTES = 256 * 1024**2
"""A small trace may always inflate to 256 MiB, whatever its ratio."""
MAX_TRACE_BYTES_ENV = "COLLSCOPE_MAX_TRACE_BYTES"
_INFLATE_CHUNK = 64 * 1024**2


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One file to read: named on the command line (``listed``: must be a trace) or found in a directory."""

    path: Path
    listed: bool


def trace_files(paths: Iterable[Path | str]) -> tuple[list[TraceEntry], list[tuple[Path, str]]]:
    """The files named, and every entry of the directories named (sorted by name, hidden ones left out); and
    the notes on directory entries that cannot be traces (subdirectories, FIFOs, dangling links, empty files)."""
    out: list[TraceEntry] = []
    notes: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            out.append(TraceEntry(path, listed=True))
            continue
        entries = sorted(p for p in path.iterdir() if not p.name.startswith("."))
        if not entries:
            raise ParseError(str(path), None, "a directory of trace files", found="an empty directory")
        for entry in entries:
            why = _not_a_file(entry)
            if why is None:
                out.append(TraceEntry(entry, listed=False))
            else:
                notes.append((entry, why))
    if not out and not notes:
        raise ParseError("<no paths>", None, "at least one trace file or directory")
    return out, notes


def _not_a_file(path: Path) -> str | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return f"a symlink to a missing target ({os.readlink(path)})" if path.is_symlink() else "gone"
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISREG(st.st_mode):
        return kind_of(st.st_mode)
    return "an empty file" if st.st_size == 0 else None


def rank_from_name(name: str) -> int | None:
    m = _RANK.search(name) or _DIGITS.search(name.split(".")[0])
    return int(m.group(1)) if m else None


def max_inflated_bytes(compressed_bytes: int) -> int:
    """How many bytes a gzip trace of ``compressed_bytes`` may inflate to: :data:`MAX_INFLATE_RATIO` times its
    size, at least :data:`MIN_INFLATED_BYTES` and at most :data:`MAX_INFLATED_BYTES`; or
    ``$COLLSCOPE_MAX_TRACE_BYTES`` (a size such as ``16G``) when set."""
    limit = size_limit_from_env(MAX_TRACE_BYTES_ENV, "4G or 16G")
    if limit is None:
        return min(MAX_INFLATED_BYTES, max(MIN_INFLATED_BYTES, MAX_INFLATE_RATIO * compressed_bytes))
    return limit


def _inflate(data: bytes, source: str, limit: int) -> bytes:
    """The gzip members of ``data`` inflated a chunk at a time, refused as soon as they pass ``limit`` bytes."""
    out: list[bytes] = []
    total = 0
    rest = data
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
        pending = rest
        while True:
            piece = inflater.decompress(pending, _INFLATE_CHUNK)
            total += len(piece)
            if total > limit:
                raise ParseError(source, None, f"a gzip trace that inflates to at most {format_size(limit)} bytes "
                                 f"(set {MAX_TRACE_BYTES_ENV} to allow more)",
                                 found=f"more than that from {len(data)} bytes compressed")
            out.append(piece)
            pending = inflater.unconsumed_tail
            if inflater.eof or not (pending or piece):
                break
        if not inflater.eof:
            raise EOFError("the file ends before the end of its gzip stream")
        rest = inflater.unused_data
        if not rest.startswith(b"\x1f\x8b"):
            if rest.strip(b"\x00"):
                raise OSError("bytes that are not gzip after the last member")
            break
    return b"".join(out)


def _decompress(data: bytes, source: str) -> bytes:
    if not data.startswith(b"\x1f\x8b"):
        return data
    limit = max_inflated_bytes(len(data))
    try:
        return _inflate(data, source, limit)
    except (EOFError, OSError, zlib.error) as exc:
        raise ParseError(source, None, "a complete gzip file", found=f"a damaged or truncated one ({exc})") from None


def parse_trace_bytes(data: bytes, source: str, *, rank_hint: int | None = None) -> list[RankTrace]:
    """The rank traces in one file's bytes (gzip or not); the format is detected from the content."""
    data = _decompress(data, source)
    fmt = detect_trace_format(data[:SNIFF_BYTES])
    if fmt is None:
        raise ParseError(source, None, EXPECTED, found=describe_head(data[:SNIFF_BYTES]))
    return _parse_as(fmt, data, source, rank_hint)


def _parse_as(fmt: TraceFormat, data: bytes, source: str, rank_hint: int | None) -> list[RankTrace]:
    if fmt.max_bytes is not None:
        limit = size_limit_from_env(MAX_TRACE_BYTES_ENV, "4G or 16G")
        if limit is None:
            limit = fmt.max_bytes
        if len(data) > limit:
            raise ParseError(source, None, f"{fmt.what} of at most {format_size(limit)} bytes (set "
                             f"{MAX_TRACE_BYTES_ENV} to allow more)", found=f"{len(data)} bytes")
    try:
        return fmt.parse(data, source, rank_hint)
    except RecursionError:  # the JSON decoders' depth limit
        raise ParseError(source, None, fmt.what, found="JSON nested too deeply") from None


def _head(path: Path) -> bytes:
    """The first bytes of a regular file, inflated when it is gzip (a damaged gzip start is an error)."""
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if not head.startswith(b"\x1f\x8b"):
        return head
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, SNIFF_BYTES)
    except zlib.error as exc:
        raise ParseError(str(path), None, "a complete gzip file", found=f"a damaged one ({exc})") from None


def read_trace_file(path: Path | str) -> list[RankTrace]:
    name = str(path)
    data = read_input_bytes(path, "a trace file (" + EXPECTED + ")")
    return parse_trace_bytes(data, name, rank_hint=rank_from_name(Path(name).name))


def _read_entry(entry: TraceEntry) -> list[RankTrace] | str:
    """The traces of one file, or (a directory's file no format recognises) why it is skipped."""
    if entry.listed:
        return read_trace_file(entry.path)
    try:
        head = _head(entry.path)
    except OSError as exc:
        return exc.strerror or str(exc)
    fmt = detect_trace_format(head)
    if fmt is None:
        return f"not a trace ({describe_head(head)})"
    name = str(entry.path)
    data = _decompress(read_input_bytes(entry.path, fmt.what), name)
    return _parse_as(fmt, data, name, rank_from_name(entry.path.name))


def read_traces(paths: Iterable[Path | str]) -> list[RankTrace]:
    """Every rank trace in ``paths``; ParseError when two files claim one rank, or world sizes disagree. Files of
    a directory that are not traces are named in the first trace's warnings."""
    entries, notes = trace_files(paths)
    traces: list[RankTrace] = []
    for entry in entries:
        got = _read_entry(entry)
        if isinstance(got, str):
            notes.append((entry.path, got))
        else:
            traces.extend(got)
    if not traces:
        where = sorted({str(path.parent) for path, _ in notes}) or ["<no paths>"]
        names = ", ".join(path.name for path, _ in notes[:6]) + (f" and {len(notes) - 6} more" if len(notes) > 6
                                                                 else "")
        raise ParseError(", ".join(where), None, "at least one trace file (" + EXPECTED + ")",
                         found=f"only entries that are not traces: {names}")
    traces = _number_unranked(traces)
    check_siblings(traces)
    traces.sort(key=lambda t: (t.rank, t.kind))
    if notes:
        skipped = tuple(f"{path}: {why}, skipped" for path, why in notes)
        traces[0] = replace(traces[0], warnings=traces[0].warnings + skipped)
    return traces


def _number_unranked(traces: list[RankTrace]) -> list[RankTrace]:
    """Inspector's Prometheus files name a node and a GPU, not a rank: when two of them from different nodes
    claim the same GPU index, they are numbered 0, 1, ... in the order of (node, GPU), which a warning lists."""
    prom = [t for t in traces if t.kind == "inspector_prom"]
    if len({t.rank for t in prom}) == len(prom):
        return traces
    order = sorted(prom, key=lambda t: (t.host or "", t.rank, t.source))
    new = {id(t): i for i, t in enumerate(order)}
    listed = ", ".join(f"{i} = {t.host or 'unnamed node'} GPU{t.rank}" for i, t in enumerate(order[:8]))
    more = f" and {len(order) - 8} more" if len(order) > 8 else ""
    note = f"Inspector's Prometheus files numbered as ranks in the order of node, then GPU: {listed}{more}"
    out = [replace(t, rank=new[id(t)], calls=tuple(replace(c, rank=new[id(t)]) for c in t.calls))
           if id(t) in new else t for t in traces]
    first = next(i for i, t in enumerate(out) if t.kind == "inspector_prom")
    out[first] = replace(out[first], warnings=out[first].warnings + (note,))
    return out


def check_siblings(traces: list[RankTrace]) -> None:
    seen: dict[tuple[str, int], str] = {}
    for t in traces:
        key = (t.kind, t.rank)
        if key in seen:
            raise ParseError(t.source, None, f"one file per rank; rank {t.rank} is also in {seen[key]}")
        seen[key] = t.source
    worlds = {t.world_size for t in traces if t.world_size is not None}
    if len(worlds) > 1:
        counts = {w: sum(1 for t in traces if t.world_size == w) for w in worlds}
        usual = max(counts, key=lambda w: counts[w])
        odd = next(t for t in traces if t.world_size is not None and t.world_size != usual)
        raise ParseError(odd.source, None, f"a trace of the same job as its siblings (world_size {usual})",
                         found=f"world_size {odd.world_size}")
    for t in traces:
        if t.world_size is not None and not 0 <= t.rank < t.world_size:
            raise ParseError(t.source, None, f"a rank below world_size {t.world_size}", found=f"rank {t.rank}")
