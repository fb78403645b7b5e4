"""Inputs of ``observe ingest``, read into store rows: which kind a file is, and one reader per kind.

Every reader is the project's own reader of that input (nccl-tests: :func:`parse_nccl_tests_runs`; Measurement
JSONL: :func:`collscope.results.decode.decode_records`; Inspector: :mod:`collscope.traces.inspector`; results
directories: :func:`collscope.analysis.load.load_results`, in :mod:`.results_reader`), so the store holds what
``analyze`` and ``trace`` would read. ``locate --json`` and ``trace --json`` documents are read by their
DESIGN.md shapes (strict types: a wrong one is a ParseError naming the field).

A JSON-lines input (Measurement JSONL, Inspector) with damaged lines keeps its other lines: each damaged line is
reported (:attr:`Source.problems`, ``file:line: ...``) and left out, up to :data:`MAX_SKIPPED_LINES`; any other
damaged input is a ParseError for the whole file (the caller reports it and goes on with the other inputs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar

import msgspec

from collscope.collectives.nccl_tests.parse import looks_like_nccl_tests
from collscope.collectives.nccl_tests.runs import parse_nccl_tests_runs
from collscope.collectives.record import Measurement
from collscope.errors import ParseError
from collscope.files import decode_text
from collscope.json_input import load_json
from collscope.observe.provenance import logged_provenance
from collscope.observe.rows import Rows, RunInfo, measurement_columns, measurement_run, run_id_of
from collscope.results.decode import decode_records
from collscope.traces.inspector import (
    looks_like_inspector_json,
    looks_like_inspector_lines,
    parse_inspector_json,
    parse_inspector_lines,
)
from collscope.traces.record import RankTrace
from collscope.units import algbw_gbps
from collscope.vocab.ops import OP_FACTS, busbw_factor

__all__ = ["Source", "ReadContext", "read_file", "detect_kind", "MAX_SKIPPED_LINES", "EXPECTED_INPUT"]

MAX_SKIPPED_LINES = 100
"""Damaged lines one JSON-lines input may lose before the whole file is refused."""
EXPECTED_INPUT = ("a sweep results directory, nccl-tests output (text or -J JSON), Measurement JSONL, "
                  "'locate --json' or 'trace --json' output, or NCCL Inspector JSON lines")
_EPOCH_US_2001 = 978307200e6
"""Inspector timestamps below this are no wall-clock time (a steady clock): not a run's time."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadContext:
    """What the command line adds to every input."""

    cluster: str | None = None
    """``--cluster``: wins over the records' own cluster."""
    time: datetime | None = None
    """``--time``: the run time of runs whose records carry none."""


