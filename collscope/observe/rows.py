"""Rows of the store, built a run at a time: run-level values once per run, per-row values as lists (pure).

A reader (:mod:`collscope.observe.readers`) hands each run to :meth:`Rows.add_run` (the values every row of the
run shares: :attr:`~collscope.observe.schema.Column.run_level`) with the per-row columns as equal-length lists;
:meth:`Rows.table` makes one Arrow table of :data:`~collscope.observe.schema.RECORDS_SCHEMA` (``batch_id`` and
``ingested_at`` are the store's to fill). Measurement records go through :func:`measurement_columns`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from operator import attrgetter
from typing import Any

import numpy as np
import pyarrow as pa

from collscope.collectives.record import Measurement
from collscope.observe.schema import RECORD_COLUMNS, RECORDS_SCHEMA
from collscope.vocab.configs import config_of, is_tuning_variable
from collscope.vocab.secrets import redact_env

__all__ = ["Rows", "RunInfo", "measurement_columns", "settings_of", "run_id_of", "parse_time", "ROW_COLUMNS",
           "STORE_FILLED", "measurement_run"]

STORE_FILLED = ("batch_id", "ingested_at")
"""Columns the store fills when it writes a batch."""
ROW_COLUMNS: tuple[str, ...] = tuple(c.name for c in RECORD_COLUMNS if not c.run_level)
"""Columns that vary inside a run (a reader gives them as lists)."""
_RUN_COLUMNS: tuple[str, ...] = (*(c.name for c in RECORD_COLUMNS if c.run_level and c.name not in STORE_FILLED),
                                  "cluster")
"""Run-level columns a reader gives; ``cluster`` is the partition key (the store puts it in the path)."""

_MEASUREMENT_FIELDS = ("op", "size_bytes", "count", "dtype", "redop", "root", "in_place", "nranks", "nnodes",
                       "time_us", "algbw_gbps", "busbw_gbps", "wrong", "ok", "iters", "warmup", "repeat",
                       "time_over_ranks", "process_shape")
_GETTERS = {name: attrgetter(name) for name in _MEASUREMENT_FIELDS}


def run_id_of(sha256: str, index: int | str) -> str:
    """A run's id: 16 hex of sha256 over its source's content hash and its index there (stable across ingests)."""
    return hashlib.sha256(f"{sha256}:{index}".encode()).hexdigest()[:16]


_TIMES: dict[str, datetime | None] = {}


def parse_time(text: str | None) -> datetime | None:
    """An ISO 8601 time (``2026-12-01T02:00:00Z``, nccl-tests -J's ``2025-11-03 14:02:11``) as an aware UTC
    datetime; a time without a zone is taken as UTC; None for None or text that is no time."""
    if not text:
        return None
    if text in _TIMES:
        return _TIMES[text]
    try:
        stripped = text.strip()  # Python 3.10's fromisoformat reads no 'Z'
        value: datetime | None = datetime.fromisoformat(stripped[:-1] + "+00:00" if stripped.endswith(("Z", "z"))
                                                        else stripped)
    except ValueError:
        value = None
    if value is not None:
        value = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    if len(_TIMES) > 65536:
        _TIMES.clear()
    _TIMES[text] = value
    return value


_SETTINGS: dict[Any, tuple[str, list[tuple[str, str]]]] = {}


def settings_of(settings: Mapping[str, str]) -> tuple[str, list[tuple[str, str]]]:
    """(canonical text, map items) of a record's settings: the tuning variables only (as ``analyze`` names a
    configuration, :func:`collscope.vocab.configs.config_of`), secrets' values REDACTED."""
    try:
        key: Any = frozenset(settings.items())
        cached = _SETTINGS.get(key)
    except TypeError:
        key, cached = None, None
    if cached is not None:
        return cached
    tuning = redact_env({k: str(v) for k, v in sorted(settings.items()) if is_tuning_variable(k)})
    made = (config_of(tuning), sorted(tuning.items()))
    if key is not None:
        if len(_SETTINGS) > 4096:
            _SETTINGS.clear()
        _SETTINGS[key] = made
    return made


