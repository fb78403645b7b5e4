"""Whole-file writes that never leave a half-written file: temp file in the same directory, then rename."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (the temp name carries the pid, so concurrent writers of the
    same file, e.g. Slurm array shards writing sweep.json, never share a temp file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
