"""Which ranks the others wait for, and what the trace says about why the first of them is late.

``late_ranks``: one row per rank that took part in a matched call with a transfer time: ``matched_calls`` (how
many), ``last_count`` (at how many it was the late rank, :mod:`collscope.traces.wait`), ``others_waited_us`` (the
summed wait of the other ranks at those calls), sorted by ``others_waited_us`` then ``last_count`` (descending).

Evidence for the first row (when others waited for it at all), compared with the other ranks at the same calls
and with its lateness (the mean wait of the others at those calls, summed):

- ``host``: between its previous call (or its step's start, whichever is later) and each of those calls its GPU
  sat idle with no kernel queued (:class:`~collscope.traces.idle.GpuTimeline`), or on a CPU trace its main thread
  ran no profiled op, for at least half its lateness more than the others' median at the same calls: CPU-bound
  (the host was late: a stall before the call, then the small ops that build its input, is still seen);
- ``compute``: its compute per step (kernels of the other streams; on CPU traces ``aten::`` ops) exceeds the
  others' median by at least half its lateness per step: a slow GPU, or more work on that rank;
- ``unknown``: neither does; the sentence says what was compared. The larger of the two excesses wins.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Literal

from collscope.traces.exposure import RankSpans, StepStat
from collscope.traces.record import CollectiveCall, RankTrace
from collscope.traces.verdict import human_us
from collscope.traces.wait import MatchedLate

__all__ = ["RankTiming", "late_ranks"]

Cause = Literal["host", "compute", "unknown"]


@dataclass(slots=True)
class RankTiming:
    """What the evidence reads of one rank: its GPU timeline or main-thread compute, its calls' previous ends."""

    trace: RankTrace
    calls: Sequence[CollectiveCall]
    steps: Sequence[StepStat]
    spans: RankSpans
    previous_end: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        last = float("-inf")
        for c in sorted(self.calls, key=lambda c: c.start_us):
            self.previous_end[id(c)] = last
            last = max(last, c.start_us + (c.duration_us or 0.0))

    def idle_before(self, call: CollectiveCall) -> float | None:
        """Since the rank's previous call ended or its step began (the later): GPU, the time its GPU idled with no
        kernel queued; CPU, the time its main thread ran no profiled op. None: a GPU trace without kernels."""
        starts = [s.start_us for s in self.trace.steps if s.start_us <= call.start_us]
        since = max(self.previous_end.get(id(call), -math.inf), max(starts) if starts else -math.inf)
        if math.isinf(since):
            return 0.0  # the rank's first call outside any step: no start to measure from
        if since >= call.start_us:
            return 0.0
        if self.trace.device == "gpu":
            timeline = self.spans.timeline
            return None if timeline is None else timeline.idle_in(since, call.start_us)[1]
        return self.spans.exposed(since, call.start_us)

    def compute_per_step(self) -> float | None:
        values = [s.compute_us for s in self.steps if s.compute_us is not None]
        return sum(values) / len(values) if values else None


def late_ranks(lates: Sequence[MatchedLate], timing: Mapping[int, RankTiming]) -> list[dict[str, Any]]:
    """The ``late_ranks`` table (``trace --json``), the first row with its ``cause`` and ``evidence``."""
    rows: dict[int, dict[str, Any]] = {}
    for ml in lates:
        for c in ml.matched.calls:
            row = rows.setdefault(c.rank, {"rank": c.rank, "last_count": 0, "matched_calls": 0,
                                           "others_waited_us": 0.0, "cause": None, "evidence": None})
            row["matched_calls"] += 1
        if ml.late_rank is not None:
            rows[ml.late_rank]["last_count"] += 1
            rows[ml.late_rank]["others_waited_us"] += ml.others_waited_us
    table = sorted(rows.values(), key=lambda r: (-r["others_waited_us"], -r["last_count"], r["rank"]))
    if table and table[0]["others_waited_us"] > 0:
        cause, says = _evidence(table[0]["rank"], lates, timing)
        table[0]["cause"], table[0]["evidence"] = cause, says
    return table


def _evidence(rank: int, lates: Sequence[MatchedLate], timing: Mapping[int, RankTiming]) -> tuple[Cause, str]:
    mine = [ml for ml in lates if ml.late_rank == rank]
    lateness = sum(ml.others_waited_us / max(len(ml.matched.calls) - 1, 1) for ml in mine)
    own = timing.get(rank)
    if own is None:
        return "unknown", f"rank {rank}'s own trace is not among the files read"
    idle_own = 0.0
    idle_others: dict[int, float] = defaultdict(float)
    idle_known = True
    for ml in mine:
        for c in ml.matched.calls:
            t = timing.get(c.rank)
            gap = t.idle_before(c) if t is not None else None
            if c.rank == rank:
                if gap is None:
                    idle_known = False
                idle_own += gap or 0.0
            elif gap is not None:
                idle_others[c.rank] += gap
    host_excess = idle_own - (median(idle_others.values()) if idle_others else 0.0) if idle_known else None
    comp_own = own.compute_per_step()
    comp_others = [v for r, t in timing.items() if r != rank and (v := t.compute_per_step()) is not None]
    n_steps = len(own.steps)
    comp_excess = comp_own - median(comp_others) if comp_own is not None and comp_others and n_steps else None
    what = f"rank {rank} came last to {len(mine)} calls, {human_us(lateness)} late in all"
    gpu = own.trace.device == "gpu"
    idle_word = "its GPU sat idle waiting on the host" if gpu else "its main thread ran no profiled op"
    host_text = (f"{idle_word} for {human_us(idle_own)} since its previous call or step start before them (the others: "
                 f"{human_us(median(idle_others.values()) if idle_others else 0.0)} median)"
                 if host_excess is not None else "its GPU idle time is unknown (the trace gives no kernel list)")
    comp_word = "its compute kernels" if gpu else "its aten ops"
    comp_text = (f"{comp_word} take {human_us(comp_own or 0.0)} per step (the others: "
                 f"{human_us(median(comp_others))} median)" if comp_excess is not None
                 else "compute per step could not be compared (no steps, or no other rank traced)")
    host_score = host_excess if host_excess is not None else float("-inf")
    comp_score = comp_excess * n_steps if comp_excess is not None else float("-inf")
    if host_score >= comp_score and host_score >= 0.5 * lateness:
        why = ("CPU-bound: its host launched the work late (data loading, Python, a synchronization)" if gpu else
               "the time went outside the profiled ops (a sleep, I/O, data loading, an unprofiled library)")
        return "host", f"{what}; {host_text}: {why}"
    if comp_score >= 0.5 * lateness:
        why = "a slow GPU, or more work on that rank" if gpu else "more CPU work on that rank"
        return "compute", f"{what}; {comp_text}: {why}"
    return "unknown", f"{what}; neither explains it: {host_text}; {comp_text}"
