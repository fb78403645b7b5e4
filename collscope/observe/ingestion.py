"""``observe ingest``: inputs into the store, idempotent by content hash, damaged inputs reported and skipped.

Each path is a results directory (``sweep.json``), a file, or a directory of files (walked, hidden names left
out; a results directory inside is read as one). A file already in the store (the ledger holds its sha256) is
skipped; so is one seen twice in the same call. A damaged input is reported with its file (and line) and the
others are ingested; a damaged line of a JSON-lines input is reported and the rest of the file ingested
(:mod:`collscope.observe.readers`). Files are parsed by a pool of processes, one per core this process may run
on (:func:`collscope.observe.pool.workers`; parsing is pure Python and CPU-bound), in the order they were found;
hashing, the ledger and writing stay in this process. Rows are written in batches of about
:data:`BATCH_RECORDS`, each committed on its own (:mod:`collscope.observe.store`): a killed ingest keeps the
batches it committed, and a rerun adds the rest.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from collscope.errors import ConfigError, ParseError
from collscope.files import read_input_bytes
from collscope.observe.pool import process_pool, workers
from collscope.observe.readers import EXPECTED_INPUT, ReadContext, Source, read_file
from collscope.observe.results_reader import read_results_dir
from collscope.observe.rows import Rows, parse_time
from collscope.observe.store import Store, cluster_key

__all__ = ["ingest", "IngestReport", "BATCH_RECORDS", "parse_time_option", "check_cluster"]

BATCH_RECORDS = 250_000
"""Rows per committed batch (about 60 MB of Python objects before it is written)."""
CHUNK_FILES = 32
"""Files handed to a parsing process at a time (and parsed in this process when fewer are waiting)."""
_Job = tuple[str, bytes, str, float]
"""What a parsing process gets for one file: its path, content, sha256 and modification time."""


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


def _parse_chunk(jobs: Sequence[_Job], ctx: ReadContext) -> list[Source | str]:
    """Each file's Source, or the text of the ParseError that left it out (exceptions with their own arguments
    do not cross a process boundary intact)."""
    out: list[Source | str] = []
    for path, data, sha, mtime in jobs:
        try:
            out.append(read_file(path, data, sha, mtime, ctx))
        except ParseError as exc:
            out.append(str(exc))
    return out


class _Parser:
    """Parses files in order, a chunk at a time, in a pool of processes when there is more than one core."""

    def __init__(self, ctx: ReadContext, workers: int) -> None:
        self.ctx = ctx
        self.jobs: list[_Job] = []
        self.pending: list[Any] = []  # futures, in order
        self.pool: Executor | None = None
        if workers > 1:
            self.pool = process_pool(workers)
            self.depth = 2 * workers

    def add(self, job: _Job) -> Iterator[Source | str]:
        self.jobs.append(job)
        if len(self.jobs) >= CHUNK_FILES:
            yield from self._submit()

    def _submit(self) -> Iterator[Source | str]:
        jobs, self.jobs = self.jobs, []
        if self.pool is None:
            yield from _parse_chunk(jobs, self.ctx)
            return
        self.pending.append(self.pool.submit(_parse_chunk, jobs, self.ctx))
        while len(self.pending) > self.depth:
            yield from self.pending.pop(0).result()

    def drain(self) -> Iterator[Source | str]:
        """Everything still waiting, in order (before a results directory's sources, and at the end)."""
        if self.jobs:
            if self.pool is None or self.pending:
                yield from self._submit()
            else:
                jobs, self.jobs = self.jobs, []
                yield from _parse_chunk(jobs, self.ctx)  # a few files: no process started for them
        while self.pending:
            yield from self.pending.pop(0).result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def _ingest_locked(paths: list[str | Path], the_store: Store, ctx: ReadContext, parser: _Parser,
                   report: IngestReport) -> None:
    known, _ = the_store.known()
    batch = _Batch(the_store, report)

    def take(results: Iterable[Source | str]) -> None:
        for result in results:
            if isinstance(result, str):
                report.problems.append(f"{result} (input left out)")
            else:
                batch.add(result)

    for path in _inputs(paths, the_store.root):
        try:
            if path.is_dir():
                take(parser.drain())
                sources, skipped = read_results_dir(path, known, ctx)
                report.skipped += skipped
                for source in sources:
                    known.add(source.sha256)
                take(sources)
                continue
            data = read_input_bytes(path, EXPECTED_INPUT)
            sha = hashlib.sha256(data).hexdigest()
            if sha in known:
                report.skipped += 1
                continue
            known.add(sha)
            job = (str(path.resolve()), data, sha, path.stat().st_mtime)
        except ParseError as exc:
            report.problems.append(f"{exc} (input left out)")
            continue
        take(parser.add(job))
    take(parser.drain())
    batch.flush()


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
    parser = _Parser(ctx, workers())  # forked before the writer lock is taken: no child holds it (observe.pool)
    try:
        with the_store.writing():
            _ingest_locked(paths, the_store, ctx, parser, report)
    finally:
        parser.close()
    report.elapsed_s = time.perf_counter() - started
    return report
