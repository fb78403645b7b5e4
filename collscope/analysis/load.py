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
a wrong type is a ParseError naming file, line and field), columns are built with C-level iteration,
and the settings of a point are turned into ``config`` and knob columns once per distinct value (run-length
encoding: records of one point are adjacent), never per row. Secrets' values
(:func:`collscope.vocab.secrets.is_secret_name`) are ``REDACTED`` in ``config``, the knob columns and
``environment``, whatever the records hold (records written before collscope redacted them), so nothing that
prints the frame (analyze, report, recommend) shows one.
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from collscope.analysis.job_geometry import Clue, apply_overrides, frame_clues, group_geometries, run_clues
from collscope.analysis.machines import one_machine
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
from collscope.vocab.secrets import redact_env

__all__ = ["load_results", "config_of", "is_tuning_variable", "NON_TUNING_VARIABLES", "NON_TUNING_PREFIXES",
           "RECORD_COLUMNS", "DEFAULT_CONFIG"]

_FIELDS: tuple[str, ...] = Measurement.__struct_fields__
RECORD_COLUMNS = tuple(f for f in _FIELDS if f != "settings")
"""Measurement fields that become columns (``hosts`` joined by ``","``)."""
_FLOAT = ("time_us", "algbw_gbps", "busbw_gbps", "error")
_INT = ("size_bytes", "nranks", "repeat")
_NULLABLE_INT = ("count", "root", "nnodes", "wrong", "iters", "warmup")
_BOOL = ("in_place", "ok")
_TYPED: dict[str, Any] = {"size_bytes": np.int64, "nranks": np.int64, "repeat": np.int64, "time_us": np.float64,
                          "algbw_gbps": np.float64, "busbw_gbps": np.float64, "in_place": np.bool_, "ok": np.bool_}


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
                      clues=run_clues(run, str(path))) for run in runs]
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


def _load_results_dir(root: Path) -> tuple[list[_Part], list[dict[str, Any]]]:
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
    for name in files:
        point_id = name[: -len(".jsonl")]
        path = os.path.join(points_dir, name)
        try:
            records = read_point_file(path)
        except ParseError as exc:
            damaged.append(exc)
            continue
        foreign = not_its_records(path, records, results.planned(point_id))  # another point's records
        if foreign is not None:
            damaged.append(foreign)
            continue
        check = f"{point_id}.check.json"
        applied = _check_verdict(os.path.join(points_dir, check)) if check in checks else None
        failure = failures.get(point_id)
        parts.append(_Part(records, point_id, applied, None if failure is None else failure.reason, str(root),
                           config=_locate_config(tests.get(point_id), records) if tests else None))
    if damaged:
        raise DamagedPointsError(str(root), damaged)
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
    return parts, lost


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


