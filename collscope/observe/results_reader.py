"""A ``sweep run`` results directory into store rows: one source per point file, one run per point.

The directory is read by :func:`collscope.analysis.load.load_results` (its strict checks, redaction and
configuration names, the same as ``analyze``); idempotency is per point file (its content hash), so a resumed
sweep ingested again adds only the points finished since. ``sweep.json`` gives the fabric fingerprint
(``topology_hash``) and the Slurm job; the points' logs (``points/*.log``) give what NCCL logged about itself
(:mod:`collscope.observe.provenance`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collscope.analysis.load import RECORD_COLUMNS as FRAME_RECORD_COLUMNS
from collscope.analysis.load import load_results
from collscope.observe.provenance import SCAN_BYTES, logged_provenance
from collscope.observe.readers import ReadContext, Source, finish_run
from collscope.observe.rows import RunInfo, parse_time, run_id_of
from collscope.results.store import ResultsDir

__all__ = ["point_files", "read_results_dir", "MAX_LOGS_SCANNED"]

MAX_LOGS_SCANNED = 20
"""Point logs scanned for NCCL's provenance lines (one sweep runs one NCCL build: the first that logs wins)."""
_ROW_FIELDS = ("op", "size_bytes", "count", "dtype", "redop", "root", "in_place", "nranks", "nnodes", "time_us",
               "algbw_gbps", "busbw_gbps", "wrong", "ok", "iters", "warmup", "repeat", "time_over_ranks",
               "process_shape")


def point_files(root: Path) -> list[Path]:
    """The finished point files of a results directory (``points/<id>.jsonl``; never ``*.partial.jsonl``)."""
    points = root / "points"
    try:
        names = os.listdir(points)
    except OSError:
        return []
    return [points / n for n in sorted(names)
            if n.endswith(".jsonl") and not n.endswith(".partial.jsonl") and not n.startswith(".")]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _pylist(column: pd.Series) -> list[Any]:
    """A column as Python values, None where missing."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iub":  # numpy: never missing
        return column.tolist()
    as_object = column.astype(object)
    return as_object.where(column.notna(), None).tolist()


def _logged(root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    logs = sorted((root / "points").glob("*.log"))[:MAX_LOGS_SCANNED]
    for log in logs:
        try:
            with open(log, "rb") as fh:
                text = fh.read(SCAN_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        for key, value in logged_provenance(text).items():
            found.setdefault(key, value)
    return found


def read_results_dir(root: Path, known: Collection[str], ctx: ReadContext) -> tuple[list[Source], int]:
    """(one Source per point file not ingested before, how many were skipped as already in the store).

    Raises ParseError (``load_results``' own: a damaged point file names every damaged file) for a directory
    that cannot be read; nothing of it is ingested then.
    """
    files = point_files(root)
    hashes = {f.stem: _sha256(f) for f in files}
    new = {pid: sha for pid, sha in hashes.items() if sha not in known}
    if not new:
        return [], len(hashes)
    frame = load_results(root)
    sweep = ResultsDir(root).read_sweep()
    common = RunInfo(_logged(root))
    if sweep.topology_hash:
        common["fabric_fingerprint"] = sweep.topology_hash
    if sweep.slurm_job_id:
        common["slurm_job_id"] = sweep.slurm_job_id
    knobs = [c for c in frame.columns if c not in FRAME_RECORD_COLUMNS and not c.islower()]
    columns = {name: _pylist(frame[name]) for name in (*_ROW_FIELDS, "point_id", "engine", "engine_version",
                                                       "backend", "hosts", "gpu", "nccl_version", "sweep_id",
                                                       "cluster", "timestamp", "config", "applied", "failure")
               if name in frame.columns}
    knob_values = {k: _pylist(frame[k]) for k in knobs}
    by_point = frame.groupby("point_id", observed=True, sort=False).indices
    sources = []
    for pid, sha in new.items():
        positions = by_point.get(pid)
        path = root / "points" / f"{pid}.jsonl"
        source = Source(path=str(path.resolve()), sha256=sha, kind="results")
        sources.append(source)
        if positions is None or not len(positions):
            continue
        first = int(positions[0])

        def at(name: str, i: int = first) -> Any:
            values = columns.get(name)
            return None if values is None else values[i]

        settings = sorted((k, str(knob_values[k][first])) for k in knobs if knob_values[k][first] is not None)
        hosts = at("hosts")
        info = RunInfo(common, engine=at("engine"), engine_version=at("engine_version"), backend=at("backend"),
                       hosts=hosts.split(",") if hosts else [], gpu=at("gpu"), nccl_version=at("nccl_version"),
                       point_id=pid, sweep_id=at("sweep_id"), settings_text=at("config"), settings=settings,
                       run_id=run_id_of(sha, 0), cluster=at("cluster"))
        stamps = {at("timestamp", int(i)) for i in positions}
        times = [t for t in map(parse_time, stamps - {None}) if t is not None]
        if times:
            info["run_time"], info["run_time_source"] = min(times), "record"
        tags = [(k, str(v).lower() if isinstance(v, bool) else str(v))
                for k, v in (("applied", at("applied")), ("failure", at("failure"))) if v is not None]
        rows = {name: [columns[name][int(i)] for i in positions] for name in _ROW_FIELDS if name in columns}
        rows["tags"] = [tags] * len(positions)
        source.rows.add_run(finish_run(info, ctx, path.stat().st_mtime, source), rows)
    return sources, len(hashes) - len(new)
