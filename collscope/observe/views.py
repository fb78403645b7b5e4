"""DuckDB over the store: views ``records``, ``runs`` and ``sources``, for ``observe query`` and notebooks.

``records`` is every committed row (:data:`collscope.observe.schema.RECORD_COLUMNS` plus the partition keys
``date`` and ``cluster``): a row whose batch has no ledger entry (a writer killed before its commit) is never
shown. ``runs`` has one row per ``run_id``: its run-level columns
(:data:`collscope.observe.schema.RUN_COLUMNS`) and ``records``, ``ops``, ``min_bytes``, ``max_bytes``,
``median_busbw_gbps``. ``sources`` is the ledger. The views read the files at query time (new batches are
seen without reconnecting); the connection's time zone is UTC.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from collscope.errors import ConfigError
from collscope.observe.schema import PARTITION_COLUMNS, RECORDS_SCHEMA, RUN_COLUMNS, SOURCES_SCHEMA
from collscope.observe.store import Store

__all__ = ["connect", "query", "rows_of", "RUNS_SQL", "selection"]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


RUNS_SQL = ("SELECT run_id, " + ", ".join(f"any_value({_q(c)}) AS {_q(c)}" for c in RUN_COLUMNS if c != "run_id")
            + ", count(*) AS records, count(DISTINCT op) AS ops, min(size_bytes) AS min_bytes, "
            "max(size_bytes) AS max_bytes, median(busbw_gbps) AS median_busbw_gbps FROM records GROUP BY run_id")
"""The ``runs`` view."""


def connect(store: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's views (``records``, ``runs``, ``sources``).
    ConfigError when ``store`` is not a store."""
    the_store = Store(store)
    the_store.check(must_exist=True)
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    root = the_store.root.resolve()
    if the_store.source_files():
        files = _literal(str(root / "sources" / "*.parquet"))
        con.execute(f"CREATE VIEW sources AS SELECT * FROM read_parquet({files}, union_by_name = true)")
    else:
        con.register("_empty_sources", SOURCES_SCHEMA.empty_table())
        con.execute("CREATE VIEW sources AS SELECT * FROM _empty_sources")
    if any(p.name.endswith(".parquet") and not p.name.startswith(".") for p in the_store.record_files()):
        files = _literal(str(root / "records" / "**" / "*.parquet"))
        con.execute(f"CREATE VIEW records AS SELECT * FROM read_parquet({files}, hive_partitioning = true, "
                    "hive_types = {'date': DATE, 'cluster': VARCHAR}, union_by_name = true) "
                    "WHERE batch_id IN (SELECT batch_id FROM sources)")
    else:
        empty = RECORDS_SCHEMA
        for column in PARTITION_COLUMNS:
            empty = empty.append(pa.field(column.name, column.type))
        con.register("_empty_records", empty.empty_table())
        con.execute("CREATE VIEW records AS SELECT * FROM _empty_records")
    con.execute(f"CREATE VIEW runs AS {RUNS_SQL}")
    return con


def query(store: str | Path, sql: str) -> pa.Table:
    """The result of ``sql`` over the store's views, as an Arrow table; ConfigError naming what DuckDB said."""
    con = connect(store)
    try:
        result: Any = con.sql(sql)
        if result is None:
            raise ConfigError(f"the SQL returned no result (a statement, not a query): {sql!r}; valid: a SELECT "
                              "over records, runs or sources")
        to_table = getattr(result, "to_arrow_table", None)  # duckdb >= 1.4; fetch_arrow_table is deprecated in 2.0
        return to_table() if to_table is not None else result.fetch_arrow_table()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"the SQL failed: {first}") from None
    finally:
        con.close()


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of a query result as dicts, a map column's values as dicts (Arrow gives lists of pairs)."""
    maps = [f.name for f in table.schema if pa.types.is_map(f.type)]
    rows = table.to_pylist()
    for row in rows:
        for name in maps:
            if row[name] is not None:
                row[name] = dict(row[name])
    return rows


def selection(read_from: datetime | None, cluster: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause (and its parameters) of the records ``changes``, ``report`` and ``export`` read: measured
    busbw, not failed, from ``read_from`` on, of one cluster when given."""
    where: list[str] = ["busbw_gbps > 0", "ok IS NOT false"]
    params: list[Any] = []
    if read_from is not None:
        where.append("run_time >= ?")
        params.append(read_from)
    if cluster is not None:
        where.append("cluster = ?")
        params.append(cluster)
    return " AND ".join(where), params
