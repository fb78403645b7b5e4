"""The results directory of a sweep (DESIGN.md layout) and how progress is read back from it.

    DIR/sweep.json                  spec, plan, versions, hosts, topology hash
    DIR/points/<point_id>.jsonl     records of a finished point (temp file + rename: all or nothing)
    DIR/points/<point_id>.log       the point's stdout/stderr (appended across attempts)
    DIR/points/<point_id>.partial.jsonl   records of an attempt that did not finish (kept, never counted)
    DIR/points/<point_id>.check.json      what the NCCL log says about the forced settings
    DIR/failures.jsonl              one line per failed attempt: point id, reason, detail, log tail

A point is done when its ``.jsonl`` exists; nothing else marks progress, so a killed sweep resumes where
it stopped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from collscope.atomic import write_text_atomic
from collscope.collectives.record import Measurement, write_jsonl
from collscope.errors import ConfigError, ParseError
from collscope.results.decode import read_jsonl

__all__ = ["ResultsDir", "SweepStatus", "PointFailure", "FailureReason", "LOG_TAIL_CHARS"]

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
class SweepStatus:
    """Progress of a results directory (``collscope sweep status``): planned points and where each stands."""

    sweep_id: str | None
    points: int
    """Points in the plan."""
    done: int
    """Points whose ``.jsonl`` exists and that have no unresolved failure."""
    failed: int
    pending: int
    """Neither done nor failed: not run yet (or killed mid-run)."""
    skipped: int
    """Points the plan's constraints left out."""
    failure_reasons: dict[str, int] = field(default_factory=dict)
    """Failed points per reason."""
    failures: tuple[PointFailure, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``sweep status --json``: ``{"points", "done", "failed", "pending", ...}``."""
        return {"sweep_id": self.sweep_id, "points": self.points, "done": self.done, "failed": self.failed,
                "pending": self.pending, "skipped": self.skipped, "failure_reasons": dict(self.failure_reasons),
                "failures": [f.to_dict() for f in self.failures]}


@dataclass(frozen=True)
class ResultsDir:
    root: Path

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
        return self.points_dir / f"{point_id}.partial.jsonl"

    def log_path(self, point_id: str) -> Path:
        return self.points_dir / f"{point_id}.log"

    def check_path(self, point_id: str) -> Path:
        return self.points_dir / f"{point_id}.check.json"

    # ---- lifecycle ---------------------------------------------------------------------------
    def prepare(self, sweep_id: str, spec: dict[str, Any], plan: dict[str, Any], meta: dict[str, Any]) -> None:
        """Create the directory, or verify that an existing one belongs to the same sweep (resume).

        ``spec`` and ``plan`` are the JSON documents of the sweep's spec and plan (``Plan.to_dict()``).
        """
        self.points_dir.mkdir(parents=True, exist_ok=True)
        if self.sweep_json.exists():
            existing = self.read_sweep_json()
            if existing.get("sweep_id") != sweep_id:
                raise ConfigError(
                    f"{self.root} holds sweep {existing.get('sweep_id')!r}, not {sweep_id!r} (the spec or "
                    "options differ); use another --out, or the same spec and options to resume")
            return
        doc = {"sweep_id": sweep_id, "created_at": _now(), "spec": spec, "plan": plan,
               **meta}
        write_text_atomic(self.sweep_json, json.dumps(doc, indent=2, sort_keys=True) + "\n")

    def read_sweep_json(self) -> dict[str, Any]:
        try:
            data = json.loads(self.sweep_json.read_text())
        except FileNotFoundError as exc:
            raise ParseError(str(self.sweep_json), None, "a sweep results directory (sweep.json missing)") from exc
        except json.JSONDecodeError as exc:
            raise ParseError(str(self.sweep_json), exc.lineno, "JSON written by collscope sweep run") from exc
        if not isinstance(data, dict):
            raise ParseError(str(self.sweep_json), 1, "a JSON object")
        return data

    # ---- points ------------------------------------------------------------------------------
    def is_done(self, point_id: str) -> bool:
        return self.records_path(point_id).exists()

    def finish_point(self, point_id: str, records: Iterable[Measurement]) -> int:
        """Write the point's records atomically: after this the point is done."""
        n = write_jsonl(self.records_path(point_id), records)
        self.partial_path(point_id).unlink(missing_ok=True)
        if point_id in self.failures():
            self._append_failure_line({"point_id": point_id, "resolved": True, "time": _now()})
        return n

    def read_point(self, point_id: str) -> list[Measurement]:
        return read_jsonl(self.records_path(point_id))

    def write_check(self, point_id: str, check: dict[str, Any]) -> None:
        write_text_atomic(self.check_path(point_id), json.dumps(check, indent=2, sort_keys=True) + "\n")

    def record_failure(self, point_id: str, reason: str, detail: str, *, attempt_s: float | None = None) -> None:
        tail = ""
        log = self.log_path(point_id)
        if log.exists():
            tail = log.read_bytes()[-LOG_TAIL_CHARS:].decode("utf-8", "replace")
        self._append_failure_line({"point_id": point_id, "reason": reason, "detail": detail, "log_tail": tail,
                                   "duration_s": attempt_s, "time": _now()})

    def _append_failure_line(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True) + "\n"
        fd = os.open(self.failures_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def failures(self) -> dict[str, dict[str, Any]]:
        """The latest failure of each point (a half-written last line from a crash is ignored)."""
        out: dict[str, dict[str, Any]] = {}
        if not self.failures_path.exists():
            return out
        for line in self.failures_path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(entry, dict) or "point_id" not in entry:
                continue
            if entry.get("resolved"):  # a later attempt finished the point
                out.pop(str(entry["point_id"]), None)
            else:
                out[str(entry["point_id"])] = entry
        return out

    def status(self) -> SweepStatus:
        """How many planned points are done, failed and pending, with the failure reasons (DESIGN.md)."""
        meta = self.read_sweep_json()
        point_ids = [p["point_id"] for p in meta.get("plan", {}).get("points", [])]
        failures = self.failures()
        done = [p for p in point_ids if self.is_done(p) and p not in failures]
        failed = [p for p in point_ids if p in failures]
        pending = [p for p in point_ids if p not in done and p not in failed]
        reasons: dict[str, int] = {}
        for p in failed:
            reasons[failures[p]["reason"]] = reasons.get(failures[p]["reason"], 0) + 1
        return SweepStatus(
            sweep_id=meta.get("sweep_id"), points=len(point_ids), done=len(done), failed=len(failed),
            pending=len(pending), skipped=len(meta.get("plan", {}).get("skipped", [])), failure_reasons=reasons,
            failures=tuple(PointFailure(point_id=p, reason=failures[p]["reason"], detail=failures[p]["detail"])
                           for p in failed))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")

