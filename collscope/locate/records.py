"""Locate's results directory: the sweep layout, so ``collscope analyze`` and ``report`` read it.

    DIR/sweep.json                  kind "locate": nodes, rails, options, and the plan (one point per test)
    DIR/locate.json                 the ``locate --json`` document (rounds, tests, suspects, exclude)
    DIR/points/<point_id>.jsonl     the Measurement records of one test (one per repeat, point_id set)
    DIR/points/<point_id>.log       the logs of the test's steps
    DIR/failures.jsonl              tests that failed or timed out (reason, detail, log tail)
    DIR/steps/                      the raw step files (rank 0's record and output per step)

Points are written as each round ends (:meth:`LocateWriter.on_round`), so a killed locate leaves the rounds it
finished; ``sweep.json`` and ``locate.json`` are rewritten at the end.

Nothing is followed: a link under any of the names above is refused before the first test (as ``sweep run``
refuses one); a point's log is written through :meth:`~collscope.results.store.ResultsDir.open_log` (a link or a
hard link under its name moved aside, never written through), and the step logs it copies are read with
``O_NOFOLLOW`` (a step log that became a link is named, never read).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from collscope.atomic import UnsafeFileError, write_text_atomic
from collscope.errors import ParseError
from collscope.files import absolute_path, read_input_bytes
from collscope.locate.model import TestResult
from collscope.results.store import ResultsDir

__all__ = ["LocateWriter"]

_log = logging.getLogger(__name__)
_FIXED = ("points", "steps", "sweep.json", "failures.jsonl", "locate.json")
"""The names locate writes under its ``--out``: none may be a link."""


def _step_log_text(path: str) -> str:
    """A step log's text, read without following a link ('' when it is gone; a line saying why when it cannot
    be read: a link, a FIFO)."""
    if not os.path.lexists(path):
        return ""
    try:
        return read_input_bytes(path, "a locate step log", follow_links=False).decode("utf-8", "replace")
    except ParseError as exc:
        return f"(step log not read: {exc})\n"


class LocateWriter:
    """Writes one locate run under ``root``; ``sweep_id`` names it in every record."""

    def __init__(self, root: Path, *, sweep_id: str, spec: dict[str, Any]) -> None:
        root = absolute_path(root, "locate --out")
        self.results = ResultsDir(root)
        self.sweep_id = sweep_id
        self.spec = spec
        self.points: list[dict[str, Any]] = []
        for name in _FIXED:
            if os.path.islink(root / name):
                raise UnsafeFileError(root / name, f"a symbolic link (to {os.readlink(root / name)}), never followed")
        self.results.points_dir.mkdir(parents=True, exist_ok=True)

    @property
    def steps_dir(self) -> Path:
        return self.results.root / "steps"

    def on_round(self, round_no: int, tests: Sequence[TestResult]) -> None:
        for test in tests:
            pid = test.point_id
            self.points.append({"point_id": pid, "round": round_no, "kind": test.spec.kind,
                                "nodes": list(test.spec.nodes), "rail": test.spec.rail})
            text = "".join(_step_log_text(p) for p in test.outcome.logs)
            if test.outcome.detail and not text:
                text = test.outcome.detail + "\n"
            if text:
                with self.results.open_log(pid, truncate=True) as log:
                    log.write(text)
                    if log.note:
                        _log.warning("%s", log.note)
            if test.outcome.failure is not None:
                self.results.record_failure(pid, "timeout" if test.outcome.failure == "timeout" else "exit code",
                                            test.outcome.detail, attempt_s=test.outcome.duration_s)
            elif test.outcome.records:
                self.results.finish_point(pid, [msgspec.structs.replace(r, point_id=pid, sweep_id=self.sweep_id)
                                                for r in test.outcome.records])
        self._write_sweep_json()

    def _write_sweep_json(self) -> None:
        doc = {"sweep_id": self.sweep_id, "kind": "locate", "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "spec": self.spec, "plan": {"points": self.points, "skipped": []}}
        write_text_atomic(self.results.sweep_json, json.dumps(doc, indent=2, sort_keys=True) + "\n")

    def finish(self, document: dict[str, Any]) -> None:
        self._write_sweep_json()
        write_text_atomic(self.results.root / "locate.json", json.dumps(document, indent=2) + "\n")
