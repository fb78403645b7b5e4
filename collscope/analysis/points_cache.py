"""The Parquet cache of a results directory's points: load_results reads a million records in a second, not six.

The JSONL point files stay the crash-safe source of truth; the cache only saves decoding them again. It lives in
``<results>/.collscope-cache/points.parquet``: one row per record, the columns of
:class:`~collscope.analysis.record_columns.RecordColumns` (checked on the way in: every row was decoded strictly from
its JSONL and passed the point checks before it was cached), and in the file's metadata a manifest: per point file
its name, its identity when cached (inode, size and modification time in ns), and its ``check.json`` verdict with
that file's identity; the identity of ``sweep.json`` (another plan checks points against other settings, so
nothing is reused).

A point file is reused only while its identity is unchanged; a changed, new, vanished or replaced file (or
check file) is read again, and the cache is rewritten (a temporary file renamed over it: a reader never sees half a
cache). A cache that is unreadable, of another version or inconsistent is ignored and rewritten, never trusted.
Writing is best effort: a read-only results directory (a shared archive) is loaded from JSONL every time, and
:func:`cache_note` says why.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from collscope.analysis.record_columns import FIELDS, RecordColumns, from_arrow, to_arrow

__all__ = ["CACHE_MIN_RECORDS", "CACHE_DIR", "CACHE_FILE", "FileKey", "CachedPoints", "file_key", "read_cache",
           "write_cache", "take"]

CACHE_MIN_RECORDS = 20_000
"""A results directory gets a cache once it holds this many records (decoding fewer takes a few tenths of a
second); one that has a cache keeps it up to date whatever its size."""
CACHE_DIR = ".collscope-cache"
CACHE_FILE = "points.parquet"
_META_KEY = b"collscope.points_cache"
_VERSION = "1:" + hashlib.sha256(",".join(FIELDS).encode()).hexdigest()[:12]
"""The cache's layout version and the Measurement fields it holds: another collscope's cache is not reused."""

FileKey = tuple[int, int, int]
"""(inode, size, mtime in ns) of a regular file."""


def file_key(path: str) -> FileKey | None:
    """The identity of the regular file at ``path`` (never following a link); None when it is anything else."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class CachedPoints:
    """What a cache holds: per point file (in the order of ``names``) its identity, its check verdict and the
    identity of its check file, and all their rows (``columns.part`` indexes ``names``)."""

    sweep_key: FileKey | None
    names: list[str]
    keys: list[FileKey]
    checks: list[tuple[FileKey | None, bool | None]]
    columns: RecordColumns


def _path(root: Path) -> Path:
    return root / CACHE_DIR / CACHE_FILE


def _key(value: Any) -> FileKey | None:
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 3 and all(type(v) is int for v in value)):
        raise ValueError("a file identity is [inode, size, mtime_ns]")
    return (value[0], value[1], value[2])


def read_cache(root: Path) -> CachedPoints | None:
    """The cache of the results directory ``root``; None when there is none, or it cannot be trusted (module doc)."""
    path = _path(root)
    if file_key(str(path)) is None:
        return None
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        meta = json.loads((table.schema.metadata or {})[_META_KEY])
        if meta.get("version") != _VERSION:
            return None
        files = meta["files"]
        names = [str(f[0]) for f in files]
        keys = [_key(f[1]) for f in files]
        checks = [(_key(f[2]), f[3] if isinstance(f[3], bool) else None) for f in files]
        columns = from_arrow(table.replace_schema_metadata(None), len(names))
        counts = np.bincount(columns.part, minlength=len(names)) if len(columns) else np.zeros(len(names), int)
        if len(counts) != len(names) or (counts == 0).any() or (len(columns) and (np.diff(columns.part) < 0).any()):
            return None  # rows of a file not adjacent, a file without rows, or rows of no file
        if any(k is None for k in keys):
            return None
        return CachedPoints(_key(meta.get("sweep")), names, [k for k in keys if k is not None], checks, columns)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    except Exception as exc:  # pyarrow's own errors (ArrowInvalid...) when the file is not a cache we wrote
        if type(exc).__module__.startswith("pyarrow"):
            return None
        raise


def write_cache(root: Path, cached: CachedPoints) -> str | None:
    """Write ``cached`` as the cache of ``root`` (a temporary file renamed over the old one); None when written,
    else why not (a read-only directory, a full disk: loading works without it)."""
    import pyarrow.parquet as pq

    folder = root / CACHE_DIR
    path = _path(root)
    tmp = folder / f".{CACHE_FILE}.{os.getpid()}.tmp"
    meta = {"version": _VERSION, "sweep": None if cached.sweep_key is None else list(cached.sweep_key),
            "files": [[n, list(k), None if c[0] is None else list(c[0]), c[1]]
                      for n, k, c in zip(cached.names, cached.keys, cached.checks, strict=True)]}
    try:
        if os.path.lexists(folder) and not folder.is_dir() or folder.is_symlink():
            return f"{folder} is not a directory"
        folder.mkdir(exist_ok=True)
        table = to_arrow(cached.columns)
        table = table.replace_schema_metadata({_META_KEY: json.dumps(meta, separators=(",", ":")).encode()})
        pq.write_table(table, tmp, row_group_size=max(1, table.num_rows), compression="lz4")
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return f"{path} not written ({exc.strerror or exc})"
    return None


def take(columns: RecordColumns, parts: Sequence[int]) -> RecordColumns:
    """The rows of the given parts of ``columns`` (in that order), renumbered 0..len(parts)-1."""
    wanted = np.asarray(parts, dtype=np.int64)
    counts = np.bincount(columns.part, minlength=columns.nparts)
    starts = np.concatenate([[0], np.cumsum(counts)])
    if len(wanted) == columns.nparts and (wanted == np.arange(len(wanted))).all():
        return columns
    index = np.concatenate([np.arange(starts[p], starts[p + 1]) for p in wanted]) if len(wanted) else \
        np.empty(0, dtype=np.int64)
    out = RecordColumns(part=np.repeat(np.arange(len(wanted), dtype=np.int32), counts[wanted]), nparts=len(wanted))
    out.typed = {k: v[index] for k, v in columns.typed.items()}
    out.nullable = {k: (v[index], m[index]) for k, (v, m) in columns.nullable.items()}
    out.coded = {k: (c[index], u) for k, (c, u) in columns.coded.items()}
    out.settings = (columns.settings[0][index], columns.settings[1])
    return out
