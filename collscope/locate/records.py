"""Locate's results directory: the sweep layout, so ``collscope analyze`` and ``report`` read it.

    DIR/sweep.json                  kind "locate": nodes, rails, options, and the plan (one point per test)
    DIR/locate.json                 the ``locate --json`` document (rounds, tests, suspects, exclude)
    DIR/points/<point_id>.jsonl     the Measurement records of one test (one per repeat, point_id set)
    DIR/points/<point_id>.log       the logs of the test's steps
    DIR/failures.jsonl              tests that failed or timed out (reason, detail, log tail)
    DIR/steps/                      the raw step files (rank 0's record and output per step)

Points are written as each round ends (:meth:`LocateWriter.on_round`), so a killed locate leaves the rounds it
finished; ``sweep.json`` and ``locate.json`` are rewritten at the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from collscope.atomic import write_text_atomic
from collscope.locate.model import TestResult
from collscope.results.store import ResultsDir

__all__ = ["LocateWriter"]


class LocateWriter:
    """Writes one locate run under ``root``; ``sweep_id`` names it in every record."""

    def __init__(self, root: Path, *, sweep_id: str, spec: dict[str, Any]) -> None:
        self.results = ResultsDir(root)
        self.sweep_id = sweep_id
        self.spec = spec
        self.points: list[dict[str, Any]] = []
        self.results.points_dir.mkdir(parents=True, exist_ok=True)

    @property
    def steps_dir(self) -> Path:
        return self.results.root / "steps"

    def on_round(self, round_no: int, tests: Sequence[TestResult]) -> None:
        for test in tests:
            pid = test.point_id
            self.points.append({"point_id": pid, "round": round_no, "kind": test.spec.kind,
                                "nodes": list(test.spec.nodes), "rail": test.spec.rail})
            text = "".join(Path(p).read_text(errors="replace") for p in test.outcome.logs if Path(p).is_file())
            if test.outcome.detail and not text:
                text = test.outcome.detail + "\n"
            if text:
                self.results.log_path(pid).write_text(text)
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
