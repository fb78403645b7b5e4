"""The records file of one point (``points/<point_id>.jsonl``): missing, done, damaged or unreadable, and why.

A point is done only when its ``.jsonl`` is a regular file holding at least one valid Measurement record, and
(given the plan: :class:`PlannedPoint`) every record belongs to it: its point id, sweep id, repeat and op are the
planned ones, the knobs the sweep varies have the point's values, and no (size, repeat) appears twice. A file
that is empty, not UTF-8 JSON lines, of wrong types, cut mid-line, not a regular file (a FIFO, a directory), a
symbolic link (never followed) or holding another point's records is *damaged*: it is never counted as done and
never opened for a blocking read (:func:`collscope.files.read_input_bytes`); a resumed sweep moves it aside
(:func:`move_aside`, never deleted) before running the point again (``<point_id>.jsonl.damaged-<UTC time>``,
``-<n>`` added when taken). A file this user may not read (EACCES: another member of a group that shares the
directory wrote it without group read) is *unreadable*: never damaged, never moved aside.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from collscope.collectives.record import Measurement
from collscope.errors import ParseError
from collscope.files import UnreadableFileError, read_input_bytes
from collscope.results.decode import decode_records

__all__ = ["PointFile", "PointState", "PlannedPoint", "DamagedPointsError", "inspect_point_file", "read_point_file",
           "move_aside", "foreign_records", "not_its_records"]

PointState = Literal["missing", "done", "damaged", "unreadable"]
EXPECTED_POINT = "a Measurement JSONL file (the records of a finished point)"


@dataclass(frozen=True, slots=True, kw_only=True)
class PointFile:
    """Where one point's records file stands."""

    path: Path
    state: PointState
    problem: ParseError | None = None
    """Damaged or unreadable: what is wrong (file, line and field; or the permission)."""
    records: tuple[Measurement, ...] = ()
    """Done: the point's records."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedPoint:
    """What the plan says a point's records must carry (``sweep.json``'s plan point and sweep id)."""

    point_id: str
    sweep_id: str
    op: str | None = None
    repeat: int | None = 0
    """None: the plan does not say (an older sweep.json); not checked."""
    settings: dict[str, str] | None = None
    """The point's forced knobs (env var -> value); None: not checked."""
    varied: frozenset[str] = frozenset()
    """Knobs some point of the plan forces: a record of this point carries the point's value or none."""
    inherited: frozenset[str] = frozenset()
    """Knobs the sweep kept from the environment (``--keep-env``): a record may carry them unforced."""


def foreign_records(records: list[Measurement] | tuple[Measurement, ...], planned: PlannedPoint) -> str | None:
    """Why ``records`` are not the planned point's (the first reason), or None when they all belong to it."""
    seen: set[tuple[int, bool, int]] = set()
    for n, r in enumerate(records, 1):
        for name, have, want in (("point_id", r.point_id, planned.point_id), ("sweep_id", r.sweep_id, planned.sweep_id),
                                 ("repeat", r.repeat, planned.repeat), ("op", r.op, planned.op)):
            if want is not None and have is not None and have != want:  # None: not recorded (older records)
                return f"record {n} has {name} {have!r}, the plan says {want!r} (another point's records?)"
        if planned.settings is not None:
            for knob in sorted(planned.varied | set(planned.settings)):
                want_value = planned.settings.get(knob)
                have_value = r.settings.get(knob)
                if have_value != want_value and not (want_value is None and knob in planned.inherited):
                    return (f"record {n} has {knob}={have_value!r}, the plan says {want_value!r} (another "
                            "configuration's records?)")
        key = (r.size_bytes, r.in_place, r.repeat)  # nccl-tests writes an out-of-place and an in-place record
        if key in seen:
            return (f"record {n} repeats size {r.size_bytes} ({'in' if r.in_place else 'out of'} place) of repeat "
                    f"{r.repeat} (records written twice?)")
        seen.add(key)
    return None


def read_point_file(path: Path | str) -> list[Measurement]:
    """The records of a finished point; ParseError naming the file (and line) when the file is damaged (a
    symbolic link is refused, never followed; :class:`~collscope.files.UnreadableFileError` when it may not be
    read)."""
    data = read_input_bytes(path, EXPECTED_POINT, follow_links=False)
    records = decode_records(data, str(path))
    if not records:
        raise ParseError(str(path), None, "at least one Measurement record (a finished point has some)",
                         found="an empty file" if not data else "only blank lines")
    return records


def inspect_point_file(path: Path, planned: PlannedPoint | None = None) -> PointFile:
    """Missing (nothing at ``path``, not even a link), done (with its records), damaged (with the problem) or
    unreadable (EACCES); with ``planned``, records that are not that point's make the file damaged."""
    if not os.path.lexists(path):
        return PointFile(path=path, state="missing")
    try:
        records = read_point_file(path)
    except UnreadableFileError as exc:
        return PointFile(path=path, state="unreadable", problem=exc)
    except ParseError as exc:
        return PointFile(path=path, state="damaged", problem=exc)
    problem = not_its_records(path, records, planned)
    if problem is not None:
        return PointFile(path=path, state="damaged", problem=problem)
    return PointFile(path=path, state="done", records=tuple(records))


def not_its_records(path: Path | str, records: list[Measurement], planned: PlannedPoint | None) -> ParseError | None:
    """The ParseError that makes ``path`` damaged when its records are not ``planned``'s (None: they are, or
    there is no plan to check them against)."""
    why = foreign_records(records, planned) if planned is not None else None
    if planned is None or why is None:
        return None
    return ParseError(str(path), None, f"only the records of point {planned.point_id} ({why})")


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
        denied = sum(isinstance(p, UnreadableFileError) for p in self.problems)
        damaged = len(self.problems) - denied
        parts = [f"{damaged} damaged point file(s)"] if damaged else []
        if denied:
            parts.append(f"{denied} point file(s) this user may not read (ask their owner for chmod g+r)")
        head = (f"{self.source}: {', '.join(parts)}, nothing was analysed" + (
            " (rerun the same `collscope sweep run ... --out` to move the damaged ones aside and measure those "
            "points again)" if damaged else "") + ":")
        return "\n".join([head, *(f"  {p}" for p in self.problems)])
