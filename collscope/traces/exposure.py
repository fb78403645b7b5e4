"""Per step and rank: where the step's time went. Communication, the part of it no compute overlaps (exposed),
its split into transfer and waiting for a late peer (:mod:`collscope.traces.wait`), compute, and GPU idle time
with the part of it spent waiting on the host (:mod:`collscope.traces.idle`).

A step is the period the reader gives (:attr:`StepSpan.duration_us`: from its ``ProfilerStep#N`` start to the
next step's start), taken as given: every figure counts only time inside that period, whichever step issued the
call, so the periods of a rank never overlap and exposed <= communication <= duration always holds.

GPU traces: communication is the NCCL kernels, compute the kernels of the other streams, idle the time no kernel
of the window ran (None when the reader gave no kernel list). CPU traces (gloo): communication is the ``gloo:*``
worker events, compute the main thread's ``aten::`` ops; ``gpu_idle_us`` and ``host_wait_us`` are None (not
applicable). ``wait_us`` is the time inside the period during which at least one call with a split was waiting
for a late peer, ``transfer_us`` the time one was transferring and none waiting (so calls that overlap each other
on one rank, two process groups or DDP's concurrent buckets, count once, and transfer + wait <= communication);
their exposed parts likewise. None when no call inside has a split (one rank traced, or ranks unmatched);
``unsplit_calls`` counts the calls left out.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from collscope.traces.idle import GpuTimeline
from collscope.traces.record import CollectiveCall, RankTrace
from collscope.traces.steps import merge
from collscope.traces.wait import CallSplit

__all__ = ["RankSpans", "StepStat", "rank_exposure", "step_stats"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStat:
    rank: int
    step: int
    duration_us: float
    """The step's period (its start to the next step's start)."""
    comm_us: float
    exposed_comm_us: float
    transfer_us: float | None = None
    wait_us: float | None = None
    exposed_transfer_us: float | None = None
    exposed_wait_us: float | None = None
    compute_us: float | None = None
    gpu_idle_us: float | None = None
    """No kernel of the rank ran (GPU traces with a kernel list; None otherwise)."""
    host_wait_us: float | None = None
    """The part of ``gpu_idle_us`` with no kernel queued: the GPU waited for the host to launch the next one."""
    unsplit_calls: int = 0
    """Calls inside the period with no transfer / wait split (left out of ``transfer_us`` and ``wait_us``)."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RankSpans:
    """A rank's merged compute spans with their starts, and its GPU timeline: built once per rank."""

    compute: list[tuple[float, float]]
    starts: list[float]
    timeline: GpuTimeline | None
    """None for CPU traces and GPU traces without a kernel list."""
    ends: list[float]
    covered_sum: list[float]
    """Prefix sums of the merged compute spans' lengths."""

    @classmethod
    def of(cls, trace: RankTrace) -> RankSpans:
        compute = merge(trace.compute_spans)
        timeline = GpuTimeline(trace.kernels) if trace.device == "gpu" and trace.kernels else None
        sums = [0.0]
        for a, b in compute:
            sums.append(sums[-1] + (b - a))
        return cls(compute=compute, starts=[a for a, _ in compute], timeline=timeline,
                   ends=[b for _, b in compute], covered_sum=sums)

    def covered(self, lo: float, hi: float) -> float:
        """How much of [lo, hi) compute covers (:func:`collscope.traces.steps.covered_us`, in O(log n))."""
        if hi <= lo or not self.compute:
            return 0.0
        i = bisect.bisect_right(self.ends, lo)  # the first span ending after lo
        j = bisect.bisect_left(self.starts, hi)  # spans [i, j) overlap [lo, hi)
        if j <= i:
            return 0.0
        total = self.covered_sum[j] - self.covered_sum[i]
        total -= max(0.0, lo - self.compute[i][0])
        total -= max(0.0, self.compute[j - 1][1] - hi)
        return total

    def exposed(self, lo: float, hi: float) -> float:
        """The part of [lo, hi) no compute covers."""
        return hi - lo - self.covered(lo, hi) if hi > lo else 0.0


