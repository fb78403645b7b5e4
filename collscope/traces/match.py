"""The same collective on every rank of its group, and what that says: transfer time and arrival skew.

A call's duration on one rank includes waiting for the slowest peer, so the transfer time of a collective is the
minimum duration over the ranks that ran it, and the spread of their start times is the skew
(``reference/traces.md`` section 3). Calls match by process group + sequence number when the trace records one
(``Seq``, Flight Recorder, Inspector), else by their order within the group and step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from collscope.traces.record import CollectiveCall, RankTrace

__all__ = ["Matched", "match_calls"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Matched:
    """One collective and the calls of the ranks that ran it."""

    calls: tuple[CollectiveCall, ...]
    transfer_us: float | None
    """Minimum duration over the ranks; None when only one rank is known or durations are missing."""
    skew_us: float | None
    consistent: bool
    """False when the ranks disagree on the op or the size (then nothing is computed across them)."""


def _key(call: CollectiveCall, order: int) -> tuple[object, ...]:
    if call.seq is not None:
        return ("seq", call.process_group, call.seq)
    if call.step is not None:
        return ("step", call.process_group, call.step, order)
    return ("order", call.process_group, order)


def match_calls(traces: Sequence[RankTrace]) -> tuple[list[Matched], list[str]]:
    """Every collective across the ranks (in start order of its first call) and the warnings matching raised."""
    groups: dict[tuple[object, ...], list[CollectiveCall]] = defaultdict(list)
    for trace in traces:
        counters: dict[tuple[object, ...], int] = defaultdict(int)
        for call in trace.calls:  # the readers give each rank's calls in issue order
            scope = (call.process_group, call.step if call.seq is None else None)
            groups[_key(call, counters[scope])].append(call)
            counters[scope] += 1
    out: list[Matched] = []
    disagree = 0
    for calls in groups.values():
        calls.sort(key=lambda c: c.rank)
        same = len({(c.op, c.size_bytes) for c in calls}) == 1 and len({c.rank for c in calls}) == len(calls)
        if not same:
            disagree += 1
        durations = [c.duration_us for c in calls if c.duration_us is not None]
        matched = same and len(calls) > 1
        out.append(Matched(calls=tuple(calls), consistent=same,
                           transfer_us=min(durations) if matched and len(durations) == len(calls) else None,
                           skew_us=(max(c.start_us for c in calls) - min(c.start_us for c in calls))
                           if matched else None))
    out.sort(key=lambda m: min(c.start_us for c in m.calls))
    warnings = []
    if disagree:
        warnings.append(f"{disagree} collectives differ in op or size between ranks at the same place in their "
                        "group's order (the traces cover different steps or a rank ran other calls): left unmatched")
    ranks = {t.rank for t in traces}
    sizes = {c.group_size for t in traces for c in t.calls if c.group_size is not None}
    if len(ranks) > 1 and sizes and max(sizes) > len(ranks):
        warnings.append(f"traces of {len(ranks)} ranks for groups of up to {max(sizes)}: transfer times are the "
                        "minimum over the traced ranks only")
    return out, warnings
