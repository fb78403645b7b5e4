"""When a rank's GPU ran nothing, and how much of that it spent waiting on the host.

GPU idle: no kernel of the rank's window (:attr:`RankTrace.kernels`, any stream) runs. An idle gap lasts from the
end of the kernels before it to the start of the next one. Host wait: the part of a gap with no kernel queued,
from the gap's start until the earliest launch (``cudaLaunchKernel``, :attr:`KernelSpan.launch_us`) of a kernel
that had not started by the gap's end; when every such kernel was launched before the gap began, the GPU had
work queued (waiting on a dependency, an event, a copy) and none of the gap is host wait. Kernels whose launch is
not in the file count as queued (never as host wait). After the last kernel nothing is queued: host wait.

CPU traces (gloo) have no kernels: their per-step GPU figures are None (not applicable), never 0.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from collscope.traces.record import KernelSpan
from collscope.traces.steps import merge

__all__ = ["GpuTimeline"]


class GpuTimeline:
    """The idle gaps of one rank's GPU, each with the end of its host-wait part."""

    def __init__(self, kernels: Sequence[KernelSpan]) -> None:
        ordered = sorted(kernels, key=lambda k: k.start_us)
        self._starts = [k.start_us for k in ordered]
        self._min_launch = [math.inf] * (len(ordered) + 1)  # suffix minimum of launches, by start order
        for i in range(len(ordered) - 1, -1, -1):
            launch = ordered[i].launch_us
            self._min_launch[i] = min(self._min_launch[i + 1], -math.inf if launch is None else launch)
        busy = merge((k.start_us, k.end_us) for k in ordered)
        self._busy = busy
        edges = [-math.inf] + [x for span in busy for x in span] + [math.inf]
        self.gaps: list[tuple[float, float, float]] = []
        """(start, end, end of its host-wait part) of every idle gap, in time order, the outer two unbounded."""
        for g0, g1 in zip(edges[0::2], edges[1::2], strict=True):
            queued = self._min_launch[bisect.bisect_left(self._starts, g1)]
            self.gaps.append((g0, g1, min(max(queued, g0), g1)))
        self._gap_starts = [g[0] for g in self.gaps]

    def idle_in(self, start_us: float, end_us: float) -> tuple[float, float]:
        """(idle, host wait) in us inside [start_us, end_us)."""
        idle = host = 0.0
        i = max(bisect.bisect_right(self._gap_starts, start_us) - 1, 0)
        while i < len(self.gaps) and self.gaps[i][0] < end_us:
            g0, g1, h1 = self.gaps[i]
            idle += max(0.0, min(g1, end_us) - max(g0, start_us))
            host += max(0.0, min(h1, end_us) - max(g0, start_us))
            i += 1
        return idle, host