@dataclass(slots=True, kw_only=True)
class Source:
    """One input's rows and what ingest says about it."""

    path: str
    sha256: str
    kind: str
    rows: Rows = field(default_factory=Rows)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Damaged lines left out, ``file:line: what was wrong``."""


def finish_run(info: RunInfo, ctx: ReadContext, mtime: float, source: Source) -> RunInfo:
    """Fill what the input did not say: run time (``--time``, else the file's mtime, said once in the notes),
    cluster (``--cluster`` wins), source columns."""
    if info.get("run_time") is None:
        if ctx.time is not None:
            info["run_time"], info["run_time_source"] = ctx.time, "option"
        else:
            info["run_time"] = datetime.fromtimestamp(mtime, timezone.utc)
            info["run_time_source"] = "mtime"
            note = "no timestamp in the records: the run time is the file's modification time " \
                   f"({info['run_time'].isoformat(timespec='seconds')}); --time sets it"
            if note not in source.notes:
                source.notes.append(note)
    if ctx.cluster is not None:
        info["cluster"] = ctx.cluster
    info["kind"], info["source"], info["source_sha256"] = source.kind, source.path, source.sha256
    return info


def detect_kind(data: bytes, text: Callable[[], str]) -> str:
    """The kind of a file's bytes (:data:`collscope.observe.schema.SOURCE_KINDS`), or ParseError."""
    head = data[:65536].lstrip()
    if looks_like_inspector_lines(head):
        return "inspector-lines"
    if looks_like_inspector_json(head):
        return "inspector-json"
    first = head.split(b"\n", 1)[0]
    if first.startswith(b"{") and b'"engine"' in first and b'"busbw_gbps"' in first:
        return "records"
    if head.startswith(b"{"):
        if b'"results"' in head and (b'"config"' in head or b'"nccl_version"' in head):
            return "nccl-tests"
        if b'"suspects"' in head and b'"tests"' in head:
            return "locate"
        if b'"summary"' in head and b'"collectives"' in head:
            return "trace"
    if looks_like_nccl_tests(text()):
        return "nccl-tests"
    return "unknown"


def read_file(path: str, data: bytes, sha256: str, mtime: float, ctx: ReadContext) -> Source:
    """The rows of one input file, or ParseError naming it (and the line) when it is none of the known kinds
    or is damaged."""
    decoded: list[str] = []

    def text() -> str:
        if not decoded:
            decoded.append(decode_text(data, path, EXPECTED_INPUT))
        return decoded[0]

    kind = detect_kind(data, text)
    if kind == "unknown":
        raise ParseError(path, None, EXPECTED_INPUT)
    source = Source(path=path, sha256=sha256, kind="inspector" if kind.startswith("inspector") else kind)
    if kind == "records":
        _read_records(data, source, ctx, mtime)
    elif kind == "nccl-tests":
        _read_nccl_tests(text(), source, ctx, mtime)
    elif kind == "locate":
        _read_locate(data, source, ctx, mtime)
    elif kind == "trace":
        _read_trace(data, source, ctx, mtime)
    else:
        _read_inspector(data, source, ctx, mtime, lines=kind == "inspector-lines")
    return source


# ---- JSON lines: damaged lines are left out and reported ------------------------------------------------------
T = TypeVar("T")


def _skipping_damaged(data: bytes, source: Source, parse: Callable[[bytes], T]) -> T:
    """``parse(data)``; each ParseError that names a line blanks that line (numbers kept) and parses again."""
    lines: list[bytes] | None = None
    while True:
        try:
            return parse(data if lines is None else b"\n".join(lines) + b"\n")
        except ParseError as exc:
            if exc.line is None or len(source.problems) >= MAX_SKIPPED_LINES:
                raise
            lines = data.split(b"\n") if lines is None else lines
            if exc.line > len(lines) or not lines[exc.line - 1].strip():
                raise
            lines[exc.line - 1] = b""
            source.problems.append(f"{exc} (line left out, the rest ingested)")


def _read_records(data: bytes, source: Source, ctx: ReadContext, mtime: float) -> None:
    records = _skipping_damaged(data, source, lambda d: decode_records(d, source.path))
    groups: dict[tuple[Any, ...], list[Measurement]] = {}
    for r in records:  # a run: one point / configuration / node set of the file
        groups.setdefault((r.point_id, r.sweep_id, r.op, r.settings, r.hosts, r.nranks, r.nnodes), []).append(r)
    for i, group in enumerate(groups.values()):
        info = measurement_run(group)
        info["run_id"] = run_id_of(source.sha256, i)
        source.rows.add_run(finish_run(info, ctx, mtime, source), measurement_columns(group))


def _read_nccl_tests(text: str, source: Source, ctx: ReadContext, mtime: float) -> None:
    runs = parse_nccl_tests_runs(text, source=source.path)
    logged = logged_provenance(text)
    slurm = _slurm_of_json_env(text) if text.lstrip().startswith("{") else {}
    for i, run in enumerate(runs):
        if not run.records:
            continue
        info = measurement_run(run.records)
        info.update({k: v for k, v in logged.items() if k != "nccl_version" or not info.get("nccl_version")})
        info.update(slurm)
        if not info.get("engine_version") and run.nccl_tests_version:
            info["engine_version"] = run.nccl_tests_version
        if not info.get("hosts"):
            info["hosts"] = list(run.hosts)
        info["run_id"] = run_id_of(source.sha256, i)
        source.rows.add_run(finish_run(info, ctx, mtime, source), measurement_columns(run.records))
        source.notes.extend(f"run {i + 1}: {e}" for e in run.errors)


def _slurm_of_json_env(text: str) -> dict[str, str]:
    """``slurm_job_id``/``slurm_step_id`` from an -J document's ``env`` list (``"SLURM_JOB_ID=123"``)."""
    try:
        env = json.loads(text).get("env") or []
    except (ValueError, AttributeError, RecursionError):
        return {}
    found = {}
    for item in env if isinstance(env, list) else []:
        name, _, value = str(item).partition("=")
        if name in ("SLURM_JOB_ID", "SLURM_STEP_ID") and value:
            found[name.lower()] = value
    return found


# ---- locate --json and trace --json -----------------------------------------------------------------------------
class _LocateTest(msgspec.Struct):
    kind: str
    nodes: list[str]
    status: str
    busbw_gbps: float | None = None
    time_us: float | None = None
    rail: int | None = None
    round: int | None = None
    repeats: int | None = None
    point_id: str | None = None


class _LocateDoc(msgspec.Struct):
    engine: str
    size_bytes: int
    tests: list[_LocateTest]
    nodes: list[str] = []


class _TraceRow(msgspec.Struct):
    op: str
    size_bytes: int
    calls: int
    total_us: float
    busbw_gbps: float | None = None
    nranks: int | None = None
    nnodes: int | None = None
    goodput_ratio: float | None = None
    bench_busbw_gbps: float | None = None
    ran: str | None = None


class _TraceDoc(msgspec.Struct):
    summary: list[_TraceRow]
    backend: str = "nccl"
    world_size: int | None = None


def _doc(data: bytes, source: Source, kind: type[T], what: str) -> T:
    doc = load_json(data, source.path, what)
    try:
        return msgspec.convert(doc, type=kind)
    except msgspec.ValidationError as exc:
        raise ParseError(source.path, None, what, found=str(exc)) from None


def _read_locate(data: bytes, source: Source, ctx: ReadContext, mtime: float) -> None:
    doc = _doc(data, source, _LocateDoc, "'collscope locate --json' output (DESIGN.md)")
    for i, test in enumerate(doc.tests):  # a test is a run of its own: its own node set
        if test.busbw_gbps is None or not test.time_us or test.time_us <= 0:
            continue
        info = RunInfo(engine=doc.engine, backend=None, hosts=list(test.nodes), point_id=test.point_id,
                       settings_text="default", settings=[], run_id=run_id_of(source.sha256, i))
        tags = [("test_kind", test.kind), ("status", test.status)]
        tags += [(k, str(v)) for k, v in (("rail", test.rail), ("round", test.round), ("repeats", test.repeats))
                 if v is not None]
        source.rows.add_run(finish_run(info, ctx, mtime, source), {
            "op": ["all_reduce"], "size_bytes": [doc.size_bytes], "nnodes": [len(test.nodes)],
            "time_us": [test.time_us], "algbw_gbps": [algbw_gbps(doc.size_bytes, test.time_us)],
            "busbw_gbps": [test.busbw_gbps], "ok": [test.status == "ok"], "repeat": [0], "tags": [tags]})


def _read_trace(data: bytes, source: Source, ctx: ReadContext, mtime: float) -> None:
    doc = _doc(data, source, _TraceDoc, "'collscope trace --json' output (DESIGN.md)")
    rows = [r for r in doc.summary if r.op in OP_FACTS and r.calls > 0 and r.total_us > 0]
    if not rows:
        return
    info = RunInfo(engine="job-trace", backend=doc.backend, settings_text="default", settings=[], hosts=[],
                   run_id=run_id_of(source.sha256, 0))
    time_us = [r.total_us / r.calls for r in rows]
    algbw = [algbw_gbps(r.size_bytes, t) for r, t in zip(rows, time_us, strict=True)]
    source.rows.add_run(finish_run(info, ctx, mtime, source), {
        "op": [r.op for r in rows], "size_bytes": [r.size_bytes for r in rows],
        "nranks": [r.nranks for r in rows], "nnodes": [r.nnodes for r in rows], "time_us": time_us,
        "algbw_gbps": algbw, "busbw_gbps": [r.busbw_gbps for r in rows], "ok": [True] * len(rows),
        "repeat": [0] * len(rows),
        "tags": [[(k, str(v)) for k, v in (("calls", r.calls), ("goodput_ratio", r.goodput_ratio),
                                           ("bench_busbw_gbps", r.bench_busbw_gbps), ("ran", r.ran))
                  if v is not None]
                 for r in rows]})


# ---- NCCL Inspector -------------------------------------------------------------------------------------------
class _Meta(msgspec.Struct):
    git_rev: str | None = None


class _MetaLine(msgspec.Struct):
    metadata: _Meta | None = None


def _read_inspector(data: bytes, source: Source, ctx: ReadContext, mtime: float, *, lines: bool) -> None:
    if lines:
        traces = _skipping_damaged(data, source, lambda d: parse_inspector_lines(d, source.path))
    else:
        traces = parse_inspector_json(data, source.path)
    git = None
    if lines:
        try:
            meta = msgspec.json.decode(data.split(b"\n", 1)[0], type=_MetaLine).metadata
            git = meta.git_rev if meta is not None and meta.git_rev else None
        except (msgspec.DecodeError, msgspec.ValidationError):
            git = None
    for trace in traces:
        said = [w.removeprefix(f"{source.path}: ") for w in trace.warnings]
        source.notes.extend(w for w in said if w not in source.notes)
    by_comm: dict[str, list[tuple[RankTrace, Any]]] = {}
    for trace in traces:
        for call in trace.calls:
            by_comm.setdefault(call.process_group or "", []).append((trace, call))
    for comm, pairs in by_comm.items():
        calls = [c for _, c in pairs if c.size_bytes is not None and c.duration_us and c.duration_us > 0]
        if not calls:
            continue
        hosts = sorted({t.host for t, _ in pairs if t.host})
        starts = [c.start_us for c in calls if c.start_us > _EPOCH_US_2001]
        info = RunInfo(engine="nccl-inspector", backend="nccl", hosts=hosts, nccl_git=git, settings_text="default",
                       settings=[], run_id=run_id_of(source.sha256, comm))
        if starts:
            info["run_time"] = datetime.fromtimestamp(min(starts) / 1e6, timezone.utc)
            info["run_time_source"] = "record"
        algbw = [algbw_gbps(c.size_bytes, c.duration_us) for c in calls]
        busbw = [a * busbw_factor(c.op, c.group_size or 1) for a, c in zip(algbw, calls, strict=True)]
        source.rows.add_run(finish_run(info, ctx, mtime, source), {
            "op": [c.op for c in calls], "size_bytes": [c.size_bytes for c in calls],
            "nranks": [c.group_size for c in calls], "nnodes": [c.group_nnodes for c in calls],
            "time_us": [c.duration_us for c in calls], "algbw_gbps": algbw, "busbw_gbps": busbw,
            "ok": [True] * len(calls), "repeat": [0] * len(calls),
            "tags": [[("comm_id", comm), ("rank", str(c.rank)),
                      *((k, v) for k, v in (("algorithm", c.algorithm), ("protocol", c.protocol)) if v)]
                     for c in calls]})
