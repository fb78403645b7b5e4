"""The points of ``observe report``'s figures, read through DuckDB a column at a time.

A point is one run of one series at one size: the run's time and its median busbw over its records there
(repeats, in-place and out-of-place; ``ok`` false and busbw missing left out), the rows ``observe changes`` reads
(:mod:`collscope.observe.series`). A fleet's store holds thousands of runs a night at tens of sizes, so the report
first counts runs per series and size (:func:`series_sizes`), chooses a few sizes per series and the series it
draws, and only then reads those points (:func:`series_points`) and the runs where the NCCL version changed
(:func:`version_changes`), as NumPy arrays, never a Python object per row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from collscope.observe.changes import SERIES_COLUMNS, SeriesKey
from collscope.observe.views import selection

__all__ = ["SeriesSizes", "Points", "series_sizes", "series_points", "version_changes", "datetime64"]

_KEYS = ", ".join(SERIES_COLUMNS)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_HASH = f"hash({_KEYS})"
Points = dict[int, tuple[np.ndarray, np.ndarray]]
"""size -> (run times as datetime64[us] UTC, busbw GB/s), in time order."""


@dataclass(frozen=True, slots=True)
class SeriesSizes:
    """How many runs a series has, in all and per size."""

    key: SeriesKey
    hash: int
    """DuckDB's ``hash`` of the series columns (the key of the other queries)."""
    runs: int
    runs_per_size: dict[int, int]


def _table(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]) -> pa.Table:
    result: Any = con.sql(sql, params=list(params))
    to_table = getattr(result, "to_arrow_table", None)  # duckdb >= 1.4; fetch_arrow_table before
    return to_table() if to_table is not None else result.fetch_arrow_table()


def series_sizes(con: duckdb.DuckDBPyConnection, read_from: datetime | None,
                 cluster: str | None) -> list[SeriesSizes]:
    """Every series with a busbw from ``read_from`` on (of ``cluster``): its runs in all and per size."""
    where, params = selection(read_from, cluster)
    per_size = _table(con, f"SELECT {_HASH} AS h, {_KEYS}, size_bytes, count(DISTINCT run_id) AS runs FROM records "
                           f"WHERE {where} GROUP BY ALL ORDER BY h, size_bytes", params)
    totals = _table(con, f"SELECT {_HASH} AS h, count(DISTINCT run_id) AS runs FROM records WHERE {where} "
                         "GROUP BY h", params)
    total = dict(zip(totals.column("h").to_pylist(), totals.column("runs").to_pylist(), strict=True))
    out: dict[int, SeriesSizes] = {}
    for row in per_size.to_pylist():  # one row per series and size: small
        h = row["h"]
        if h not in out:
            key: SeriesKey = (row["cluster"], row["op"], row["nranks"], row["nnodes"], row["settings_text"],
                              row["dtype"])
            out[h] = SeriesSizes(key, h, int(total[h]), {})
        out[h].runs_per_size[int(row["size_bytes"])] = int(row["runs"])
    return list(out.values())


def _chosen(con: duckdb.DuckDBPyConnection, sizes: Mapping[int, Sequence[int]]) -> None:
    pairs = [(h, s) for h, ss in sizes.items() for s in ss]
    con.register("_report_chosen", pa.table({"h": pa.array([h for h, _ in pairs], pa.uint64()),
                                             "size_bytes": pa.array([s for _, s in pairs], pa.int64())}))


def series_points(con: duckdb.DuckDBPyConnection, read_from: datetime | None, cluster: str | None,
                  sizes: Mapping[int, Sequence[int]]) -> dict[int, Points]:
    """Series hash -> its points at the given sizes (``sizes``: series hash -> sizes)."""
    where, params = selection(read_from, cluster)
    _chosen(con, sizes)
    table = _table(con, f"SELECT {_HASH} AS h, size_bytes, run_id, min(run_time) AS run_time, median(busbw_gbps) AS "
                        f"busbw_gbps FROM records WHERE {where} AND ({_HASH}, size_bytes) IN "
                        "(SELECT h, size_bytes FROM _report_chosen) GROUP BY h, size_bytes, run_id "
                        "ORDER BY h, size_bytes, run_time, run_id", params)
    con.unregister("_report_chosen")
    out: dict[int, Points] = {}
    if table.num_rows == 0:
        return out
    hashes = table.column("h").to_numpy()
    size = table.column("size_bytes").to_numpy()
    times = table.column("run_time").cast(pa.int64()).to_numpy().astype("datetime64[us]")
    busbw = table.column("busbw_gbps").to_numpy()
    cuts = np.flatnonzero((hashes[1:] != hashes[:-1]) | (size[1:] != size[:-1])) + 1
    for a, b in zip([0, *cuts], [*cuts, len(hashes)], strict=True):
        out.setdefault(int(hashes[a]), {})[int(size[a])] = (times[a:b], busbw[a:b])
    return out


def version_changes(con: duckdb.DuckDBPyConnection, read_from: datetime | None, cluster: str | None,
                    hashes: Sequence[int]) -> dict[int, list[tuple[datetime, str]]]:
    """Series hash -> (first run, NCCL version) at each run whose version differs from the last run before it
    that logged one."""
    where, params = selection(read_from, cluster)
    _chosen(con, {h: [0] for h in hashes})
    table = _table(con, f"SELECT {_HASH} AS h, run_id, min(run_time) AS run_time, any_value(nccl_version) AS v "
                        f"FROM records WHERE {where} AND nccl_version IS NOT NULL AND {_HASH} IN "
                        "(SELECT h FROM _report_chosen) GROUP BY h, run_id ORDER BY h, run_time, run_id", params)
    con.unregister("_report_chosen")
    out: dict[int, list[tuple[datetime, str]]] = {}
    if table.num_rows == 0:
        return out
    h = table.column("h").to_numpy()
    version = np.asarray(table.column("v").to_numpy(zero_copy_only=False), dtype=object)
    times = table.column("run_time").cast(pa.int64()).to_numpy()
    new = np.flatnonzero((h[1:] == h[:-1]) & (version[1:] != version[:-1])) + 1
    for i in new:
        at = _EPOCH + timedelta(microseconds=int(times[i]))
        out.setdefault(int(h[i]), []).append((at, str(version[i])))
    return out


def datetime64(at: datetime) -> np.datetime64:
    """An aware time as the points hold it (datetime64[us], UTC, no zone)."""
    return np.datetime64(at.astimezone(timezone.utc).replace(tzinfo=None), "us")
