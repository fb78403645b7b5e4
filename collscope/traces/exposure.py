"""Per step and rank: communication time, and the part of it no compute overlaps (exposed communication).

GPU traces: NCCL kernels against kernels on the other streams; CPU traces (gloo): ``gloo:*`` spans against the
main thread's ``aten::`` ops. A step lasts from its ``ProfilerStep#N`` start to the later of its CPU end and the
end of its last collective (GPU work of a step can finish after the CPU moved on), so exposed <= communication
<= step duration always holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from collscope.traces.record import CollectiveCall, RankTrace
from collscope.traces.steps import covered_us, merge

__all__ = ["StepStat", "rank_exposure"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStat:
    rank: int
    step: int
    duration_us: float
    comm_us: float
    exposed_comm_us: float

    def to_dict(self) -> dict[str, object]:
        return {"rank": self.rank, "step": self.step, "duration_us": self.duration_us, "comm_us": self.comm_us,
                "exposed_comm_us": self.exposed_comm_us}


def rank_exposure(trace: RankTrace) -> tuple[list[CollectiveCall], list[StepStat]]:
    """The rank's calls with ``exposed_us`` set, and one StepStat per profiled step."""
    compute = merge(trace.compute_spans)
    starts = [s for s, _ in compute]
    calls = []
    for call in trace.calls:
        if call.duration_us is None:
            calls.append(call)
            continue
        end = call.start_us + call.duration_us
        calls.append(replace(call, exposed_us=call.duration_us - covered_us(call.start_us, end, compute, starts)))
    stats = []
    for step in trace.steps:
        spans = [(max(c.start_us, step.start_us), c.start_us + c.duration_us) for c in calls
                 if c.step == step.step and c.duration_us is not None]
        comm = merge(spans)
        comm_us = sum(e - s for s, e in comm)
        exposed = sum((e - s) - covered_us(s, e, compute, starts) for s, e in comm)
        end = max([step.start_us + step.duration_us] + [e for _, e in comm])
        stats.append(StepStat(rank=trace.rank, step=step.step, duration_us=end - step.start_us, comm_us=comm_us,
                              exposed_comm_us=exposed))
    return calls, stats
