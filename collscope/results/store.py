"""The results directory of a sweep (DESIGN.md layout) and how progress is read back from it.

    DIR/sweep.json                  spec, plan, versions, hosts, topology hash
    DIR/points/<point_id>.jsonl     records of a finished point (temp file + rename: all or nothing)
    DIR/.lock                       held (flock) by the sweep writing here: :mod:`collscope.results.lock`
    DIR/points/<point_id>.log       the point's stdout/stderr (appended across attempts)
    DIR/points/<point_id>.<writer>.partial.jsonl   records of an attempt that did not finish (kept, never
                                    counted; ``<writer>`` is unique to the sweep process, so two never share one)
    DIR/points/<point_id>.check.json      what the NCCL log says about the forced settings
    DIR/failures.jsonl              one line per failed attempt: point id, reason, detail, log tail
    DIR/points/<point_id>.jsonl.damaged-<time>   a damaged records file (or log), moved aside by a resumed sweep
    DIR/points/<point_id>.<writer>.partial.jsonl.attempt-<time>   an earlier attempt's partial records, kept

A point is done when its ``.jsonl`` is a regular file of valid records that belong to it (point id, sweep id,
repeat, op and knobs as planned; :mod:`collscope.results.points`); nothing else marks progress, so a killed sweep
resumes where it stopped. A ``.jsonl`` that is empty, undecodable, a link, not a regular file or another point's
makes its point *damaged*: never done, listed by ``sweep status``, moved aside (never deleted) and run again by
a resumed sweep, an error for ``load_results``. One this user may not read is *unreadable*: listed, never moved,
and a resume is refused until its permissions are fixed.

Nothing in the directory is followed: every file is read and written with ``O_NOFOLLOW``
(:mod:`collscope.atomic`, :mod:`collscope.results.logs`); ``points/``, ``sweep.json`` or ``failures.jsonl``
being a symbolic link is an error naming it; a point's records file or log that is a link is moved aside.
New files get the umask's mode. ``failures.jsonl`` is append-only: a cut last line is repaired by the next
append and skipped, with a note, by readers.

``sweep.json`` and ``failures.jsonl`` are decoded strictly (:mod:`collscope.results.schema`): a wrong type, a
missing required field or an unknown field is a ParseError naming the file, the line and the field. Every file
is read through :func:`collscope.files.read_input_bytes` (a FIFO is refused, never opened for a blocking read).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from collscope.atomic import append_bytes, write_bytes_atomic, write_text_atomic
from collscope.collectives.record import Measurement
from collscope.errors import ConfigError, ParseError
from collscope.files import decode_text, kind_of, read_input_bytes
from collscope.results.lock import writer_lock
from collscope.results.logs import PointLog, open_log, read_log_tail
from collscope.results.points import PlannedPoint, PointFile, inspect_point_file, move_aside, read_point_file
from collscope.results.schema import (
    FailureEntry,
    SweepDoc,
    convert_doc,
    decode_failure_lines,
    decode_json_doc,
)

__all__ = ["ResultsDir", "SweepStatus", "PointFailure", "DamagedPoint", "FailureReason", "LOG_TAIL_CHARS"]

log = logging.getLogger(__name__)

FailureReason = Literal["timeout", "exit code", "parse error", "wrong values", "setting not applied", "launch error"]
LOG_TAIL_CHARS = 4000


@dataclass(frozen=True, slots=True, kw_only=True)
class PointFailure:
    """The latest unresolved failure of one point."""

    point_id: str
    reason: str
    """One of :data:`FailureReason` (as written in ``failures.jsonl``)."""
    detail: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"point_id": self.point_id, "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True, slots=True, kw_only=True)
class DamagedPoint:
    """A planned point whose records file exists but cannot count as done."""

    point_id: str
    problem: str
    """The ParseError's message: file, line, what was expected and found."""

    def to_dict(self) -> dict[str, Any]:
        return {"point_id": self.point_id, "problem": self.problem}


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepStatus:
    """Progress of a results directory (``collscope sweep status``): planned points and where each stands."""

    sweep_id: str | None
    points: int
    """Points in the plan."""
    done: int
    """Points whose ``.jsonl`` holds valid records and that have no unresolved failure."""
    failed: int
    """Points whose latest attempt failed (and whose file, if any, is not damaged)."""
    pending: int
    """Neither done, failed nor damaged: not run yet (or killed mid-run)."""
    skipped: int
    """Points the plan's constraints left out."""
    failure_reasons: dict[str, int] = field(default_factory=dict)
    """Failed points per reason."""
    failures: tuple[PointFailure, ...] = ()
    damaged: int = 0
    """Points whose ``.jsonl`` exists but is empty, undecodable or not a regular file (never done; a resumed
    sweep moves the file aside and runs the point again)."""
    damaged_points: tuple[DamagedPoint, ...] = ()
    unreadable: int = 0
    """Points whose ``.jsonl`` this user may not read (EACCES): neither done nor damaged; fix the permissions."""
    unreadable_points: tuple[DamagedPoint, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``sweep status --json``: ``{"points", "done", "failed", "pending", "damaged", ...}``."""
        return {"sweep_id": self.sweep_id, "points": self.points, "done": self.done, "failed": self.failed,
                "pending": self.pending, "damaged": self.damaged, "skipped": self.skipped,
                "failure_reasons": dict(self.failure_reasons), "failures": [f.to_dict() for f in self.failures],
                "damaged_points": [d.to_dict() for d in self.damaged_points], "unreadable": self.unreadable,
                "unreadable_points": [d.to_dict() for d in self.unreadable_points]}


def _writer_tag() -> str:
    return f"w{os.getpid()}-{os.urandom(3).hex()}"


@dataclass(frozen=True)
class ResultsDir:
    root: Path
    writer: str = field(default_factory=_writer_tag, compare=False)
    """Names this writer's partial files (unique per sweep process: two attempts never share one)."""
    _plan_cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def points_dir(self) -> Path:
        return self.root / "points"

    @property
    def sweep_json(self) -> Path:
        return self.root / "sweep.json"

    @property
    def failures_path(self) -> Path:
        return self.root / "failures.jsonl"

    def records_path(self, point_id: str) -> Path:
        return self.points_dir / f"{point_id}.jsonl"

    def partial_path(self, point_id: str) -> Path:
        return self.points_dir / f"{point_id}.{self.writer}.partial.jsonl"

    def log_path(self, point_id: str) -> Path:
        return self.points_dir / f"{point_id}.log"

    def check_path(self, point_id: str) -> Path:
        return self.points_dir / f"{point_id}.check.json"

    # ---- lifecycle ---------------------------------------------------------------------------
    def lock(self, shard: tuple[int, int] | None = None) -> Any:
        """A context manager holding the directory for this sweep (:func:`collscope.results.lock.writer_lock`)."""
        return writer_lock(self.root, shard)

    def prepare(self, sweep_id: str, spec: dict[str, Any], plan: dict[str, Any], meta: dict[str, Any]) -> None:
        """Create the directory, or verify that an existing one belongs to the same sweep (resume).

        ``spec`` and ``plan`` are the JSON documents of the sweep's spec and plan (``Plan.to_dict()``). An
        existing ``sweep.json`` that is damaged is a ParseError (nothing is overwritten).
        """
        for fixed in (self.points_dir, self.sweep_json, self.failures_path, self.root / "workers"):
            if os.path.islink(fixed):
                raise ConfigError(f"{fixed}: a symbolic link (to {os.readlink(fixed)}), never followed: collscope "
                                  "writes only into the results directory itself; move it away or use another --out")
        try:
            self.points_dir.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ConfigError(f"{self.points_dir}: {_kind(self.points_dir)}, not the points/ directory of a "
                              "results directory; use another --out") from None
        except OSError as exc:
            raise ConfigError(f"{self.points_dir}: cannot be created ({exc.strerror or exc})") from None
        self._refuse_unreadable(plan)
        if os.path.lexists(self.sweep_json):
            existing = self.read_sweep()
            if existing.sweep_id != sweep_id:
                raise ConfigError(
                    f"{self.root} holds sweep {existing.sweep_id!r}, not {sweep_id!r} (the spec or "
                    "options differ); use another --out, or the same spec and options to resume")
            return
        doc = {"sweep_id": sweep_id, "created_at": _now(), "spec": spec, "plan": plan,
               **meta}
        write_text_atomic(self.sweep_json, json.dumps(doc, indent=2, sort_keys=True) + "\n")

    def _refuse_unreadable(self, plan: dict[str, Any]) -> None:
        """ConfigError when planned points' records files exist but may not be read by this user (EACCES): a
        resume must neither count them nor measure them again over a colleague's results."""
        points = plan.get("points") if isinstance(plan, dict) else None
        ids = [p.get("point_id") for p in points or [] if isinstance(p, dict)]
        denied = []
        for pid in ids:
            if not isinstance(pid, str):
                continue
            try:
                os.close(os.open(self.records_path(pid), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK))
            except PermissionError:
                denied.append(self.records_path(pid).name)
            except OSError:
                pass
        if denied:
            raise ConfigError(f"{self.points_dir}: {len(denied)} point file(s) this user may not read (Permission "
                              f"denied: {', '.join(denied[:3])}{', ...' if len(denied) > 3 else ''}); they are "
                              "neither redone nor moved: ask their owner for group read (chmod g+r) or use another "
                              "--out")

    def read_sweep_json(self) -> dict[str, Any]:
        """``sweep.json`` as its JSON object, after a strict check against :class:`SweepDoc` (ParseError naming
        the field otherwise); the object itself, so that a rewrite keeps every field as it was."""
        doc, _ = self._sweep_doc()
        return dict(doc)

    def read_sweep(self) -> SweepDoc:
        """``sweep.json`` as a typed :class:`SweepDoc` (strict: ParseError naming the field)."""
        return self._sweep_doc()[1]

    def _sweep_doc(self) -> tuple[dict[str, Any], SweepDoc]:
        source = str(self.sweep_json)
        if not os.path.lexists(self.sweep_json):
            raise ParseError(source, None, "a sweep results directory (sweep.json missing)")
        text = decode_text(read_input_bytes(self.sweep_json, "sweep.json written by collscope sweep run",
                                            follow_links=False), source,
                           "sweep.json written by collscope sweep run (UTF-8 JSON)")
        doc = decode_json_doc(text, source, what="JSON written by collscope sweep run")
        typed = convert_doc(doc, SweepDoc, source, None, root="sweep.json")
        return doc, typed

    def check_layout(self) -> None:
        """ParseError when ``points/`` is missing or not a directory (``sweep.json`` is checked when read)."""
        if not self.points_dir.is_dir():
            raise ParseError(str(self.points_dir), None, "the points/ directory of a sweep results directory "
                             "(sweep.json, points/, failures.jsonl)", found=_kind(self.points_dir))

    # ---- points ------------------------------------------------------------------------------
    def planned(self, point_id: str) -> PlannedPoint | None:
        """What the plan in ``sweep.json`` says the point's records must carry (None: not planned, no sweep.json,
        a locate directory)."""
        try:
            st = os.stat(self.sweep_json, follow_symlinks=False)
        except OSError:
            return None
        key = f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"
        if self._plan_cache.get("key") != key:
            try:
                doc = self.read_sweep()
            except ParseError:
                return None
            swept = frozenset(k for p in doc.plan.points for k in p.settings)
            kept = frozenset(str(s["name"]) for s in (doc.inherited_env or {}).get("settings") or []
                             if isinstance(s, dict) and s.get("action") == "kept" and isinstance(s.get("name"), str))
            self._plan_cache.clear()
            self._plan_cache.update(key=key, points={p.point_id: PlannedPoint(
                point_id=p.point_id, sweep_id=doc.sweep_id, op=p.op, repeat=p.repeat, settings=dict(p.settings),
                varied=swept, inherited=kept) for p in doc.plan.points} if doc.kind == "sweep" else {})
        planned: PlannedPoint | None = self._plan_cache["points"].get(point_id)
        return planned

    def point_file(self, point_id: str) -> PointFile:
        """Whether the point's records file is missing, done (valid records of this point), damaged (and why) or
        unreadable."""
        return inspect_point_file(self.records_path(point_id), self.planned(point_id))

    def is_done(self, point_id: str) -> bool:
        """The point's ``.jsonl`` is a regular file of valid records (a damaged file is not done)."""
        return self.point_file(point_id).state == "done"

    def move_aside(self, point_id: str) -> Path:
        """Rename the point's damaged records file to ``<id>.jsonl.damaged-<time>`` (never deleted); its new path."""
        return move_aside(self.records_path(point_id))

    def finish_point(self, point_id: str, records: Iterable[Measurement]) -> int:
        """Write the point's records atomically (a link under the name is replaced, never written through; the
        umask's mode): after this the point is done."""
        lines = [json.dumps(r.to_dict(), sort_keys=True, separators=(",", ":")) + "\n" for r in records]
        self._check_points_dir()
        write_bytes_atomic(self.records_path(point_id), "".join(lines).encode())
        n = len(lines)
        self.partial_path(point_id).unlink(missing_ok=True)
        if point_id in self.failures():
            self._append_failure_line({"point_id": point_id, "resolved": True, "time": _now()})
        return n

    def read_point(self, point_id: str) -> list[Measurement]:
        """The point's records; ParseError naming the file when it is damaged (empty, undecodable, a FIFO...)."""
        return read_point_file(self.records_path(point_id))

    def write_check(self, point_id: str, check: dict[str, Any]) -> None:
        self._check_points_dir()
        write_text_atomic(self.check_path(point_id), json.dumps(check, indent=2, sort_keys=True) + "\n")

    def _check_points_dir(self) -> None:
        """ConfigError when ``points/`` is not a real directory (a link planted after the sweep started)."""
        try:
            mode = os.lstat(self.points_dir).st_mode
        except OSError as exc:
            raise ConfigError(f"{self.points_dir}: {exc.strerror or exc}") from None
        if not stat.S_ISDIR(mode):
            raise ConfigError(f"{self.points_dir}: {kind_of(mode) if not stat.S_ISLNK(mode) else 'a symbolic link'}"
                              ", not the points/ directory; never followed")

    def open_log(self, point_id: str, suffix: str = ".log", *, truncate: bool = False) -> PointLog:
        """The point's log (``suffix`` ``.verify.log``: its verification run's), opened without following a link
        (:func:`collscope.results.logs.open_log`); the caller closes it."""
        self._check_points_dir()
        return open_log(self.points_dir / f"{point_id}{suffix}", truncate=truncate)

    def append_log(self, point_id: str, text: str) -> str | None:
        """Append ``text`` to the point's log; the note when something under its name was moved aside."""
        with self.open_log(point_id) as log:
            log.write(text)
            return log.note

    def record_failure(self, point_id: str, reason: str, detail: str, *, attempt_s: float | None = None,
                       log_tail: str | None = None) -> None:
        """One failed attempt in ``failures.jsonl``, with ``log_tail`` (else the log's tail, read without following
        a link: a link, a FIFO or a hard link is said, never read)."""
        tail = log_tail[-LOG_TAIL_CHARS:] if log_tail is not None else read_log_tail(self.log_path(point_id),
                                                                                      LOG_TAIL_CHARS)
        self._append_failure_line({"point_id": point_id, "reason": reason, "detail": detail, "log_tail": tail,
                                   "duration_s": attempt_s, "time": _now()})

    def _append_failure_line(self, entry: dict[str, Any]) -> None:
        append_bytes(self.failures_path, (json.dumps(entry, sort_keys=True) + "\n").encode())

    def failures(self) -> dict[str, FailureEntry]:
        """The latest unresolved failure of each point.

        Strict (:func:`~collscope.results.schema.decode_failure_lines`): only a half-written last line is skipped,
        with a warning; any other bad line is a ParseError naming it.
        """
        out: dict[str, FailureEntry] = {}
        if not os.path.lexists(self.failures_path):
            return out
        source = str(self.failures_path)
        entries, notes = decode_failure_lines(read_input_bytes(self.failures_path, "failures.jsonl",
                                                               follow_links=False), source)
        for note in notes:
            log.warning("%s", note)
        for entry in entries:
            if isinstance(entry, FailureEntry):
                out[entry.point_id] = entry
            else:  # a later attempt finished the point
                out.pop(entry.point_id, None)
        return out

    def status(self) -> SweepStatus:
        """How many planned points are done, failed, damaged and pending, with the failure reasons (DESIGN.md).

        Damaged points (a records file that exists but is empty, undecodable or not a regular file) are neither
        done nor failed: they are counted apart with their problem, whatever failures.jsonl says of them.
        """
        meta = self.read_sweep()
        self.check_layout()
        point_ids = [p.point_id for p in meta.plan.points]
        failures = self.failures()
        files = {p: self.point_file(p) for p in point_ids}
        damaged = [p for p in point_ids if files[p].state == "damaged"]
        unreadable = [p for p in point_ids if files[p].state == "unreadable"]
        failed = [p for p in point_ids if p in failures and files[p].state not in ("damaged", "unreadable")]
        done = [p for p in point_ids if files[p].state == "done" and p not in failures]
        pending = [p for p in point_ids if files[p].state == "missing" and p not in failures]
        reasons: dict[str, int] = {}
        for p in failed:
            reasons[failures[p].reason] = reasons.get(failures[p].reason, 0) + 1
        return SweepStatus(
            sweep_id=meta.sweep_id, points=len(point_ids), done=len(done), failed=len(failed),
            pending=len(pending), skipped=len(meta.plan.skipped), failure_reasons=reasons,
            failures=tuple(PointFailure(point_id=p, reason=failures[p].reason, detail=failures[p].detail)
                           for p in failed),
            damaged=len(damaged),
            damaged_points=tuple(DamagedPoint(point_id=p, problem=str(files[p].problem)) for p in damaged),
            unreadable=len(unreadable),
            unreadable_points=tuple(DamagedPoint(point_id=p, problem=str(files[p].problem)) for p in unreadable))


def _kind(path: Path) -> str:
    try:
        return kind_of(path.stat().st_mode)
    except FileNotFoundError:
        return "a symlink to a missing target" if path.is_symlink() else "no such directory"
    except OSError as exc:
        return exc.strerror or str(exc)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")

