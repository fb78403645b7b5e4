"""Typed, strict schemas of the files collscope writes in a results directory: ``sweep.json`` and ``failures.jsonl``.

Decoding never coerces: a wrong type, a missing required field and an unknown field are each a
:class:`~collscope.errors.ParseError` naming the file, the line (JSONL) and the field (``plan.points[3].point_id``),
with the value found and the type expected. Fields that later versions added are optional with a default, so
older directories still load: a ``sweep.json`` needs only ``sweep_id``; a plan point needs only ``point_id``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, TypeVar

import msgspec

from collscope.errors import ParseError
from collscope.files import decode_text

__all__ = ["SweepDoc", "SweepPlan", "PlanPoint", "PlanSkipped", "FailureEntry", "ResolvedEntry", "convert_doc",
           "decode_json_doc", "decode_failure_lines", "failure_entry"]

T = TypeVar("T")


class PlanPoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One planned point of ``sweep.json``'s ``plan.points`` (``Point.to_dict()`` of collscope.sweeps)."""

    point_id: str
    op: str | None = None
    settings: dict[str, str] = {}
    """Forced knobs only (env var -> value)."""
    repeat: int | None = None
    """None: not recorded (an older sweep.json); a point's records are then not checked against it."""
    sizes: list[int] | None = None
    """Explicit sizes of an adaptive point, in bytes; None: the spec's ladder."""
    round: int | None = None
    """``collscope locate`` tests: the round, the kind of test (node, group, pair, rail), its nodes and rail."""
    kind: str | None = None
    nodes: list[str] = []
    rail: int | None = None


