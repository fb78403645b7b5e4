"""Time per step of a workload under one configuration, from the measured median times of a group.

A workload size that was measured uses its cell's median ``time_us``. A size between two measured sizes is
interpolated linearly in log2(size) between them (and its time is attributed to both, by the interpolation
weights, when shares of the workload's time are computed). A size outside the measured range, or next to a
size without a usable cell, is **not covered**: it adds nothing and is reported as such.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from collscope.analysis.recommend.records import DEFAULT_CONFIG, GroupResult, SizeRange
from collscope.analysis.recommend.workload import WorkloadEntry

__all__ = ["TimeEval", "evaluate", "range_saving", "cell_time_us", "format_us"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeEval:
    """One configuration on one group's part of a workload, microseconds per step."""

    default_us: float
    config_us: float
    covered: int
    """Workload entries with a time."""
    interpolated: int
    """Of those, entries between measured sizes."""
    uncovered: tuple[WorkloadEntry, ...] = ()
    share_by_size: dict[int, float] = field(default_factory=dict)
    """Measured size -> fraction of the default's workload time it carries."""

    @property
    def saved_us(self) -> float:
        return self.default_us - self.config_us


def format_us(time_us: float) -> str:
    """``12.3456`` -> ``12.3 us``, ``123456.7`` -> ``123457 us`` (three significant digits, at least the units)."""
    if abs(time_us) >= 1000:
        return f"{time_us:.0f} us"
    return f"{time_us:.3g} us"


def cell_time_us(group: GroupResult, size: int, config: str) -> float | None:
    """The median time of ``config`` at a measured size of ``group``; None without a usable cell."""
    result = next((s for s in group.sizes if s.size_bytes == size), None)
    if result is None or result.baseline is None:
        return None
    if config == DEFAULT_CONFIG:
        stat = result.baseline
    else:
        cand = result.candidate(config)
        if cand is None:
            return None
        stat = cand.stat
    return stat.time_us if math.isfinite(stat.time_us) else None


def _locate(sizes: Sequence[int], size: int) -> list[tuple[int, float]] | None:
    """Measured sizes and weights that give ``size``'s time; None outside the measured range."""
    if not sizes or size < sizes[0] or size > sizes[-1]:
        return None
    for lo, hi in zip(sizes, sizes[1:], strict=False):
        if size == lo:
            return [(lo, 1.0)]
        if lo < size < hi:
            frac = (math.log2(size) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
            return [(lo, 1.0 - frac), (hi, frac)]
    return [(sizes[-1], 1.0)]


def _parts(group: GroupResult, measured: Sequence[int], size: int,
           config: str) -> list[tuple[float, float, int, float]] | None:
    """(default time, config time, measured size, weight) of each measured size that gives ``size``'s time."""
    where = _locate(measured, size)
    if where is None:
        return None
    out = []
    for s, w in where:
        d, c = cell_time_us(group, s, DEFAULT_CONFIG), cell_time_us(group, s, config)
        if d is None or c is None:
            return None
        out.append((d, c, s, w))
    return out


def evaluate(group: GroupResult, entries: Sequence[WorkloadEntry], config: str,
             sizes: Sequence[int] | None = None) -> TimeEval:
    """Time per step of ``entries`` under ``config`` and under the default, over the measured ``sizes`` of the
    group (default: every size where both have a usable cell)."""
    if sizes is None:
        sizes = [s.size_bytes for s in group.sizes
                 if cell_time_us(group, s.size_bytes, DEFAULT_CONFIG) is not None
                 and cell_time_us(group, s.size_bytes, config) is not None]
    measured = sorted(sizes)
    default_us = config_us = 0.0
    covered = interpolated = 0
    uncovered: list[WorkloadEntry] = []
    attributed: dict[int, float] = {}
    for entry in entries:
        parts = _parts(group, measured, entry.size_bytes, config)
        if parts is None:
            uncovered.append(entry)
            continue
        default_us += entry.calls * sum(d * w for d, _, _, w in parts)
        config_us += entry.calls * sum(c * w for _, c, _, w in parts)
        covered += 1
        interpolated += len(parts) > 1
        for d, _, s, w in parts:
            attributed[s] = attributed.get(s, 0.0) + entry.calls * d * w
    shares = {s: t / default_us for s, t in attributed.items()} if default_us > 0 else {}
    return TimeEval(default_us=default_us, config_us=config_us, covered=covered, interpolated=interpolated,
                    uncovered=tuple(uncovered), share_by_size=shares)


def range_saving(group: GroupResult, entries: Sequence[WorkloadEntry], span: SizeRange) -> TimeEval:
    """The workload entries inside a winning range (edges inclusive) under its config."""
    inside = [e for e in entries if span.min_bytes <= e.size_bytes <= span.max_bytes]
    return evaluate(group, inside, span.config, span.sizes)
