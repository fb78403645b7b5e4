"""The workload a recommendation is judged on: how many calls of each (op, size) one step of the job makes.

DESIGN.md "Workload file" (``trace --workload-out``, ``recommend --workload``): JSON
``{"workload": [{"op", "size_bytes", "calls", "nranks"}]}`` or CSV with the header ``op,size_bytes,calls,nranks``.
Decoding is strict (msgspec, no coercion): a wrong type, a missing or unknown field is a ParseError naming the
file, the entry (JSON) or line (CSV) and the field. Without a file, :func:`per_measured_size` stands in: one call
per measured size, so each size weighs by its own time (the large sizes, where the time goes, dominate).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

import msgspec

from collscope.errors import ParseError
from collscope.files import read_input_text
from collscope.vocab.ops import OPS

__all__ = ["WorkloadEntry", "Workload", "parse_workload", "read_workload", "per_measured_size", "CSV_HEADER"]

CSV_HEADER = ("op", "size_bytes", "calls", "nranks")
_EXPECTED = 'a workload: JSON {"workload": [{"op", "size_bytes", "calls", "nranks"}]} or CSV op,size_bytes,calls,nranks'
_PATH = re.compile(r" - at `\$\.workload\[(\d+)\]\.?([^`]*)`$")


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    op: str
    size_bytes: int
    calls: int
    nranks: int


class _Doc(msgspec.Struct, forbid_unknown_fields=True):
    workload: list[_Entry]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadEntry:
    op: str
    size_bytes: int
    calls: int
    """Calls of this (op, size) per step."""
    nranks: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    entries: tuple[WorkloadEntry, ...]
    source: str
    """The file it came from, or ``"one call per measured size"``."""
    per_measured_size: bool = False

    def for_group(self, op: str, nranks: int) -> list[WorkloadEntry]:
        return [e for e in self.entries if e.op == op and e.nranks == nranks]

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "per_measured_size": self.per_measured_size,
                "entries": [{"op": e.op, "size_bytes": e.size_bytes, "calls": e.calls, "nranks": e.nranks}
                            for e in self.entries]}


def _check(entry: _Entry, source: str, where: int, field_line: bool) -> WorkloadEntry:
    line = where if field_line else None
    label = "" if field_line else f"workload[{where}]."
    for name, value, low in (("size_bytes", entry.size_bytes, 1), ("calls", entry.calls, 1),
                             ("nranks", entry.nranks, 1)):
        if value < low:
            raise ParseError(source, line, f"{label}{name}: an integer >= {low}", found=str(value))
    if entry.op not in OPS:
        raise ParseError(source, line, f"{label}op: one of {', '.join(OPS)}", found=entry.op)
    return WorkloadEntry(op=entry.op, size_bytes=entry.size_bytes, calls=entry.calls, nranks=entry.nranks)


def _parse_json(text: str, source: str) -> Workload:
    try:
        doc = msgspec.json.decode(text, type=_Doc, strict=True)
    except msgspec.ValidationError as exc:
        m = _PATH.search(str(exc))
        if m is None:
            raise ParseError(source, None, _EXPECTED, found=str(exc)) from None
        unknown = re.search(r"unknown field `([^`]*)`", str(exc))
        name = m[2] or (unknown[1] if unknown else "entry")
        raise ParseError(source, None, f"workload[{m[1]}].{name}: {str(exc)[: m.start()]}") from None
    except msgspec.DecodeError as exc:
        raise ParseError(source, None, _EXPECTED, found=str(exc)) from None
    entries = tuple(_check(e, source, i, False) for i, e in enumerate(doc.workload))
    return Workload(entries=entries, source=source)


def _parse_csv(text: str, source: str) -> Workload:
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is None or tuple(h.strip() for h in header) != CSV_HEADER:
        raise ParseError(source, 1, "the CSV header op,size_bytes,calls,nranks", found=",".join(header or []))
    entries = []
    for lineno, row in enumerate(rows, 2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(CSV_HEADER):
            raise ParseError(source, lineno, f"{len(CSV_HEADER)} fields (op,size_bytes,calls,nranks)",
                             found=",".join(row))
        values: dict[str, object] = {"op": row[0].strip()}
        for name, cell in zip(CSV_HEADER[1:], row[1:], strict=True):
            cell = cell.strip()
            if not re.fullmatch(r"[0-9]+", cell):
                raise ParseError(source, lineno, f"{name}: an integer", found=cell)
            values[name] = int(cell)
        entries.append(_check(msgspec.convert(values, _Entry, strict=True), source, lineno, True))
    return Workload(entries=tuple(entries), source=source)


def parse_workload(text: str, source: str) -> Workload:
    """A workload from its text (JSON when it starts with ``{``, else CSV); ParseError naming what is wrong."""
    if text.lstrip().startswith("{"):
        workload = _parse_json(text, source)
    else:
        workload = _parse_csv(text, source)
    if not workload.entries:
        raise ParseError(source, None, "at least one workload entry")
    return workload


def read_workload(path: Path | str) -> Workload:
    return parse_workload(read_input_text(path, "a workload file (JSON or CSV)"), str(path))


def per_measured_size(groups: list[tuple[str, int, list[int]]]) -> Workload:
    """One call per measured size of each (op, nranks, sizes) group: the stand-in without ``--workload``."""
    entries = tuple(WorkloadEntry(op=op, size_bytes=s, calls=1, nranks=nranks)
                    for op, nranks, sizes in groups for s in sorted(set(sizes)))
    return Workload(entries=entries, source="one call per measured size", per_measured_size=True)
