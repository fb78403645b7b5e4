"""What the fabric gives at a size: a benchmark sweep's busbw interpolated in log size, or a model's.

The sweep comes as Measurement records in a DataFrame (``collscope.analysis.load_results``); only the default
configuration counts (the job ran with its own settings, which is what a recommendation would change), ``ok``
records only, the median over repeats per size. Between two measured sizes busbw is interpolated linearly in
log(size); outside the measured range there is no figure (and the report says so).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from statistics import median
from typing import Any

__all__ = ["BenchCurves", "ModelFn", "ModelFigure", "bench_curves", "interpolate_log"]

@dataclass(frozen=True, slots=True)
class ModelFigure:
    """A cost model's busbw at one size, with how far published systems fall from that model there."""

    busbw_gbps: float
    published_spread: str | None = None
    """The model's published accuracy at that size and scope in words
    (:meth:`collscope.analysis.model_accuracy.BandAccuracy.brief`); None when none is known."""
    choice: str | None = None
    """The (algorithm, protocol) NCCL's model chooses, ``Ring/Simple``; None for an alpha-beta figure."""
    ceiling_gbps: float = 0.0
    """NVLS's own rate inside one NVLink domain where NCCL's table holds the choice lower
    (:attr:`collscope.analysis.nccl_model.model.NcclChoice.ceiling_busbw_gbps`); 0 where there is none."""
    ties: tuple[tuple[str, float], ...] = ()
    """NCCL's model's near ties of its choice (:data:`collscope.analysis.nccl_model.choice.NEAR_TIE`): each pair
    with its own expected busbw, ``("Ring/LL128", 229.0)``; empty when the choice leads by more."""

    @property
    def near_ties(self) -> str | None:
        """The near ties in words, ``Ring/LL128 229 GB/s``; None when there are none."""
        return ", ".join(f"{pair} {bw:.3g} GB/s" for pair, bw in self.ties) or None


ModelFn = Callable[[str, int, int, list[int]], dict[int, ModelFigure]]
"""(op, nranks, nnodes, sizes) -> the model's figure per size: nranks and nnodes of the call's process group
(never the world's, never "one node" by default)."""


@dataclass(frozen=True, slots=True)
class BenchCurves:
    curves: dict[tuple[str, int], list[tuple[int, float]]]
    """(op, nranks) -> [(size_bytes, median busbw_gbps)] ascending."""
    source: str

    def busbw_at(self, op: str, nranks: int, size_bytes: int) -> float | None:
        return interpolate_log(self.curves.get((op, nranks), []), size_bytes)


def interpolate_log(points: list[tuple[int, float]], size_bytes: int) -> float | None:
    """busbw at ``size_bytes``, linear in log(size) between the two nearest measured sizes; None outside."""
    if not points or size_bytes <= 0:
        return None
    sizes = [s for s, _ in points]
    i = bisect.bisect_left(sizes, size_bytes)
    if i < len(sizes) and sizes[i] == size_bytes:
        return points[i][1]
    if i == 0 or i == len(sizes):
        return None
    (s0, b0), (s1, b1) = points[i - 1], points[i]
    t = (math.log(size_bytes) - math.log(s0)) / (math.log(s1) - math.log(s0))
    return b0 + t * (b1 - b0)


def bench_curves(frame: Any, source: str) -> BenchCurves:
    """The default configuration's median busbw per (op, nranks, size) of a loaded sweep."""
    rows = frame
    if "ok" in rows.columns:
        rows = rows[rows["ok"].astype(bool)]
    if "config" in rows.columns and (rows["config"].astype(str) == "default").any():
        rows = rows[rows["config"].astype(str) == "default"]
    values: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for op, nranks, size, bw in zip(rows["op"].astype(str), rows["nranks"], rows["size_bytes"], rows["busbw_gbps"],
                                    strict=True):
        if size > 0 and bw == bw:
            values[(op, int(nranks), int(size))].append(float(bw))
    curves: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
    for (op, nranks, size), bws in sorted(values.items()):
        curves[(op, nranks)].append((size, median(bws)))
    return BenchCurves(curves=dict(curves), source=source)