# ---- columns -------------------------------------------------------------------------------------------------
def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of each run of equal adjacent values."""
    n = len(values)
    change = np.empty(n, dtype=bool)
    if n:
        change[0] = True
        np.not_equal(values[1:], values[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    return starts, np.diff(np.append(starts, n))


def _encode(values: np.ndarray, canon: Callable[[Any], Any] | None = None) -> tuple[np.ndarray, list[Any]]:
    """Codes (-1 for None) and distinct values, in order of appearance; ``canon`` maps a run's value to a
    hashable key first (Python work per run, not per row)."""
    starts, lengths = _runs(values)
    heads = values[starts]
    if canon is not None:
        keyed = np.empty(len(heads), dtype=object)
        keyed[:] = [None if v is None else canon(v) for v in heads]
        heads = keyed
    codes, uniques = pd.factorize(heads, use_na_sentinel=True)
    return np.repeat(codes.astype(np.int32), lengths), list(uniques)


def _from_codes(codes: Any, categories: Sequence[Any]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(categories)), validate=False)


def _categorical(codes: np.ndarray, uniques: Sequence[Any]) -> pd.Categorical:
    cats = [str(u) for u in uniques]
    if len(set(cats)) != len(cats):  # distinct objects with the same text (e.g. 1 and "1")
        merged, cat_index = pd.factorize(np.asarray(cats, dtype=object))
        lookup = np.append(merged, -1).astype(np.int32)
        return _from_codes(lookup[codes], list(cat_index))
    return _from_codes(codes, cats)


def _settings_items(value: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(redact_env(value).items()))


def _hosts_text(value: tuple[str, ...]) -> str:
    return ",".join(value)


def _environment_text(value: Mapping[str, str]) -> str:
    return ";".join(f"{k}={v}" for k, v in sorted(redact_env(value).items()))


def _column(name: str, values: np.ndarray) -> Any:
    if name in _FLOAT or name in _INT or name in _NULLABLE_INT:
        missing = pd.isna(values)
        has_missing = bool(missing.any())
        if name in _FLOAT:
            return (np.where(missing, np.nan, values) if has_missing else values).astype(np.float64)
        ints = (np.where(missing, 0, values) if has_missing else values).astype(np.int64)
        if name in _INT:
            if has_missing:
                raise ValueError(f"{name} is null")
            return ints
        return pd.arrays.IntegerArray(ints, missing.astype(bool))
    if name in _BOOL:
        return values.astype(bool)
    codes, uniques = _encode(values, _hosts_text if name == "hosts" else
                             _environment_text if name == "environment" else None)
    return _categorical(codes, uniques)


def _frame(parts: list[_Part]) -> pd.DataFrame:
    counts = np.array([len(p.rows) for p in parts], dtype=np.int64)
    rows: list[Any] = []
    for part in parts:
        rows.extend(part.rows)
    n = len(rows)
    columns: dict[str, Any] = {}
    settings = np.empty(0, dtype=object)
    for name in _FIELDS:
        if name in _TYPED:
            try:
                columns[name] = np.fromiter(map(attrgetter(name), rows), dtype=_TYPED[name], count=n)
                continue
            except (TypeError, ValueError):  # a None, or a value of another type: the general path says which
                pass
        values = np.fromiter(map(attrgetter(name), rows), dtype=object, count=n)
        if name == "settings":
            settings = values
            continue
        if name == "point_id":
            fill = np.repeat(np.array([p.point_id for p in parts], dtype=object), counts)
            values = np.where(pd.isna(values), fill, values)
        columns[name] = _column(name, values)

    codes, distinct = _encode(settings, _settings_items)
    columns["config"] = _config_column(codes, distinct, columns["rail"], [p.config for p in parts], counts)

    verdicts = [p.applied for p in parts]
    columns["applied"] = pd.arrays.BooleanArray(
        np.repeat(np.array([v is True for v in verdicts], dtype=bool), counts),
        np.repeat(np.array([v is None for v in verdicts], dtype=bool), counts))
    fcodes, funiq = _encode(np.repeat(np.array([p.failure for p in parts], dtype=object), counts))
    columns["failure"] = _categorical(fcodes, funiq)
    icodes, iuniq = _encode(np.repeat(np.array([p.label for p in parts], dtype=object), counts))
    columns["input"] = _categorical(icodes, iuniq)

    knobs = sorted({k for s in distinct for k, _ in s if is_tuning_variable(k)})
    for knob in knobs:
        per_settings = [dict(s).get(knob) for s in distinct] + [None]
        kcodes, kuniq = pd.factorize(np.asarray(per_settings, dtype=object), use_na_sentinel=True)
        columns[knob] = _categorical(kcodes.astype(np.int32)[codes], list(kuniq))
    return pd.DataFrame(columns)


def _config_column(codes: np.ndarray, distinct: Sequence[Any], rails: pd.Categorical,
                   given: list[str | None], counts: np.ndarray) -> pd.Categorical:
    """The ``config`` column: each record's settings and rail (the ``rail`` column) named once per distinct pair
    (:func:`collscope.vocab.configs.config_of`; code -1, no settings object, is the default's settings), or the
    name its input gave (``given``, one per part of ``counts`` rows: a locate test's, :func:`_locate_config`;
    None elsewhere). Records without a rail cost nothing more than their settings (1,000,000 records)."""
    if (rails.codes < 0).all():  # code -1 (no settings object) picks the last name below: the default
        pairs, names = codes, [config_of(dict(s)) for s in distinct]
    else:
        width = len(rails.categories) + 1
        pairs, distinct_pairs = pd.factorize(codes.astype(np.int64) * width + (rails.codes.astype(np.int64) + 1))
        names = []
        for pair in distinct_pairs.tolist():
            s, r = divmod(int(pair), width)
            names.append(config_of(dict(distinct[s]) if s >= 0 else {}, str(rails.categories[r - 1]) if r else None))
    if any(g is not None for g in given):
        per_row = np.asarray([*names, DEFAULT_CONFIG], dtype=object)[pairs]  # -1: the default
        per_part = np.repeat(np.array(given, dtype=object), counts)
        per_row = np.where(pd.isna(per_part), per_row, per_part)
        pairs, uniq = pd.factorize(per_row)
        names = [str(u) for u in uniq]
    config_codes, config_names = pd.factorize(np.asarray([*names, DEFAULT_CONFIG], dtype=object))
    return _from_codes(config_codes.astype(np.int32)[pairs], list(config_names))


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
    lost: list[dict[str, Any]] = []
    node_tests: list[str] = []
    if not sources:
        raise ParseError("<no paths>", None, "at least one results directory or file")
    for path in sources:
        if path.is_dir():
            if not os.path.lexists(path / "sweep.json"):
                raise ParseError(str(path), None, "a sweep results directory (sweep.json missing)")
            dir_parts, dir_lost = _load_results_dir(path)
            parts.extend(dir_parts)
            lost.extend(dir_lost)
            if ResultsDir(path).read_sweep().kind == "locate":  # tests of nodes, by design (analysis.placement)
                node_tests.append(str(path))
        elif path.exists():
            parts.extend(_load_file(path, op, nranks))
        else:
            raise ParseError(str(path), None, "an existing results directory or file")
    try:
        frame = _frame(parts)
    except (ValueError, TypeError) as exc:
        raise ParseError(", ".join(str(p) for p in sources), None, "Measurement records with valid field types",
                         found=str(exc)) from exc
    frame.attrs["failures"] = lost
    frame.attrs["node_tests"] = node_tests
    clues = frame_clues(frame, [(len(p.rows), p.label, p.clues) for p in parts])
    apply_overrides(frame, overrides["nranks"], overrides["nnodes"])
    frame.attrs["geometry"] = group_geometries(clues, overrides)
    one_machine(frame, sources)
    return frame
