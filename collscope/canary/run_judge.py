"""Judge a canary's results directory: the canary frame (:func:`~collscope.canary.layout.canary_frame`), the
decision (:func:`collscope.canary.verdict.judge`, with a caveat when fewer blocks than planned could be judged),
the why (:func:`collscope.canary.why.explain`) and ``verdict.json`` beside ``canary.json``."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collscope.atomic import write_text_atomic
from collscope.canary.document import canary_document
from collscope.canary.layout import VERDICT_FILE, canary_frame, read_canary

if TYPE_CHECKING:
    import pandas as pd

    from collscope.analysis.recommend.workload import Workload

__all__ = ["CanaryJudgement", "judge_canary", "load_workload"]


@dataclass(frozen=True)
class CanaryJudgement:
    """The verdict of a canary's results directory, with the frame it was made from and the why (None when
    :mod:`.why` could not be asked)."""

    frame: pd.DataFrame
    verdict: Any
    why: Any | None
    path: Path
    """verdict.json."""


def load_workload(path: Path | None) -> Workload | None:
    if path is None:
        return None
    from collscope.analysis.recommend.workload import read_workload

    return read_workload(path)


def _short_of_plan(planned: int | None, judged: int, frame: pd.DataFrame) -> str | None:
    """The caveat of a verdict judged on fewer blocks than planned (points that failed, or not measured yet)."""
    if planned is None or judged >= planned:
        return None
    failed = frame.attrs.get("failures") or []
    reasons = sorted({str(f.get("reason")) for f in failed})
    why = (f"{len(failed)} point(s) failed ({', '.join(reasons)})" if failed else
           "some points are not measured yet")
    return (f"judged on {judged} of the {planned} planned blocks: {why}; rerun the same command on the same --out "
            "to measure them (add --retry-failed for points that failed on their own)")


def judge_canary(results_dir: Path, *, workload: Workload | None = None, max_loss: float | None = None,
                 interleaved: bool = True) -> CanaryJudgement:
    """The verdict of a canary's results directory (:func:`collscope.canary.verdict.judge` over
    :func:`~collscope.canary.layout.canary_frame`), the why (:func:`collscope.canary.why.explain`), both written
    to ``verdict.json``. ``max_loss``: canary.json's when None."""
    from collscope.canary.verdict import judge

    meta = read_canary(results_dir)
    if workload is None and meta.workload is not None:
        workload = load_workload(Path(meta.workload))
    frame = canary_frame(results_dir)
    verdict = judge(frame, workload, max_loss=meta.max_loss if max_loss is None else max_loss,
                    interleaved=interleaved)
    short = _short_of_plan(meta.blocks_planned, verdict.blocks, frame)
    if short is not None:
        verdict = dataclasses.replace(verdict, caveats=(*verdict.caveats, short))
    from collscope.canary.why import explain

    why = explain([Path(results_dir)], frame, verdict.ranges)
    doc = canary_document(verdict, why, labels=meta.labels, results_dir=str(results_dir))
    path = Path(results_dir) / VERDICT_FILE
    write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    return CanaryJudgement(frame, verdict, why, path)
