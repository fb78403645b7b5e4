"""Load measurements into one pandas DataFrame: results directories, JSONL files and nccl-tests outputs.

One row per Measurement record. Columns, in this order:

* every Measurement field except ``settings`` and ``hosts`` (see ``collectives/record.py``), then
  ``hosts`` joined with ``","``; ``environment`` (what the ranks inherited, never part of ``config``) as sorted
  ``K=V`` joined by ``;``, NA when not recorded;
* ``config``: the canonical name of the configuration, the tuning settings as sorted ``K=V`` joined by ``;``
  (``"default"`` when none); see :func:`is_tuning_variable` for which variables count;
* ``applied``: ``points/<id>.check.json``'s verdict on the forced settings (True / False / NA), NA outside
  results directories;
* ``failure``: the latest unresolved failure reason of the record's point (``failures.jsonl``), else NA;
* ``input``: the path the record was read from, as the caller named it (a results directory, a JSONL file, an
  nccl-tests output). It is part of a configuration's identity (:data:`~.fit.CONFIG_KEYS`): records of one
  configuration from two inputs (a sweep and a check run, two sweeps) are analysed side by side, never pooled
  as repeats of one configuration (the record's own ``source`` says which program wrote it, not where it was
  read from); ``frame.attrs["node_tests"]`` lists the inputs that are ``collscope locate`` directories, whose
  tests compare nodes by design (:mod:`.placement` does not warn about them);
* one column per tuning variable present in any record (``NCCL_ALGO``, ``OMPI_MCA_coll_tuned_allreduce_algorithm``,
  ...), NA where the record did not set it.

String columns are pandas categoricals (few distinct values, fast grouping); ``count``, ``root``, ``nnodes``,
``wrong``, ``iters`` and ``warmup`` are nullable ``Int64``; ``applied`` is nullable ``boolean``. Failed points
without records (a timeout, say) have no rows: they are listed in ``frame.attrs["failures"]`` as dicts
``{point_id, op, config, reason, detail, source}``, the analysis reports them.

Speed: JSONL is decoded by :mod:`collscope.results.decode` straight into Measurements (msgspec, strict types:
a wrong type is a ParseError naming file, line and field), columns are built with C-level iteration
(:mod:`.record_columns`; the frame: :mod:`.load_frame`), and the settings of a point are turned into ``config``
and knob columns once per distinct value (run-length encoding: records of one point are adjacent), never per row.
A results directory of :data:`~.points_cache.CACHE_MIN_RECORDS` records or more is read through the Parquet cache
of its points (:mod:`.points_cache`): only point files whose identity changed are decoded again, the rest come into
pandas through Arrow; ``frame.attrs["points_cache"]`` says, per directory, what came from the cache. Secrets' values
(:func:`collscope.vocab.secrets.is_secret_name`) are ``REDACTED`` in ``config``, the knob columns and
``environment``, whatever the records hold (records written before collscope redacted them), so nothing that
prints the frame (analyze, report, recommend) shows one.
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from collscope.analysis.job_geometry import Clue, apply_overrides, frame_clues, group_geometries, run_clues
from collscope.analysis.load_frame import frame_of
from collscope.analysis.machines import one_machine
from collscope.analysis.points_cache import (
    CACHE_MIN_RECORDS,
    CachedPoints,
    FileKey,
    file_key,
    read_cache,
    take,
    write_cache,
)
from collscope.analysis.record_columns import (
    FIELDS,
    RecordColumns,
    concat,
    from_records,
)
from collscope.collectives.nccl_tests.parse import looks_like_nccl_tests
from collscope.collectives.nccl_tests.reading import text_cap
from collscope.collectives.nccl_tests.runs import parse_nccl_tests_runs
from collscope.collectives.record import Measurement
from collscope.errors import ParseError
from collscope.files import decode_text, read_input_bytes
from collscope.results.decode import decode_records, read_bytes
from collscope.results.points import DamagedPointsError, not_its_records, read_point_file
from collscope.results.store import ResultsDir
from collscope.vocab.configs import (
    DEFAULT_CONFIG,
    NON_TUNING_PREFIXES,
    NON_TUNING_VARIABLES,
    RAIL_KEY,
    config_of,
    is_tuning_variable,
    rail_of,
)

__all__ = ["load_results", "config_of", "is_tuning_variable", "NON_TUNING_VARIABLES", "NON_TUNING_PREFIXES",
           "RECORD_COLUMNS", "DEFAULT_CONFIG"]

_FIELDS: tuple[str, ...] = FIELDS
RECORD_COLUMNS = tuple(f for f in _FIELDS if f != "settings")
"""Measurement fields that become columns (``hosts`` joined by ``","``)."""


# ---- reading sources into row lists ------------------------------------------------------------------------
@dataclasses.dataclass
class _Part:
    """Rows of one file, and what the results directory says about their point."""

    rows: Sequence[Any]
    point_id: str | None = None
    applied: bool | None = None
    failure: str | None = None
    label: str = ""
    """The input as the user named it (a file, or a results directory for its points): geometry evidence says it."""
    clues: list[Clue] | None = None
    """Geometry evidence of an nccl-tests output (:func:`.job_geometry.run_clues`); None: read from the records."""
    notes: tuple[str, ...] = ()
    """What the reader of an nccl-tests output said of it (an incomplete run, sizes it rescaled, two runs pasted
    together), prefixed with the file: ``analyze``, ``recommend`` and ``report`` carry them as notes."""
    config: str | None = None
    """The configuration name of every row, when the input says what they measured otherwise than by settings (a
    ``collscope locate`` test: :func:`_locate_config`); None: from the records' settings and rail."""