def rank_exposure(trace: RankTrace, spans: RankSpans | None = None) -> list[CollectiveCall]:
    """The rank's calls with ``exposed_us`` set: the part of each no compute of the rank covers."""
    spans = spans or RankSpans.of(trace)
    calls = []
    for call in trace.calls:
        if call.duration_us is None:
            calls.append(call)
            continue
        calls.append(replace(call, exposed_us=spans.exposed(call.start_us, call.start_us + call.duration_us)))
    return calls


def step_stats(trace: RankTrace, calls: Sequence[CollectiveCall], splits: Mapping[int, CallSplit],
               spans: RankSpans | None = None) -> list[StepStat]:
    """One StepStat per step of the rank. ``calls``: the rank's communication calls (groups of 1 left out),
    ``splits``: :func:`collscope.traces.wait.split_matched`'s, keyed by ``id(call)``."""
    spans = spans or RankSpans.of(trace)
    exposed, timeline = spans.exposed, spans.timeline

    timed = sorted((c for c in calls if c.duration_us is not None), key=lambda c: c.start_us)
    call_starts = [c.start_us for c in timed]
    longest = max((c.duration_us or 0.0 for c in timed), default=0.0)
    stats = []
    for step in trace.steps:
        a, b = step.start_us, step.start_us + step.duration_us
        lo, hi = bisect.bisect_left(call_starts, a - longest), bisect.bisect_left(call_starts, b)
        inside = [c for c in timed[lo:hi] if c.start_us + (c.duration_us or 0.0) > a]
        comm = merge((max(c.start_us, a), min(c.start_us + (c.duration_us or 0.0), b)) for c in inside)
        waits: list[tuple[float, float]] = []
        transfers: list[tuple[float, float]] = []
        known = 0
        for c in inside:
            s = splits.get(id(c))
            if s is None:
                continue
            known += 1
            end = c.start_us + (c.duration_us or 0.0)
            waits.append((max(c.start_us, a), min(c.start_us + s.wait_us, b)))
            transfers.append((max(end - min(s.transfer_us, c.duration_us or 0.0), a), min(end, b)))
        waiting = merge(waits)
        moving = _minus(merge(transfers), waiting)
        split = [sum((e - s for s, e in moving), 0.0), sum((e - s for s, e in waiting), 0.0),
                 sum((exposed(s, e) for s, e in moving), 0.0), sum((exposed(s, e) for s, e in waiting), 0.0)]
        has_split = known > 0 or not inside
        idle = host = None
        if timeline is not None:
            idle, host = timeline.idle_in(a, b)
        stats.append(StepStat(
            rank=trace.rank, step=step.step, duration_us=step.duration_us, comm_us=sum((e - s for s, e in comm), 0.0),
            exposed_comm_us=sum((exposed(s, e) for s, e in comm), 0.0),
            transfer_us=split[0] if has_split else None, wait_us=split[1] if has_split else None,
            exposed_transfer_us=split[2] if has_split else None, exposed_wait_us=split[3] if has_split else None,
            compute_us=spans.covered(a, b), gpu_idle_us=idle, host_wait_us=host,
            unsplit_calls=len(inside) - known))
    return stats


def _minus(spans: Sequence[tuple[float, float]], cut: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The parts of the merged ``spans`` that no interval of the merged ``cut`` covers."""
    out: list[tuple[float, float]] = []
    j = 0
    for start, end in spans:
        while j < len(cut) and cut[j][1] <= start:
            j += 1
        k, pos = j, start
        while k < len(cut) and cut[k][0] < end:
            if cut[k][0] > pos:
                out.append((pos, cut[k][0]))
            pos = max(pos, cut[k][1])
            k += 1
        if pos < end:
            out.append((pos, end))
    return out
