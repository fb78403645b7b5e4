"""Training steps (``ProfilerStep#N``) and the interval arithmetic behind exposed communication."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence

from collscope.traces.record import StepSpan

__all__ = ["StepIndex", "parse_step", "merge", "covered_us", "union_us"]

_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def parse_step(name: str) -> int | None:
    m = _STEP.match(name)
    return int(m.group(1)) if m else None


class StepIndex:
    """Which step a time falls in: the last step started at or before it (a call issued after a step's CPU span
    ended but before the next one started still belongs to it)."""

    def __init__(self, steps: Sequence[StepSpan]) -> None:
        self._steps = sorted(steps, key=lambda s: s.start_us)
        self._starts = [s.start_us for s in self._steps]

    def step_at(self, ts: float) -> int | None:
        i = bisect.bisect_right(self._starts, ts) - 1
        if i < 0:
            return None
        step = self._steps[i]
        if i == len(self._steps) - 1 and ts > step.start_us + step.duration_us:
            return None  # after the last profiled step
        return step.step


def merge(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, non-overlapping union of the intervals."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def union_us(spans: Iterable[tuple[float, float]]) -> float:
    return sum(end - start for start, end in merge(spans))


def covered_us(start: float, end: float, merged: Sequence[tuple[float, float]], starts: Sequence[float]) -> float:
    """How much of [start, end) the merged intervals cover (``starts``: their start times, for bisection)."""
    total = 0.0
    i = max(bisect.bisect_right(starts, start) - 1, 0)
    while i < len(merged) and merged[i][0] < end:
        lo, hi = max(start, merged[i][0]), min(end, merged[i][1])
        if hi > lo:
            total += hi - lo
        i += 1
    return total