class PlanSkipped(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A grid combination the plan's constraints left out."""

    op: str | None = None
    settings: dict[str, str] = {}
    reason: str | None = None


class SweepPlan(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``sweep.json``'s ``plan`` (``Plan.to_dict()``)."""

    sweep_id: str | None = None
    points: list[PlanPoint] = []
    skipped: list[PlanSkipped] = []
    strategy: dict[str, Any] | None = None
    """Adaptive sweeps: the strategy's options."""


class SweepDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``sweep.json``: what ``ResultsDir.prepare`` writes, plus what the adaptive strategy adds."""

    sweep_id: str
    kind: Literal["sweep", "locate"] = "sweep"
    """``locate``: the tests of ``collscope locate`` (its plan points carry round, kind, nodes, rail)."""
    created_at: str | None = None
    spec: dict[str, Any] = {}
    """The spec's JSON document; its fields are checked by collscope.sweeps when a sweep runs."""
    plan: SweepPlan = SweepPlan()
    versions: dict[str, str | None] = {}
    hosts: list[str] = []
    slurm_job_id: str | None = None
    topology_hash: str | None = None
    inherited_env: dict[str, Any] | None = None
    """The inherited-environment audit of the sweep (collscope.sweeps.inherited_env); None before it existed."""
    strategy: Literal["grid", "adaptive"] | None = None
    adaptive: dict[str, Any] | None = None
    rounds: list[dict[str, Any]] = []


class FailureEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A failed attempt of a point (one ``failures.jsonl`` line)."""

    point_id: str
    reason: str
    """One of :data:`collscope.results.store.FailureReason`, as written."""
    detail: str | None = None
    log_tail: str | None = None
    duration_s: float | None = None
    time: str | None = None


class ResolvedEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A later attempt finished the point (``{"point_id", "resolved": true, "time"}``)."""

    point_id: str
    time: str | None = None


class _FailureLine(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Either kind of line, as decoded; :func:`failure_entry` tells them apart."""

    point_id: str
    reason: str | msgspec.UnsetType = msgspec.UNSET
    detail: str | None = None
    log_tail: str | None = None
    duration_s: float | None = None
    time: str | None = None
    resolved: bool | msgspec.UnsetType = msgspec.UNSET


_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_STEP = re.compile(r'\.([^.\[]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "array", dict: "object"}.get(
        type(value), type(value).__name__)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return (text if len(text) <= 40 else text[:37] + "...") + f" ({_json_type(value)})"


def _at(doc: Any, path: str) -> Any:
    for key, index, quoted in _STEP.findall(path):
        doc = doc[int(index)] if index else doc[json.loads(quoted) if quoted else key]
    return doc


def _bad_key(mapping: Any, expected: str, path: str, field: str) -> tuple[str, str]:
    """The path and field name of the first value of ``mapping`` that is not of the ``expected`` types."""
    allowed = {t.strip() for t in expected.split("|")}
    if "float" in allowed:
        allowed.add("int")
    for key, value in mapping.items():
        if _json_type(value) not in allowed:
            step = f"[{json.dumps(key)}]"
            return f"{path[: -len('[...]')]}{step}", f"{field[: -len('[...]')]}{step}"
    raise KeyError(path)


def _problem(exc: msgspec.ValidationError, doc: Any, root: str) -> tuple[str, str | None]:
    """``(expected, found)`` for ParseError, from msgspec's ``Expected `str`, got `int` - at `$.a.b```."""
    m = _AT.match(str(exc))
    assert m is not None  # the pattern matches any text
    what, path = m["what"], m["path"] or ""
    where = path.lstrip(".")
    field = where or root
    if what.startswith("Object missing required field "):
        name = what.rsplit(" ", 1)[1].strip("`")
        return f"{where + '.' if where else ''}{name} (a required field)", "no such field"
    if what.startswith("Object contains unknown field "):
        name = what.rsplit(" ", 1)[1].strip("`")
        return f"only the known fields of {field}", f"unknown field {name!r}"
    expected = what.split(",", 1)[0].removeprefix("Expected ").replace("`", "")
    try:
        if path.endswith("[...]"):  # a value of a mapping (settings, versions): msgspec does not say which key
            path, field = _bad_key(_at(doc, path[: -len("[...]")]), expected, path, field)
        value = _at(doc, path)
    except (KeyError, IndexError, TypeError):
        return f"{field}: {what}", None
    if expected == what.replace("`", ""):  # not a type message (a constraint, say): say it as msgspec does
        return f"{field}: {what}", _shown(value)
    return f"{field} of type {expected}", _shown(value)


def convert_doc(doc: Any, kind: type[T], source: str, line: int | None, *, root: str = "the document") -> T:
    """``doc`` (decoded JSON) as ``kind``, strictly; ParseError naming ``source``, ``line`` and the field
    (``root`` names the document itself: ``a failure entry``)."""
    try:
        return msgspec.convert(doc, kind, strict=True)
    except msgspec.ValidationError as exc:
        expected, found = _problem(exc, doc, root)
        raise ParseError(source, line, expected, found=found) from None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_json_doc(text: str, source: str, *, line: int | None = None, what: str = "JSON") -> Any:
    """The JSON value of ``text``; malformed JSON (NaN and Infinity included) is a ParseError naming the line."""
    try:
        return json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        raise ParseError(source, where, what, found=f"{exc.msg} (column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise ParseError(source, line, what, found=str(exc)) from None


def failure_entry(doc: Any, source: str, line: int) -> FailureEntry | ResolvedEntry:
    """One decoded ``failures.jsonl`` line as its record: a failure needs ``reason``; a resolution is
    ``{"point_id", "resolved": true, "time"}``."""
    raw = convert_doc(doc, _FailureLine, source, line, root="a failure entry")
    if raw.resolved is msgspec.UNSET:
        if raw.reason is msgspec.UNSET:
            raise ParseError(source, line, "reason (a required field of a failure)", found="no such field")
        if not raw.reason:
            raise ParseError(source, line, "reason: one of timeout, exit code, parse error, ...", found='""')
        return FailureEntry(point_id=raw.point_id, reason=raw.reason, detail=raw.detail, log_tail=raw.log_tail,
                            duration_s=raw.duration_s, time=raw.time)
    if raw.resolved is not True:
        raise ParseError(source, line, "resolved: true (or no resolved field, on a failure)", found="false (bool)")
    extra = [name for name in ("reason", "detail", "log_tail", "duration_s")
             if getattr(raw, name) not in (msgspec.UNSET, None)]
    if extra:
        raise ParseError(source, line, "a resolution with point_id, resolved and time only",
                         found=f"also {', '.join(extra)}")
    return ResolvedEntry(point_id=raw.point_id, time=raw.time)


def decode_failure_lines(data: bytes, source: str) -> tuple[list[FailureEntry | ResolvedEntry], list[str]]:
    """The entries of ``failures.jsonl`` bytes, and notes.

    A line cut short (the start of an entry that is not complete JSON: a writer killed mid-line or a full disk)
    is skipped with a note, wherever it is: the last line, or an earlier one that the next append ended with a
    newline (:func:`collscope.atomic.append_bytes` never glues onto it). Any other line that is not a valid entry
    is a ParseError naming it. Blank lines are skipped.
    """
    entries: list[FailureEntry | ResolvedEntry] = []
    notes: list[str] = []
    lines = data.split(b"\n")
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        last = lineno == len(lines)
        if _half_written(raw):
            where = "last line (no newline after it" if last else "line (ended by a later append"
            notes.append(f"{source}:{lineno}: skipped a half-written {where}: a writer killed mid-line or a full "
                         "disk)")
            continue
        try:
            text = decode_text(raw, source, "failures.jsonl lines (UTF-8 JSON)")
        except ParseError as exc:
            raise ParseError(source, lineno, exc.expected, found=exc.found) from None
        doc = decode_json_doc(text, source, line=lineno, what="a failure entry as a JSON object")
        entries.append(failure_entry(doc, source, lineno))
    return entries, notes


def _half_written(line: bytes) -> bool:
    """Whether a line is the start of an entry cut short (never a complete entry, never other garbage): it starts
    like an object and JSON runs out at its end (an unterminated string, a missing value or bracket)."""
    if not line.lstrip().startswith(b"{"):
        return False
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data":  # bad bytes inside, not a character cut at the end
            return False
        text = line[: exc.start].decode("utf-8")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
    except (ValueError, RecursionError):
        return False
    return False
