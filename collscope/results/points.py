"""The records file of one point (``points/<point_id>.jsonl``): missing, done, or damaged, and why.

A point is done only when its ``.jsonl`` is a regular file holding at least one valid Measurement record. A file
that is empty, not UTF-8 JSON lines, of wrong types, cut mid-line, or not a regular file (a FIFO, a directory, a
dangling symlink) is *damaged*: it is never counted as done and never opened for a blocking read
(:func:`collscope.files.read_input_bytes`); a resumed sweep moves it aside (:func:`move_aside`, never deleted)
before running the point again (``<point_id>.jsonl.damaged-<UTC time>``, ``-<n>`` added when taken).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from collscope.collectives.record import Measurement
from collscope.errors import ParseError
from collscope.files import read_input_bytes
from collscope.results.decode import decode_records

__all__ = ["PointFile", "PointState", "DamagedPointsError", "inspect_point_file", "read_point_file", "move_aside"]

PointState = Literal["missing", "done", "damaged"]
EXPECTED_POINT = "a Measurement JSONL file (the records of a finished point)"


@dataclass(frozen=True, slots=True, kw_only=True)
class PointFile:
    """Where one point's records file stands."""

    path: Path
    state: PointState
    problem: ParseError | None = None
    """Damaged: what is wrong (file, line and field)."""
    records: tuple[Measurement, ...] = ()
    """Done: the point's records."""


def read_point_file(path: Path | str) -> list[Measurement]:
    """The records of a finished point; ParseError naming the file (and line) when the file is damaged."""
    data = read_input_bytes(path, EXPECTED_POINT)
    records = decode_records(data, str(path))
    if not records:
        raise ParseError(str(path), None, "at least one Measurement record (a finished point has some)",
                         found="an empty file" if not data else "only blank lines")
    return records


def inspect_point_file(path: Path) -> PointFile:
    """Missing (nothing at ``path``, not even a link), done (with its records) or damaged (with the problem)."""
    if not os.path.lexists(path):
        return PointFile(path=path, state="missing")
    try:
        records = read_point_file(path)
    except ParseError as exc:
        return PointFile(path=path, state="damaged", problem=exc)
    return PointFile(path=path, state="done", records=tuple(records))


def move_aside(path: Path, label: str = "damaged") -> Path:
    """Rename ``path`` to ``<name>.<label>-<UTC time>`` next to it (never deleted); the new path.

    ``damaged``: a records file or log that cannot be used; ``attempt``: the partial records of an earlier attempt.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.{label}-{stamp}")
    n = 1
    while os.path.lexists(target):
        n += 1
        target = path.with_name(f"{path.name}.{label}-{stamp}-{n}")
    os.rename(path, target)
    return target


class DamagedPointsError(ParseError):
    """Points of a results directory whose records files are damaged: one line per file, after a header."""

    def __init__(self, root: str, problems: list[ParseError]) -> None:
        self.problems = list(problems)
        super().__init__(root, None, "records files that are all whole", found=f"{len(problems)} damaged")

    def _message(self) -> str:
        head = (f"{self.source}: {len(self.problems)} damaged point file(s), nothing was analysed (rerun the same "
                "`collscope sweep run ... --out` to move them aside and measure those points again):")
        return "\n".join([head, *(f"  {p}" for p in self.problems)])
