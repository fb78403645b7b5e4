"""The fleet store on disk: an append-only pair of Parquet datasets, written so that a kill never corrupts it.

Layout (columns: :mod:`collscope.observe.schema`)::

    STORE/records/date=2026-12-01/cluster=alpha/part-<batch>-<n>.parquet   one row per measurement
    STORE/sources/batch-<batch>.parquet                                   the ledger: one row per input
    STORE/.lock                                                           one writer at a time (flock)

Writing a batch: every records file is written under a hidden temporary name in its target directory
(``.part-....parquet.tmp``, which neither DuckDB's ``*.parquet`` glob nor pyarrow's dataset discovery reads) and
renamed into place; then the batch's ledger file, the same way. The ledger file is the commit: readers
(:mod:`collscope.observe.views`) count a records row only when ``sources/`` holds its ``batch_id``, and the
next writer deletes records files of batches that never committed (a writer killed between its renames) and
stray temporary files. An input is in the store exactly when the ledger holds its content hash, so a rerun
after a kill ingests what the killed run did not commit, and nothing twice.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from collscope.errors import ConfigError
from collscope.observe.readers import Source
from collscope.observe.rows import Rows
from collscope.observe.schema import SOURCES_SCHEMA
from collscope.results.lock import writer_lock

__all__ = ["Store", "cluster_key", "ROWS_PER_FILE", "RECORDS", "SOURCES"]

RECORDS, SOURCES = "records", "sources"
ROWS_PER_FILE = 1_000_000
"""A partition's rows of one batch are split into files of at most this many rows."""
_PART = re.compile(r"^part-([0-9a-f]{16})-\d+\.parquet$")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def cluster_key(name: str | None) -> str:
    """A cluster as its partition directory names it: characters outside ``[A-Za-z0-9._-]`` become ``_``, none
    (or nothing left) is ``unknown``."""
    key = _SAFE.sub("_", name.strip()) if name else ""
    return key if key.strip("._") else "unknown"


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(table: pa.Table, path: Path) -> None:
    """``table`` to ``path``: written to a hidden temporary file in the same directory, synced, renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    _fsync(tmp)
    os.replace(tmp, path)


class Store:
    """A store directory (created on first write)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.records_dir = self.root / RECORDS
        self.sources_dir = self.root / SOURCES

    def check(self, *, must_exist: bool) -> None:
        """ConfigError unless ``root`` is a store (or, for writing, an empty or absent directory)."""
        if not self.root.exists():
            if must_exist:
                raise ConfigError(f"--store {self.root}: no such directory; 'collscope observe ingest PATH --store "
                                  f"{self.root}' creates it")
            return
        if not self.root.is_dir():
            raise ConfigError(f"--store {self.root}: not a directory")
        if self.records_dir.is_dir() or self.sources_dir.is_dir():
            return
        if must_exist or any(not n.startswith(".") for n in os.listdir(self.root)):
            raise ConfigError(f"--store {self.root}: not a collscope store (no records/ or sources/); valid: a "
                              "directory made by 'collscope observe ingest', or a new or empty one")

    def source_files(self) -> list[Path]:
        try:
            return sorted(p for p in self.sources_dir.iterdir() if p.name.endswith(".parquet")
                          and not p.name.startswith("."))
        except FileNotFoundError:
            return []

    def record_files(self) -> Iterator[Path]:
        for dirpath, _, names in os.walk(self.records_dir):
            for name in names:
                yield Path(dirpath) / name

    def ledger(self) -> pa.Table:
        """Every committed source row (:data:`SOURCES_SCHEMA`)."""
        tables = [pq.read_table(p) for p in self.source_files()]
        return pa.concat_tables(tables, promote_options="default") if tables else SOURCES_SCHEMA.empty_table()

    def known(self) -> tuple[set[str], set[str]]:
        """(content hashes of the committed sources, committed batch ids)."""
        hashes: set[str] = set()
        batches: set[str] = set()
        for path in self.source_files():
            table = pq.read_table(path, columns=["source_sha256", "batch_id"])
            hashes.update(table.column(0).to_pylist())
            batches.update(table.column(1).to_pylist())
        return hashes, batches

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store's writer lock; first delete what a killed writer left uncommitted."""
        self.check(must_exist=False)
        self.records_dir.mkdir(parents=True, exist_ok=True)
        self.sources_dir.mkdir(parents=True, exist_ok=True)
        with writer_lock(self.root):
            self._clean()
            yield

    def _clean(self) -> None:
        _, batches = self.known()
        for path in [*self.record_files(), *self.sources_dir.iterdir()]:
            m = _PART.match(path.name)
            if (path.name.startswith(".") and path.name.endswith(".tmp")) or (m and m.group(1) not in batches):
                path.unlink(missing_ok=True)

    def write_batch(self, rows: Rows, sources: Sequence[Source]) -> str:
        """Write ``rows`` (of ``sources``) as one committed batch; its id."""
        batch_id = uuid.uuid4().hex[:16]
        now = datetime.now(timezone.utc)
        table = rows.table(batch_id, now)
        if table.num_rows:
            self._write_records(table, batch_id)
        ledger = pa.Table.from_pylist([
            {"source_sha256": s.sha256, "source": s.path, "kind": s.kind, "records": len(s.rows), "runs": s.rows.runs,
             "batch_id": batch_id, "ingested_at": now, "notes": [*s.notes, *s.problems]} for s in sources],
            schema=SOURCES_SCHEMA)
        _write_atomic(ledger, self.sources_dir / f"batch-{batch_id}.parquet")
        return batch_id

    def _write_records(self, table: pa.Table, batch_id: str) -> None:
        dates = pc.cast(table.column("run_time"), pa.date32()).cast(pa.int32()).to_numpy(zero_copy_only=False)
        encoded = table.column("cluster").combine_chunks().dictionary_encode(null_encoding="encode")
        names = [cluster_key(c) for c in encoded.dictionary.to_pylist()]
        cluster_codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        key = dates.astype(np.int64) * (len(names) + 1) + cluster_codes
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
        bounds = [*starts.tolist(), len(order)]
        body = table.drop_columns(["cluster"])
        n = 0
        for a, b in zip(bounds, bounds[1:], strict=False):
            take = order[a:b]
            first = int(take[0])
            day = datetime.fromtimestamp(int(dates[first]) * 86400, timezone.utc).date().isoformat()
            directory = self.records_dir / f"date={day}" / f"cluster={names[cluster_codes[first]]}"
            directory.mkdir(parents=True, exist_ok=True)
            part = body.take(pa.array(take))
            for lo in range(0, part.num_rows, ROWS_PER_FILE):
                _write_atomic(part.slice(lo, ROWS_PER_FILE), directory / f"part-{batch_id}-{n}.parquet")
                n += 1