_EXPECTED_FILE = "Measurement JSONL or nccl-tests output (UTF-8 text)"


def _load_file(path: Path, op: str | None, nranks: int | None) -> list[_Part]:
    if path.suffix == ".jsonl":
        return [_Part(decode_records(read_input_bytes(path, _EXPECTED_FILE), str(path)), label=str(path))]
    cap, why = text_cap()
    data = read_input_bytes(path, _EXPECTED_FILE, max_bytes=cap, why_capped=why)
    text = decode_text(data, str(path), _EXPECTED_FILE)
    if looks_like_nccl_tests(text):
        runs = parse_nccl_tests_runs(text, source=str(path), op=op, nranks=nranks)  # several pasted: each
        return [_Part(run.records, failure=run.errors[0] if run.errors else None, label=str(path),
                      clues=run_clues(run, str(path)), notes=tuple(f"{path}: {w}" for w in run.warnings))
                for run in runs]
    if text.lstrip().startswith("{"):
        return [_Part(decode_records(data, str(path)), label=str(path))]
    raise ParseError(str(path), None, "a sweep results directory, Measurement JSONL or nccl-tests output")


def _check_verdict(path: str) -> bool | None:
    try:
        doc = msgspec.json.decode(read_bytes(path, "the JSON check file written by collscope sweep run"))
    except (msgspec.DecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise ParseError(path, None, "the JSON check file written by collscope sweep run", found=str(exc)) from None
    value = doc.get("applied") if isinstance(doc, dict) else None
    return value if isinstance(value, bool) else None


def _load_results_dir(root: Path) -> tuple[list[_Part], list[dict[str, Any]], RecordColumns, str, str]:
    """The records of every finished point of ``root``, and its failed points without records.

    Damaged points (a ``points/*.jsonl`` that is empty, undecodable, cut mid-line or not a regular file) stop
    the load with one :class:`~collscope.results.points.DamagedPointsError` naming every damaged file: nothing
    is analysed from a directory that lost measurements without saying so, and nothing is dropped silently.
    """
    results = ResultsDir(root)
    meta = results.read_sweep()
    results.check_layout()
    failures = results.failures()
    parts: list[_Part] = []
    points_dir = str(results.points_dir)
    try:
        names = os.listdir(points_dir)
    except OSError as exc:
        raise ParseError(points_dir, None, "a readable points/ directory", found=exc.strerror or str(exc)) from None
    checks = {n for n in names if n.endswith(".check.json")}
    files = sorted(n for n in names if n.endswith(".jsonl") and not n.endswith(".partial.jsonl")
                   and not n.startswith("."))
    damaged: list[ParseError] = []
    tests = {p.point_id: p for p in meta.plan.points} if meta.kind == "locate" else {}
    sweep_key = file_key(str(results.sweep_json))
    cache = None if tests else read_cache(root)  # a locate test's configuration is read from its records
    reusable = {n: i for i, n in enumerate(cache.names)} if cache is not None and cache.sweep_key == sweep_key else {}
    origin: list[int] = []  # per part: its index in the cache, or -1 - its index among the files decoded again
    fresh: list[_Part] = []
    keys: list[FileKey] = []
    check_keys: list[tuple[FileKey | None, bool | None]] = []
    for name in files:
        point_id = name[: -len(".jsonl")]
        path = os.path.join(points_dir, name)
        check = f"{point_id}.check.json"
        check_path = os.path.join(points_dir, check)
        key = file_key(path)
        check_key = file_key(check_path) if check in checks else None
        failure = failures.get(point_id)
        reason = None if failure is None else failure.reason
        at = reusable.get(name, -1)
        if cache is not None and at >= 0 and key is not None and cache.keys[at] == key:
            cached_check, applied = cache.checks[at]
            if cached_check != check_key:
                applied = _check_verdict(check_path) if check in checks else None
            parts.append(_Part((), point_id, applied, reason, str(root)))
            origin.append(at)
        else:
            try:
                records = read_point_file(path)
            except ParseError as exc:
                damaged.append(exc)
                continue
            foreign = not_its_records(path, records, results.planned(point_id))  # another point's records
            if foreign is not None:
                damaged.append(foreign)
                continue
            applied = _check_verdict(check_path) if check in checks else None
            part = _Part(records, point_id, applied, reason, str(root),
                         config=_locate_config(tests.get(point_id), records) if tests else None)
            parts.append(part)
            origin.append(-1 - len(fresh))
            fresh.append(part)
        keys.append(key if key is not None else (0, -1, 0))
        check_keys.append((check_key, applied))
    if damaged:
        raise DamagedPointsError(str(root), damaged)
    columns, note = _dir_columns(root, cache, origin, fresh, CachedPoints(sweep_key, files, keys, check_keys,
                                                                           RecordColumns(np.empty(0, np.int32))),
                                 write=not tests)
    seen = {name[: -len(".jsonl")] for name in files}
    planned = {p.point_id: p for p in meta.plan.points}
    lost = []
    for point_id, entry in sorted(failures.items()):
        if point_id in seen:
            continue
        plan = planned.get(point_id)
        lost.append({"point_id": point_id, "op": None if plan is None else plan.op,
                     "config": (_locate_config(plan, []) if meta.kind == "locate" and plan is not None else
                                config_of(dict(plan.settings) if plan is not None else {})),
                     "reason": entry.reason, "detail": entry.detail, "source": str(root)})
    return parts, lost, columns, meta.kind, note


def _decoded(parts: Sequence[_Part], sources: Sequence[Path]) -> RecordColumns:
    """The columns of decoded parts; ParseError naming ``sources`` when a value is not of its field's type."""
    try:
        return from_records([p.rows for p in parts], [p.point_id for p in parts])
    except (ValueError, TypeError) as exc:
        raise ParseError(", ".join(str(p) for p in sources), None, "Measurement records with valid field types",
                         found=str(exc)) from exc


def _dir_columns(root: Path, cache: CachedPoints | None, origin: list[int], fresh: list[_Part],
                 now: CachedPoints, *, write: bool) -> tuple[RecordColumns, str]:
    """The columns of a results directory's parts (``origin``: per part, its index in ``cache`` or ``-1 - i`` for
    ``fresh[i]``, decoded again), and the cache rewritten when anything changed (``now``: the manifest of today's
    files, its columns filled here). The note says what the cache did."""
    reused = [i for i in origin if i >= 0]
    decoded = _decoded(fresh, [root]) if fresh else None
    if cache is not None and not fresh and reused == list(range(len(cache.names))) and now.names == cache.names \
            and now.checks == cache.checks and now.sweep_key == cache.sweep_key:
        return cache.columns, f"{len(reused)} point files from the cache"
    pieces = ([take(cache.columns, reused)] if cache is not None and reused else []) + \
        ([decoded] if decoded is not None else [])
    if not pieces:
        return _decoded([], [root]), "no point files"
    joined = concat(pieces)
    rank = {i: position for position, i in enumerate(reused)}
    order = [rank[i] if i >= 0 else len(reused) + (-1 - i) for i in origin]
    columns = joined if order == list(range(len(order))) else take(joined, order)
    note = f"{len(reused)} point files from the cache, {len(fresh)} decoded"
    if write and (cache is not None or len(columns) >= CACHE_MIN_RECORDS):
        now.columns = columns
        why = write_cache(root, now)
        note += "; cache written" if why is None else f"; cache {why}"
    return columns, note


def _locate_config(plan: Any, records: Sequence[Measurement]) -> str | None:
    """What a ``collscope locate`` test measured, as its configuration's name: its kind and nodes, then its rail
    (``pair node1,node2;rail=cl1``; none for a test on every rail): tests of other nodes or rails are never
    pooled as repeats of one configuration, rail tests never with all-rail tests. None: not a planned test."""
    if plan is None or not plan.kind:
        return None
    rail = next((r.rail or rail_of(r.settings) for r in records if r.rail or rail_of(r.settings)), None)
    if rail is None and plan.rail is not None:
        rail = f"#{plan.rail}"
    name = f"{plan.kind} {','.join(plan.nodes)}".strip()
    return f"{name};{RAIL_KEY}={rail}" if rail is not None else name


def _as_paths(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    if isinstance(paths, (str, Path)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def load_results(paths: str | Path | Iterable[str | Path], *, op: str | None = None, nranks: int | None = None,
                 nnodes: int | None = None, nvl_domain: int | None = None) -> pd.DataFrame:
    """One DataFrame of every record in ``paths``: results directories (``sweep.json`` + ``points/*.jsonl``;
    ``*.partial.jsonl`` never counts), Measurement JSONL files, nccl-tests outputs (text or ``-J`` JSON).

    ``op`` and ``nranks`` are for nccl-tests outputs that do not tell them (a table without its header), as
    ``collscope ingest --op/--nranks``; an output that names another op is an error.

    Geometry: ``frame.attrs["geometry"]`` holds one :class:`~.job_geometry.GroupGeometry` per ``(nranks,
    nnodes)`` group, each field with its evidence (:mod:`.job_geometry`). ``nranks``, ``nnodes`` and
    ``nvl_domain`` override what the inputs say (the override wins, a note names the clue it overrode); they
    describe one job, so inputs with several rank or node counts refuse them (ConfigError). Unknown nodes stay
    NA in the ``nnodes`` column, never one node.

    Raises ParseError naming the file (and line) that is none of these, or that is damaged. A results directory
    is read strictly (``sweep.json``, ``failures.jsonl``: see :mod:`collscope.results.schema`); a damaged point
    file (empty, undecodable, not a regular file) is never skipped: one
    :class:`~collscope.results.points.DamagedPointsError` names every damaged file of the directory, one line
    each, and nothing is loaded from it (``collscope sweep run`` with the same spec moves them aside and measures
    those points again). ``analyze``, ``recommend`` and ``report`` all read through here, so all three exit 2.
    """
    sources = _as_paths(paths)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a million fresh records hold no reference cycles; collections would only cost time
    try:
        return _load(sources, op, {"nranks": nranks, "nnodes": nnodes, "nvl_domain": nvl_domain})
    finally:
        if gc_was_enabled:
            gc.enable()


def _load(sources: list[Path], op: str | None, overrides: dict[str, int | None]) -> pd.DataFrame:
    nranks = overrides["nranks"]
    parts: list[_Part] = []
    pieces: list[RecordColumns] = []
    pending: list[_Part] = []  # parts of files, decoded into columns together
    lost: list[dict[str, Any]] = []
    node_tests: list[str] = []
    cache_notes: dict[str, str] = {}
    if not sources:
        raise ParseError("<no paths>", None, "at least one results directory or file")

    def flush() -> None:
        if pending:
            pieces.append(_decoded(pending, sources))
            pending.clear()

    for path in sources:
        if path.is_dir():
            if not os.path.lexists(path / "sweep.json"):
                raise ParseError(str(path), None, "a sweep results directory (sweep.json missing)")
            flush()
            dir_parts, dir_lost, columns, kind, note = _load_results_dir(path)
            parts.extend(dir_parts)
            pieces.append(columns)
            lost.extend(dir_lost)
            cache_notes[str(path)] = note
            if kind == "locate":  # tests of nodes, by design (analysis.placement)
                node_tests.append(str(path))
        elif path.exists():
            file_parts = _load_file(path, op, nranks)
            parts.extend(file_parts)
            pending.extend(file_parts)
        else:
            raise ParseError(str(path), None, "an existing results directory or file")
    flush()
    columns = concat(pieces)
    try:
        frame = frame_of(columns, configs=[p.config for p in parts], applied=[p.applied for p in parts],
                         failures=[p.failure for p in parts], labels=[p.label for p in parts])
    except (ValueError, TypeError) as exc:
        raise ParseError(", ".join(str(p) for p in sources), None, "Measurement records with valid field types",
                         found=str(exc)) from exc
    frame.attrs["points_cache"] = cache_notes
    frame.attrs["notes"] = list(dict.fromkeys(note for p in parts for note in p.notes))
    frame.attrs["failures"] = lost
    frame.attrs["node_tests"] = node_tests
    counts = np.bincount(columns.part, minlength=len(parts)).tolist()
    clues = frame_clues(frame, [(n, p.label, p.clues) for n, p in zip(counts, parts, strict=True)])
    apply_overrides(frame, overrides["nranks"], overrides["nnodes"])
    frame.attrs["geometry"] = group_geometries(clues, overrides)
    one_machine(frame, sources)
    return frame
