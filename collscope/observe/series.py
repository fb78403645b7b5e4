"""``observe changes``: the store's series read through DuckDB, handed to the detector, returned as records.

A series is one (cluster, op, nranks, nnodes, settings, dtype) (:data:`collscope.observe.changes.SERIES_COLUMNS`);
its matrix is runs (in time order) x sizes of the median busbw of each run at each size (over repeats and both
placements; rows with ``ok`` false or no busbw left out). :func:`collscope.observe.changes.detect` finds changes
and outliers on it; this module adds what the store knows: run times, sizes, and the provenance of the runs either
side of each change (``coincides_with``).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from collscope.errors import ConfigError
from collscope.observe.changes import COINCIDE_COLUMNS, SERIES_COLUMNS, Change, Detection, Outlier, detect
from collscope.observe.pool import process_pool, workers
from collscope.observe.views import connect, selection

__all__ = ["find_changes", "ChangesReport", "changes_report", "parse_since"]

_AGO = re.compile(r"^\s*(\d+)\s*([hdw])\s*$")
_UNIT_S = {"h": 3600, "d": 86400, "w": 7 * 86400}
CONTEXT_MIN = timedelta(days=30)
"""The runs before the window are the baseline of a change early in it: the series are read from the window's
start less its length (at least 30 days)."""


def parse_since(text: str | None, now: datetime) -> datetime | None:
    """``--since``: ``30d``, ``12h``, ``2w`` before ``now``, an ISO date or time (no zone: UTC), or ``all``
    (None); ConfigError otherwise."""
    if text is None or text.strip().lower() == "all":
        return None
    match = _AGO.match(text)
    if match:
        return now - timedelta(seconds=int(match.group(1)) * _UNIT_S[match.group(2)])
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--since {text!r} is invalid; valid: a span back from now (30d, 12h, 2w), an ISO date "
                          "or time (2026-11-01, 2026-11-01T02:00:00Z), or 'all'") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


class ChangesReport:
    """What ``observe changes`` found: changes and outliers at or after ``since``, and how many series it read."""

    __slots__ = ("changes", "outliers", "series", "runs", "since", "read_from")

    def __init__(self, changes: list[Change], outliers: list[Outlier], series: int, runs: int,
                 since: datetime | None, read_from: datetime | None) -> None:
        self.changes, self.outliers, self.series, self.runs = changes, outliers, series, runs
        self.since, self.read_from = since, read_from

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.kind == "regression"]

    def to_dict(self) -> dict[str, Any]:
        return {"since": self.since.isoformat() if self.since else None,
                "read_from": self.read_from.isoformat() if self.read_from else None,
                "series": self.series, "runs": self.runs, "regressions": len(self.regressions),
                "changes": [c.to_dict() for c in self.changes], "outliers": [o.to_dict() for o in self.outliers]}


def find_changes(store: str | Path | duckdb.DuckDBPyConnection, *, since: datetime | None = None,
                 cluster: str | None = None, now: datetime | None = None) -> list[Change]:
    """The changes of every series of the store (or a connection from :func:`collscope.observe.connect`) whose
    first run after is at or after ``since`` (None: all), on ``cluster`` (None: all); oldest first."""
    return changes_report(store, since=since, cluster=cluster, now=now).changes


def changes_report(store: str | Path | duckdb.DuckDBPyConnection, *, since: datetime | None = None,
                   cluster: str | None = None, now: datetime | None = None) -> ChangesReport:
    """:func:`find_changes` with the outliers and the counts ``observe changes`` prints."""
    con = store if isinstance(store, duckdb.DuckDBPyConnection) else connect(store)
    now = now or datetime.now(timezone.utc)
    read_from = None if since is None else since - max(now - since, CONTEXT_MIN)
    table = _points(con, read_from, cluster)
    changes: list[Change] = []
    outliers: list[Outlier] = []
    every = list(_series(table))
    series, runs = len(every), sum(len(s[1]) for s in every)
    found = [(series_hash, run_hashes, times, sizes, detection)
             for (series_hash, run_hashes, times, sizes, _), detection in zip(every, _detect_all(every), strict=True)
             if detection.shifts or detection.spikes]
    pairs = [_sides(f[4]) for f in found]
    wanted = {int(f[1][r]) for f, p in zip(found, pairs, strict=True) for pair in p for r in pair}
    wanted |= {int(f[1][s.row]) for f in found for s in f[4].spikes}
    prov = _provenance(con, sorted(wanted))
    for (series_hash, run_hashes, times, sizes, detection), sides in zip(found, pairs, strict=True):
        rows = sorted({r for pair in sides for r in pair} | {x.row for x in detection.spikes})
        named = [prov[(series_hash, int(run_hashes[r]))] for r in rows]
        key = tuple(named[0][c] for c in SERIES_COLUMNS)
        c, o = _records(prov, series_hash, key, run_hashes, times, sizes, detection, sides)
        changes += [x for x in c if since is None or x.at >= since]
        outliers += [x for x in o if since is None or x.at >= since]
    if not isinstance(store, duckdb.DuckDBPyConnection):
        con.close()
    changes.sort(key=lambda x: (x.at, str(x.series)))
    outliers.sort(key=lambda x: (x.at, str(x.series)))
    return ChangesReport(changes, outliers, series, runs, since, read_from)


POOL_MIN_CELLS = 1_000_000
"""Series of fewer runs x sizes in all are searched in this process (a pool costs about a second to start)."""


def _detect_all(every: list[Any]) -> list[Detection]:
    """:func:`detect` on each series (seeded by its place, 1, 2, ...), in a pool of processes when the series are
    many and there is more than one core (:mod:`collscope.observe.pool`); in order either way."""
    matrices = [s[4] for s in every]
    seeds = list(range(1, len(every) + 1))
    count = min(workers(), len(matrices))
    if count < 2 or sum(m.size for m in matrices) < POOL_MIN_CELLS:
        return [detect(m, seed=k) for m, k in zip(matrices, seeds, strict=True)]
    with process_pool(count) as pool:
        return list(pool.map(_detect_one, matrices, seeds))


def _detect_one(matrix: np.ndarray, seed: int) -> Detection:
    return detect(matrix, seed=seed)


def _points(con: duckdb.DuckDBPyConnection, read_from: datetime | None, cluster: str | None) -> pa.Table:
    where, params = selection(read_from, cluster)
    keys = ", ".join(SERIES_COLUMNS)
    # grouped by hashes (a third faster than by the text columns), sorted by numpy (DuckDB's ORDER BY took a third
    # of the time); the series' and runs' own values are read for the few runs a change or an outlier names
    sql = (f"SELECT hash({keys}) AS series_hash, hash(run_id) AS run_hash, min(run_time) AS run_time, size_bytes, "
           f"median(busbw_gbps) AS busbw_gbps FROM records WHERE {where} "
           f"GROUP BY series_hash, run_hash, size_bytes")
    result: Any = con.sql(sql, params=params)
    to_table = getattr(result, "to_arrow_table", None)  # duckdb >= 1.4; fetch_arrow_table is deprecated in 2.0
    return to_table() if to_table is not None else result.fetch_arrow_table()


def _series(table: pa.Table) -> Any:
    """(series hash, run hashes, run times, sizes, runs x sizes busbw) of each series of the points."""
    if table.num_rows == 0:
        return
    hashes = table.column("series_hash").to_numpy()
    runs = table.column("run_hash").to_numpy()
    times = table.column("run_time").cast(pa.int64()).to_numpy()
    sizes = table.column("size_bytes").to_numpy()
    order = np.lexsort((sizes, runs, times, hashes))  # series, then runs in time order, then sizes
    hashes, runs, times, sizes = hashes[order], runs[order], times[order], sizes[order]
    busbw = table.column("busbw_gbps").to_numpy()[order]
    cuts = np.flatnonzero(hashes[1:] != hashes[:-1]) + 1
    for a, b in zip([0, *cuts], [*cuts, len(hashes)], strict=True):
        new_run = np.concatenate([[True], (runs[a + 1:b] != runs[a:b - 1]) | (times[a + 1:b] != times[a:b - 1])])
        row = np.cumsum(new_run) - 1
        the_sizes, col = np.unique(sizes[a:b], return_inverse=True)
        matrix = np.full((int(row[-1]) + 1, len(the_sizes)), np.nan)
        matrix[row, col] = busbw[a:b]
        starts = np.flatnonzero(new_run) + a
        yield int(hashes[a]), runs[starts], times[starts], the_sizes, matrix


def _time(us: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=int(us))


def _provenance(con: duckdb.DuckDBPyConnection, run_hashes: list[int]) -> dict[tuple[int, int], dict[str, Any]]:
    """(series hash, run hash) -> the run's id, series columns, provenance columns and source."""
    if not run_hashes:
        return {}
    keys = ", ".join(SERIES_COLUMNS)
    names = ["run_id", *SERIES_COLUMNS, *COINCIDE_COLUMNS, "source"]
    cols = ", ".join(f"any_value({c}) AS {c}" for c in names)
    con.register("_wanted_runs", pa.table({"run_hash": pa.array(run_hashes, pa.uint64())}))
    try:
        result: Any = con.execute(
            f"SELECT hash({keys}) AS series_hash, hash(run_id) AS run_hash, {cols} FROM records "
            "WHERE hash(run_id) IN (SELECT run_hash FROM _wanted_runs) GROUP BY series_hash, run_hash")
        rows = result.fetchall()
    finally:
        con.unregister("_wanted_runs")
    return {(int(row[0]), int(row[1])): dict(zip(names, row[2:], strict=True)) for row in rows}


