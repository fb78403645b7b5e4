"""Per step and rank: where the step's time went. Communication, the part of it no compute overlaps (exposed),
its split into transfer and waiting for a late peer (:mod:`collscope.traces.wait`), compute, and GPU idle time
with the part of it spent waiting on the host (:mod:`collscope.traces.idle`).

A step is the period the reader gives (:attr:`StepSpan.duration_us`: from its ``ProfilerStep#N`` start to the
next step's start), taken as given: every figure counts only time inside that period, whichever step issued the
call, so the periods of a rank never overlap and exposed <= communication <= duration always holds.

GPU traces: communication is the NCCL kernels, compute the kernels of the other streams, idle the time no kernel
of the window ran (None when the reader gave no kernel list). CPU traces (gloo): communication is the ``gloo:*``
worker events, compute the main thread's ``aten::`` ops; ``gpu_idle_us`` and ``host_wait_us`` are None (not
applicable). ``transfer_us`` / ``wait_us`` (and their exposed parts) sum the calls inside the period that have a
split; None when none of them has one (one rank traced, or ranks unmatched); ``unsplit_calls`` counts the calls
left out. Calls that overlap each other on one rank (two process groups at once) count once in ``comm_us`` and
each in ``transfer_us`` + ``wait_us``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from collscope.traces.idle import GpuTimeline
from collscope.traces.record import CollectiveCall, RankTrace
from collscope.traces.steps import covered_us, merge
from collscope.traces.wait import CallSplit

__all__ = ["StepStat", "rank_exposure", "step_stats"]


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


def rank_exposure(trace: RankTrace) -> list[CollectiveCall]:
    """The rank's calls with ``exposed_us`` set: the part of each no compute of the rank covers."""
    compute = merge(trace.compute_spans)
    starts = [s for s, _ in compute]
    calls = []
    for call in trace.calls:
        if call.duration_us is None:
            calls.append(call)
            continue
        end = call.start_us + call.duration_us
        calls.append(replace(call, exposed_us=call.duration_us - covered_us(call.start_us, end, compute, starts)))
    return calls


def step_stats(trace: RankTrace, calls: Sequence[CollectiveCall], splits: Mapping[int, CallSplit]) -> list[StepStat]:
    """One StepStat per step of the rank. ``calls``: the rank's communication calls (groups of 1 left out),
    ``splits``: :func:`collscope.traces.wait.split_matched`'s, keyed by ``id(call)``."""
    compute = merge(trace.compute_spans)
    starts = [s for s, _ in compute]

    def exposed(lo: float, hi: float) -> float:
        return (hi - lo) - covered_us(lo, hi, compute, starts) if hi > lo else 0.0

    timeline = GpuTimeline(trace.kernels) if trace.device == "gpu" and trace.kernels else None
    timed = [c for c in calls if c.duration_us is not None]
    stats = []
    for step in trace.steps:
        a, b = step.start_us, step.start_us + step.duration_us
        inside = [c for c in timed if c.start_us < b and c.start_us + (c.duration_us or 0.0) > a]
        comm = merge((max(c.start_us, a), min(c.start_us + (c.duration_us or 0.0), b)) for c in inside)
        split = [0.0, 0.0, 0.0, 0.0]  # transfer, wait, exposed transfer, exposed wait
        known = 0
        for c in inside:
            s = splits.get(id(c))
            if s is None:
                continue
            known += 1
            end = c.start_us + (c.duration_us or 0.0)
            w0, w1 = max(c.start_us, a), min(c.start_us + s.wait_us, b)
            t0, t1 = max(end - min(s.transfer_us, c.duration_us or 0.0), a), min(end, b)
            split[0] += max(t1 - t0, 0.0)
            split[1] += max(w1 - w0, 0.0)
            split[2] += exposed(t0, t1)
            split[3] += exposed(w0, w1)
        has_split = known > 0 or not inside
        idle = host = None
        if timeline is not None:
            idle, host = timeline.idle_in(a, b)
        stats.append(StepStat(
            rank=trace.rank, step=step.step, duration_us=step.duration_us, comm_us=sum(e - s for s, e in comm),
            exposed_comm_us=sum(exposed(s, e) for s, e in comm),
            transfer_us=split[0] if has_split else None, wait_us=split[1] if has_split else None,
            exposed_transfer_us=split[2] if has_split else None, exposed_wait_us=split[3] if has_split else None,
            compute_us=covered_us(a, b, compute, starts), gpu_idle_us=idle, host_wait_us=host,
            unsplit_calls=len(inside) - known))
    return stats
