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
from itertools import accumulate
from operator import attrgetter

from collscope.traces.record import KernelSpan

__all__ = ["GpuTimeline"]


class GpuTimeline:
    """The idle gaps of one rank's GPU, each with the end of its host-wait part."""

    def __init__(self, kernels: Sequence[KernelSpan]) -> None:
        ordered = sorted(kernels, key=attrgetter("start_us"))  # the readers give them in start order: O(n)
        launches = [-math.inf if k.launch_us is None else k.launch_us for k in ordered]
        queued = list(accumulate(reversed(launches), min))  # suffix minimum of the launches, by start order
        queued.reverse()
        queued.append(math.inf)
        self.gaps: list[tuple[float, float, float]] = []
        """(start, end, end of its host-wait part) of every idle gap, in time order, the outer two unbounded."""
        self._idle_sum = [0.0]  # prefix sums over the bounded gaps (all but the outer two)
        self._host_sum = [0.0]
        busy_until = -math.inf
        for i, k in enumerate(ordered):
            if k.end_us <= k.start_us:
                continue
            if k.start_us > busy_until:  # nothing ran since busy_until: a gap, until this kernel
                host_end = min(max(queued[i], busy_until), k.start_us)
                self.gaps.append((busy_until, k.start_us, host_end))
                bounded = not math.isinf(busy_until)
                self._idle_sum.append(self._idle_sum[-1] + (k.start_us - busy_until if bounded else 0.0))
                self._host_sum.append(self._host_sum[-1] + (host_end - busy_until if bounded else 0.0))
            busy_until = max(busy_until, k.end_us)
        self.gaps.append((busy_until, math.inf, math.inf))
        self._idle_sum.append(self._idle_sum[-1])
        self._host_sum.append(self._host_sum[-1])
        self._gap_starts = [g[0] for g in self.gaps]

    def _part(self, i: int, start_us: float, end_us: float) -> tuple[float, float]:
        g0, g1, h1 = self.gaps[i]
        return (max(0.0, min(g1, end_us) - max(g0, start_us)), max(0.0, min(h1, end_us) - max(g0, start_us)))

    def idle_in(self, start_us: float, end_us: float) -> tuple[float, float]:
        """(idle, host wait) in us inside [start_us, end_us): the gaps cut by either end, the whole ones between
        from prefix sums."""
        if end_us <= start_us:
            return 0.0, 0.0
        first = max(bisect.bisect_right(self._gap_starts, start_us) - 1, 0)
        last = bisect.bisect_left(self._gap_starts, end_us) - 1  # the last gap starting before end_us
        if last < first:
            return 0.0, 0.0
        idle, host = self._part(first, start_us, end_us)
        if last > first:
            tail = self._part(last, start_us, end_us)
            idle += tail[0] + self._idle_sum[last] - self._idle_sum[first + 1]
            host += tail[1] + self._host_sum[last] - self._host_sum[first + 1]
        return idle, host
