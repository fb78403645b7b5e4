"""The fleet's history: measurements of many runs in an append-only Parquet store, queried with DuckDB.

``ingest`` adds results directories, nccl-tests outputs, ``locate``/``trace`` JSON and NCCL Inspector lines
(idempotent by content hash); ``connect`` returns a DuckDB connection with the views ``records``, ``runs`` and
``sources``; ``find_changes`` the change points of every series; the columns are
:mod:`collscope.observe.schema`'s. See docs/observe.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.observe.changes import Change, Outlier
    from collscope.observe.ingestion import IngestReport, ingest
    from collscope.observe.schema import PARTITIONING_SCHEMA, RECORD_COLUMNS
    from collscope.observe.series import find_changes
    from collscope.observe.views import connect, query

__all__ = ["ingest", "IngestReport", "connect", "query", "RECORD_COLUMNS", "PARTITIONING_SCHEMA", "find_changes",
           "Change", "Outlier"]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.observe.ingestion": ["ingest", "IngestReport"],
        "collscope.observe.views": ["connect", "query"],
        "collscope.observe.schema": ["RECORD_COLUMNS", "PARTITIONING_SCHEMA"],
        "collscope.observe.series": ["find_changes"],
        "collscope.observe.changes": ["Change", "Outlier"],
    })
