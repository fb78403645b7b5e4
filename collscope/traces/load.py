"""Read trace files and directories (one file per rank) into :class:`RankTrace` records.

Each file's format is detected from its content: a Kineto trace (``traceEvents``), a Flight Recorder dump
(``entries``) or NCCL Inspector JSON lines (``header`` + ``coll_perf``); ``.gz`` (or gzip magic) is
decompressed first. Files are read with :func:`collscope.files.read_input_bytes` (a FIFO or a device is refused).
Every problem is a ParseError naming the file and what was expected there.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterable
from pathlib import Path

import msgspec

from collscope.errors import ConfigError, ParseError, shown
from collscope.files import read_input_bytes
from collscope.traces.flight import parse_flight_recorder
from collscope.traces.inspector import looks_like_inspector, parse_inspector
from collscope.traces.kineto import parse_kineto
from collscope.traces.kineto_schema import TraceDoc
from collscope.traces.record import RankTrace
from collscope.units import format_size, parse_size

__all__ = ["read_traces", "read_trace_file", "parse_trace_bytes", "trace_files", "TRACE_SUFFIXES", "MAX_INFLATED_BYTES",
           "MAX_TRACE_BYTES_ENV", "max_inflated_bytes", "MAX_INFLATE_RATIO", "MIN_INFLATED_BYTES"]

TRACE_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz", ".log")
_EXPECTED = ("a PyTorch profiler trace (JSON with traceEvents), a Flight Recorder dump (JSON with entries) or "
             "NCCL Inspector JSON lines")
_RANK = re.compile(r"(?:rank|_r)[-_]?(\d+)", re.IGNORECASE)
_DIGITS = re.compile(r"(\d+)(?=\D*$)")
_AT_BYTE = re.compile(r"at byte (\d+)")
_DECODER = msgspec.json.Decoder(TraceDoc)
MAX_INFLATED_BYTES = 4 * 1024**3
"""A gzip trace inflates to at most 4 GiB, and :data:`MAX_INFLATE_RATIO` times its size, unless
``$COLLSCOPE_MAX_TRACE_BYTES`` says otherwise: a 10 MB file can hold 10 GiB of spaces (a "gzip bomb")."""
MAX_INFLATE_RATIO = 100
"""Profiler JSON compresses 10-20 times with gzip; 100 leaves room for repetitive traces."""
MIN_INFLATED_BYTES = 256 * 1024**2
"""A small trace may always inflate to 256 MiB, whatever its ratio."""
MAX_TRACE_BYTES_ENV = "COLLSCOPE_MAX_TRACE_BYTES"
_INFLATE_CHUNK = 64 * 1024**2


def trace_files(paths: Iterable[Path | str]) -> list[Path]:
    """The files named, and the trace files inside the directories named (sorted by name)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise ParseError(str(path), None, f"a directory of trace files ({', '.join(TRACE_SUFFIXES)})",
                                 found="none")
            out.extend(found)
        else:
            out.append(path)
    if not out:
        raise ParseError("<no paths>", None, "at least one trace file or directory")
    return out


def rank_from_name(name: str) -> int | None:
    m = _RANK.search(name) or _DIGITS.search(name.split(".")[0])
    return int(m.group(1)) if m else None


def max_inflated_bytes(compressed_bytes: int) -> int:
    """How many bytes a gzip trace of ``compressed_bytes`` may inflate to: :data:`MAX_INFLATE_RATIO` times its
    size, at least :data:`MIN_INFLATED_BYTES` and at most :data:`MAX_INFLATED_BYTES`; or
    ``$COLLSCOPE_MAX_TRACE_BYTES`` (a size such as ``16G``) when set."""
    raw = os.environ.get(MAX_TRACE_BYTES_ENV, "").strip()
    if not raw:
        return min(MAX_INFLATED_BYTES, max(MIN_INFLATED_BYTES, MAX_INFLATE_RATIO * compressed_bytes))
    try:
        return parse_size(raw)
    except ValueError:
        raise ConfigError(f"{MAX_TRACE_BYTES_ENV}={shown(raw)}: expected a size such as 4G or 16G") from None


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


def _line_of(data: bytes, message: str) -> int | None:
    m = _AT_BYTE.search(message)
    return data.count(b"\n", 0, int(m.group(1))) + 1 if m else None


def parse_trace_bytes(data: bytes, source: str, *, rank_hint: int | None = None) -> list[RankTrace]:
    """The rank traces in one file's bytes (gzip or not); the format is detected from the content."""
    data = _decompress(data, source)
    try:
        return _parse_inflated(data, source, rank_hint)
    except RecursionError:  # the JSON decoders' depth limit
        raise ParseError(source, None, _EXPECTED, found="JSON nested too deeply") from None


def _parse_inflated(data: bytes, source: str, rank_hint: int | None) -> list[RankTrace]:
    head = data[:64].lstrip()[:1]
    if head != b"{" and head != b"[":
        raise ParseError(source, 1, _EXPECTED, found=data[:60].decode("utf-8", "replace"))
    if looks_like_inspector(data):
        return parse_inspector(data, source)
    if b'"traceEvents"' in data:
        try:
            doc = _DECODER.decode(data)
        except msgspec.ValidationError as exc:
            raise ParseError(source, None, "a PyTorch profiler trace with well-typed events", found=str(exc)) from None
        except msgspec.DecodeError as exc:
            what = "a complete JSON document (the file looks truncated)" if "truncated" in str(exc) else _EXPECTED
            raise ParseError(source, _line_of(data, str(exc)), what, found=str(exc)) from None
        return [parse_kineto(doc, source, rank_hint=rank_hint)]
    if b'"entries"' in data:
        return [parse_flight_recorder(data, source, rank=rank_hint)]
    raise ParseError(source, None, _EXPECTED, found="JSON with none of traceEvents, entries, header/coll_perf")


def read_trace_file(path: Path | str) -> list[RankTrace]:
    name = str(path)
    data = read_input_bytes(path, "a trace file (" + _EXPECTED + ")")
    return parse_trace_bytes(data, name, rank_hint=rank_from_name(Path(name).name))


def read_traces(paths: Iterable[Path | str]) -> list[RankTrace]:
    """Every rank trace in ``paths``; ParseError when two files claim one rank, or world sizes disagree."""
    traces: list[RankTrace] = []
    for path in trace_files(paths):
        traces.extend(read_trace_file(path))
    check_siblings(traces)
    return sorted(traces, key=lambda t: (t.rank, t.kind))


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