def _comparable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _sides(found: Detection) -> list[tuple[int, int]]:
    """(last run before, first run after) of each change, outlying runs passed over."""
    spike_rows = {s.row for s in found.spikes}
    pairs = []
    for s in found.shifts:
        before = next((r for r in range(s.row - 1, s.start_row - 1, -1) if r not in spike_rows), s.row - 1)
        after = next((r for r in range(s.row, s.end_row) if r not in spike_rows), s.row)
        pairs.append((before, after))
    return pairs


def _records(prov: dict[tuple[int, int], dict[str, Any]], series_hash: int, key: tuple[Any, ...],
             run_hashes: np.ndarray, times: np.ndarray, sizes: np.ndarray, found: Detection,
             pairs: list[tuple[int, int]]) -> tuple[list[Change], list[Outlier]]:
    cluster, op, nranks, nnodes, settings, dtype = key
    ident = dict(cluster=cluster, op=op, nranks=nranks, nnodes=nnodes, settings=settings, dtype=dtype)

    def run(row: int) -> dict[str, Any]:
        return prov.get((series_hash, int(run_hashes[row])), {})

    changes = []
    for s, (before, after) in zip(found.shifts, pairs, strict=True):
        pb, pa_ = run(before), run(after)
        differ = {c: (_comparable(pb.get(c)), _comparable(pa_.get(c))) for c in COINCIDE_COLUMNS
                  if _comparable(pb.get(c)) != _comparable(pa_.get(c))}
        pct = math.expm1(s.log_change) * 100
        changes.append(Change(
            **ident, size_min_bytes=int(sizes[s.first_col]), size_max_bytes=int(sizes[s.last_col]),
            at=_time(times[s.row]), before_at=_time(times[before]), before_busbw_gbps=math.exp(s.before_log),
            after_busbw_gbps=math.exp(s.after_log), change_pct=pct, ci_low_pct=math.expm1(s.ci_low) * 100,
            ci_high_pct=math.expm1(s.ci_high) * 100, coincides_with=differ,
            kind="regression" if pct < 0 else "improvement", runs_before=s.row - s.start_row,
            runs_after=s.end_row - s.row, sizes_bytes=tuple(int(x) for x in sizes[s.first_col:s.last_col + 1]),
            representative_size_bytes=int(sizes[s.col])))
    outliers = []
    for sp in found.spikes:
        worst = int(np.argmax(np.abs(sp.deviations)))
        outliers.append(Outlier(
            **ident, size_min_bytes=int(sizes[min(sp.cols)]), size_max_bytes=int(sizes[max(sp.cols)]),
            at=_time(times[sp.row]), run_id=str(run(sp.row).get("run_id")),
            busbw_gbps=math.exp(sp.expected_log[worst] + sp.deviations[worst]),
            expected_busbw_gbps=math.exp(sp.expected_log[worst]),
            deviation_pct=math.expm1(float(np.median(sp.deviations))) * 100,
            worst_size_bytes=int(sizes[sp.cols[worst]]),
            source=run(sp.row).get("source")))
    return changes, outliers