class RunInfo(dict[str, Any]):
    """The run-level values of one run (column name -> value); unknown ones are left out (null)."""


class Rows:
    """Column lists of many runs, then one Arrow table."""

    def __init__(self) -> None:
        self._run: dict[str, list[Any]] = {name: [] for name in _RUN_COLUMNS}
        """Run-level values, one per run (repeated over the run's rows only when the table is made)."""
        self._rows: dict[str, list[Any]] = {name: [] for name in ROW_COLUMNS}
        self._lengths: list[int] = []

    @property
    def runs(self) -> int:
        return len(self._lengths)

    def __len__(self) -> int:
        return len(self._rows["op"])

    def add_run(self, run: Mapping[str, Any], rows: Mapping[str, Sequence[Any]]) -> None:
        """One run: ``run`` holds run-level values (missing: null), ``rows`` per-row lists (missing: null)."""
        n = len(rows["op"])
        if not n:
            return
        unknown = (set(run) - set(_RUN_COLUMNS)) | (set(rows) - set(ROW_COLUMNS))
        if unknown:
            raise AssertionError(f"not store columns: {sorted(unknown)}")
        for name in _RUN_COLUMNS:
            self._run[name].append(run.get(name))
        for name in ROW_COLUMNS:
            values = rows.get(name)
            if values is None:
                self._rows[name].extend([None] * n)
            else:
                if len(values) != n:
                    raise AssertionError(f"column {name}: {len(values)} values for {n} rows")
                self._rows[name].extend(values)
        self._lengths.append(n)

    def extend(self, other: Rows) -> None:
        """Append the runs of ``other``."""
        for name, values in other._run.items():
            self._run[name].extend(values)
        for name, values in other._rows.items():
            self._rows[name].extend(values)
        self._lengths.extend(other._lengths)

    def table(self, batch_id: str, ingested_at: datetime) -> pa.Table:
        """The rows as :data:`RECORDS_SCHEMA` plus a last ``cluster`` column (the partition key, for the store).
        Run-level columns are made from one value per run and repeated by index (``take``), not per row."""
        n = len(self)
        repeat = pa.array(np.repeat(np.arange(self.runs, dtype=np.int64), self._lengths))
        arrays = []
        for field in RECORDS_SCHEMA:
            if field.name == "batch_id":
                arrays.append(pa.array([batch_id], field.type).take(pa.array(np.zeros(n, dtype=np.int64))))
            elif field.name == "ingested_at":
                arrays.append(pa.array([ingested_at], field.type).take(pa.array(np.zeros(n, dtype=np.int64))))
            elif field.name in self._run:
                arrays.append(pa.array(self._run[field.name], field.type).take(repeat))
            else:
                arrays.append(pa.array(self._rows[field.name], field.type))
        arrays.append(pa.array(self._run["cluster"], pa.string()).take(repeat))
        return pa.Table.from_arrays(arrays, schema=RECORDS_SCHEMA.append(pa.field("cluster", pa.string())))


def measurement_columns(records: Sequence[Measurement]) -> dict[str, list[Any]]:
    """The per-row columns of Measurement records (their fields of the same names)."""
    return {name: list(map(get, records)) for name, get in _GETTERS.items()}


def measurement_run(records: Sequence[Measurement]) -> RunInfo:
    """Run-level values the records themselves carry (the first record's; a run's records share them)."""
    first = records[0]
    text, items = settings_of(first.settings)
    times = [t for t in map(parse_time, {r.timestamp for r in records if r.timestamp}) if t is not None]
    info = RunInfo(engine=first.engine, engine_version=first.engine_version, backend=first.backend,
                   settings_text=text, settings=items, hosts=list(first.hosts), gpu=first.gpu,
                   nccl_version=first.nccl_version, point_id=first.point_id, sweep_id=first.sweep_id)
    if times:
        info["run_time"] = min(times)
        info["run_time_source"] = "record"
    if first.cluster:
        info["cluster"] = first.cluster
    return info
