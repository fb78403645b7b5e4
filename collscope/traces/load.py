"""Read trace files and directories (one file per rank) into :class:`RankTrace` records.

Each file's format is detected from its content: a Kineto trace (``traceEvents``), a Flight Recorder dump
(``entries``) or NCCL Inspector JSON lines (``header`` + ``coll_perf``); ``.gz`` (or gzip magic) is
decompressed first. Files are read with :func:`collscope.files.read_input_bytes` (a FIFO or a device is refused).
Every problem is a ParseError naming the file and what was expected there.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterable
from pathlib import Path

import msgspec

from collscope.errors import ParseError
from collscope.files import read_input_bytes
from collscope.traces.flight import parse_flight_recorder
from collscope.traces.inspector import looks_like_inspector, parse_inspector
from collscope.traces.kineto import parse_kineto
from collscope.traces.kineto_schema import TraceDoc
from collscope.traces.record import RankTrace

__all__ = ["read_traces", "read_trace_file", "parse_trace_bytes", "trace_files", "TRACE_SUFFIXES"]

TRACE_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz", ".log")
_EXPECTED = ("a PyTorch profiler trace (JSON with traceEvents), a Flight Recorder dump (JSON with entries) or "
             "NCCL Inspector JSON lines")
_RANK = re.compile(r"(?:rank|_r)[-_]?(\d+)", re.IGNORECASE)
_DIGITS = re.compile(r"(\d+)(?=\D*$)")
_AT_BYTE = re.compile(r"at byte (\d+)")
_DECODER = msgspec.json.Decoder(TraceDoc)


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


def _decompress(data: bytes, source: str) -> bytes:
    if not data.startswith(b"\x1f\x8b"):
        return data
    try:
        return gzip.decompress(data)
    except (EOFError, OSError, zlib.error) as exc:
        raise ParseError(source, None, "a complete gzip file", found=f"a damaged or truncated one ({exc})") from None


def _line_of(data: bytes, message: str) -> int | None:
    m = _AT_BYTE.search(message)
    return data.count(b"\n", 0, int(m.group(1))) + 1 if m else None


def parse_trace_bytes(data: bytes, source: str, *, rank_hint: int | None = None) -> list[RankTrace]:
    """The rank traces in one file's bytes (gzip or not); the format is detected from the content."""
    data = _decompress(data, source)
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
