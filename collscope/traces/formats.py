"""The trace formats collscope reads, one row each: a name, a test on the first bytes, one parser.

Like :data:`collscope.topo.detect.FORMATS`: a file's format is recognised from its content (never its name),
the first row whose ``looks_like`` accepts the first :data:`SNIFF_BYTES` bytes (after gzip) reads it. Adding a
reader is one module with a ``looks_like(head: bytes) -> bool`` and a ``parse(data, source, rank_hint)`` plus one
row here. A file no row recognises is not a trace: named on the command line it is an error, found in a trace
directory it is skipped with a note; a file a row recognises but cannot parse is always an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from collscope.errors import ParseError
from collscope.sniff import first_accepting
from collscope.traces import flight, flight_pickle, inspector, inspector_prom
from collscope.traces.kineto import parse_kineto
from collscope.traces.kineto_schema import TraceDoc, gc_paused
from collscope.traces.record import RankTrace

__all__ = ["TraceFormat", "FORMATS", "FORMAT_NAMES", "SNIFF_BYTES", "detect_trace_format", "describe_head"]

SNIFF_BYTES = 1024 * 1024
"""How much of a file (inflated) the ``looks_like`` tests see: a Kineto trace's ``distributedInfo`` with hundreds
of process groups comes before ``traceEvents``."""

Parse = Callable[[bytes, str, int | None], list[RankTrace]]


@dataclass(frozen=True, slots=True)
class TraceFormat:
    name: str
    what: str
    """The format in words, for messages (``a Flight Recorder dump (pickle)``)."""
    looks_like: Callable[[bytes], bool]
    """True when the first :data:`SNIFF_BYTES` bytes (inflated) are this format's; must never raise."""
    parse: Parse
    """``parse(data, source, rank_hint)``: the rank traces in the whole (inflated) file; ParseError naming
    ``source`` otherwise. ``rank_hint`` is the rank the file name carries (``rank3``, ``trace_3``), or None."""
    max_bytes: int | None = None
    """The largest file of this format read unless ``$COLLSCOPE_MAX_TRACE_BYTES`` allows more (None: no cap
    beyond gzip's): a format whose parsed objects take many times the file's size."""


_KINETO_KEYS = (b'"traceEvents"', b'"schemaVersion"', b'"distributedInfo"', b'"deviceProperties"')
_DECODER = msgspec.json.Decoder(TraceDoc)
_AT_BYTE = re.compile(r"at byte (\d+)")


def _json_object(head: bytes) -> bool:
    return head.lstrip()[:1] == b"{"


def looks_like_kineto(head: bytes) -> bool:
    return _json_object(head) and any(key in head for key in _KINETO_KEYS)


def _line_of(data: bytes, message: str) -> int | None:
    m = _AT_BYTE.search(message)
    return data.count(b"\n", 0, int(m.group(1))) + 1 if m else None


def parse_kineto_bytes(data: bytes, source: str, rank_hint: int | None) -> list[RankTrace]:
    with gc_paused():
        try:
            doc = _DECODER.decode(data)
        except msgspec.ValidationError as exc:
            raise ParseError(source, None, "a PyTorch profiler trace with well-typed events",
                             found=str(exc)) from None
        except msgspec.DecodeError as exc:
            what = ("a complete JSON document (the file looks truncated)" if "truncated" in str(exc)
                    else "a PyTorch profiler trace (JSON with traceEvents)")
            raise ParseError(source, _line_of(data, str(exc)), what, found=str(exc)) from None
        return [parse_kineto(doc, source, rank_hint=rank_hint)]


# Order matters: the more specific tests first (an Inspector record before a generic JSON object).
FORMATS: tuple[TraceFormat, ...] = (
    TraceFormat("inspector-jsonl", "NCCL Inspector JSON lines", inspector.looks_like_inspector_lines,
                inspector.parse_inspector_lines),
    TraceFormat("inspector-json", "NCCL Inspector JSON (pretty-printed objects)", inspector.looks_like_inspector_json,
                inspector.parse_inspector_json),
    TraceFormat("inspector-prom", "NCCL Inspector Prometheus text (NCCL_INSPECTOR_PROM_DUMP=1)",
                inspector_prom.looks_like_inspector_prom, inspector_prom.parse_inspector_prom),
    TraceFormat("kineto", "a PyTorch profiler trace (JSON with traceEvents)", looks_like_kineto, parse_kineto_bytes),
    TraceFormat("flight-recorder-json", "a Flight Recorder dump (JSON with entries)",
                flight.looks_like_flight_json, flight.parse_flight_json),
    TraceFormat("flight-recorder-pickle", "a Flight Recorder dump (pickle, read as plain data only)",
                flight_pickle.looks_like_flight_pickle, flight_pickle.parse_flight_pickle,
                max_bytes=flight_pickle.MAX_PICKLE_BYTES),
)
FORMAT_NAMES = tuple(f.name for f in FORMATS)
EXPECTED = "a trace: " + "; ".join(f.what for f in FORMATS)


def detect_trace_format(head: bytes) -> TraceFormat | None:
    """The first format whose test accepts ``head`` (a file's first bytes, inflated), or None."""
    return first_accepting(FORMATS, head)


def describe_head(head: bytes) -> str:
    """What a file that is no trace starts with, safe to print: its first line of text, or "binary data" with
    its first bytes in hex (a pickle's raw bytes are never put in a message)."""
    if not head.strip():
        return "an empty file"
    if flight_pickle.is_pickle(head):
        return ("a Python pickle that is not a Flight Recorder dump (no version / pg_config / entries keys near "
                "its start)")
    sample = head[:400]
    try:
        text = sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(sample) - 4:  # not merely a character cut at the end of the sample
            return f"binary data (first bytes {sample[:12].hex(' ')})"
        text = sample[:exc.start].decode("utf-8")
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if any(ord(c) < 32 and c not in "\t" for c in line):
        return f"binary data (first bytes {sample[:12].hex(' ')})"
    return f"text starting {line[:80]!r}"
