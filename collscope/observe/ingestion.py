"""``observe ingest``: inputs into the store, idempotent by content hash, damaged inputs reported and skipped.

Each path is a results directory (``sweep.json``), a file, or a directory of files (walked, hidden names left
out; a results directory inside is read as one). A file already in the store (the ledger holds its sha256) is
skipped; so is one seen twice in the same call. A damaged input is reported with its file (and line) and the
others are ingested; a damaged line of a JSON-lines input is reported and the rest of the file ingested
(:mod:`collscope.observe.readers`). Rows are written in batches of about :data:`BATCH_RECORDS`, each committed
on its own (:mod:`collscope.observe.store`): a killed ingest keeps the batches it committed, and a rerun adds the
rest.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from collscope.errors import ConfigError, ParseError
from collscope.files import read_input_bytes
from collscope.observe.readers import EXPECTED_INPUT, ReadContext, Source, read_file
from collscope.observe.results_reader import read_results_dir
from collscope.observe.rows import Rows, parse_time
from collscope.observe.store import Store, cluster_key

__all__ = ["ingest", "IngestReport", "BATCH_RECORDS", "parse_time_option", "check_cluster"]

BATCH_RECORDS = 250_000
"""Rows per committed batch (about 60 MB of Python objects before it is written)."""


@dataclass(slots=True, kw_only=True)
class IngestReport:
    """What one ingest did."""

    sources: int = 0
    """Inputs added (a results directory counts one per point file)."""
    records: int = 0
    runs: int = 0
    skipped: int = 0
    """Inputs already in the store (or given twice), not read again."""
    batches: int = 0
    problems: list[str] = field(default_factory=list)
    """Damaged inputs (left out whole) and damaged lines (left out, the rest ingested): ``file:line: what``."""
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"sources": self.sources, "records": self.records, "runs": self.runs, "skipped": self.skipped,
                "batches": self.batches, "problems": list(self.problems), "notes": list(self.notes),
                "elapsed_s": round(self.elapsed_s, 3), "records_per_s": round(self.records_per_s)}


def parse_time_option(text: str | None) -> datetime | None:
    """``--time``: an ISO 8601 time (a time without a zone is UTC), or ConfigError."""
    if text is None:
        return None
    value = parse_time(text)
    if value is None:
        raise ConfigError(f"--time {text!r} is invalid; valid: an ISO 8601 time such as 2026-12-01T02:00:00Z or "
                          "2026-12-01")
    return value


def check_cluster(name: str | None) -> str | None:
    """``--cluster``: kept as given when it is a valid partition name, else ConfigError."""
    if name is not None and cluster_key(name) != name:
        raise ConfigError(f"--cluster {name!r} is invalid; valid: letters, digits, '.', '_' and '-' (not only dots "
                          "and underscores)")
    return name


def _inputs(paths: Iterable[str | Path], store: Path) -> Iterator[Path]:
    """Files and results directories under ``paths``; the store itself (an input directory may hold it) never."""
    skip = store.resolve()
    for raw in paths:
        path = Path(raw)
        if (path / "sweep.json").exists() or not path.is_dir():
            yield path
            continue
        for dirpath, dirnames, names in os.walk(path):
            here = Path(dirpath)
            if (here / "sweep.json").exists():
                dirnames[:] = []
                yield here
                continue
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and (here / d).resolve() != skip)
            yield from (here / n for n in sorted(names) if not n.startswith("."))


class _Batch:
    def __init__(self, store: Store, report: IngestReport) -> None:
        self.store, self.report = store, report
        self.rows = Rows()
        self.sources: list[Source] = []
        self.size = 0

    def add(self, source: Source) -> None:
        self.sources.append(source)
        self.size += len(source.rows)
        self.report.problems.extend(source.problems)
        self.report.notes.extend(f"{source.path}: {n}" for n in source.notes)
        if self.size >= BATCH_RECORDS:
            self.flush()

    def flush(self) -> None:
        if not self.sources:
            return
        for source in self.sources:
            self.rows.extend(source.rows)
        self.store.write_batch(self.rows, self.sources)
        self.report.sources += len(self.sources)
        self.report.records += len(self.rows)
        self.report.runs += self.rows.runs
        self.report.batches += 1
        self.rows, self.sources, self.size = Rows(), [], 0


def ingest(paths: Iterable[str | Path], store: str | Path, *, cluster: str | None = None,
           time_: datetime | None = None) -> IngestReport:
    """Add ``paths`` to the store at ``store`` (created when absent). ConfigError for a path that does not exist
    or a directory that is not a store; every other problem is in the report."""
    started = time.perf_counter()
    paths = list(paths)
    missing = [str(p) for p in paths if not os.path.lexists(p)]
    if missing:
        raise ConfigError(f"no such file or directory: {', '.join(missing)}; valid: {EXPECTED_INPUT}")
    ctx = ReadContext(cluster=check_cluster(cluster), time=time_)
    the_store = Store(store)
    report = IngestReport()
    with the_store.writing():
        known, _ = the_store.known()
        batch = _Batch(the_store, report)
        for path in _inputs(paths, the_store.root):
            try:
                if path.is_dir():
                    sources, skipped = read_results_dir(path, known, ctx)
                    report.skipped += skipped
                else:
                    data = read_input_bytes(path, EXPECTED_INPUT)
                    sha = hashlib.sha256(data).hexdigest()
                    if sha in known:
                        report.skipped += 1
                        continue
                    sources = [read_file(str(path.resolve()), data, sha, path.stat().st_mtime, ctx)]
            except ParseError as exc:
                report.problems.append(f"{exc} (input left out)")
                continue
            for source in sources:
                known.add(source.sha256)
                batch.add(source)
        batch.flush()
    report.elapsed_s = time.perf_counter() - started
    return report
