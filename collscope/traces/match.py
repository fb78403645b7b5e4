"""The same collective on every rank of its group, and what that says: transfer time and arrival skew.

A call's duration on one rank includes waiting for the slowest peer, so the transfer time of a collective is the
minimum duration over the ranks that ran it, and the spread of their start times is the skew
(``reference/traces.md`` section 3). Calls match by process group + sequence number when the trace records one
(``Seq``, Flight Recorder, Inspector), else by their order within the group and step when the ranks' calls there
agree in op and size at every position (:func:`match_calls`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from collscope.traces.record import CollectiveCall, RankTrace
from collscope.vocab.ops import OP_FACTS

__all__ = ["Matched", "match_calls"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Matched:
    """One collective and the calls of the ranks that ran it."""

    calls: tuple[CollectiveCall, ...]
    transfer_us: float | None
    """Minimum duration over the ranks; None when only one rank is known or durations are missing."""
    skew_us: float | None
    consistent: bool
    """False when the ranks disagree on the op or the size, or their calls could not be lined up (then nothing
    is computed across them)."""
    size_bytes: int | None = None
    """The size its busbw is computed from: the ranks' common size; for an alltoall whose ranks send different
    amounts (alltoallv, each call keeps its own size) the total bytes of the matched ranks over their number,
    which is nccl-tests' alltoall size (one rank's send buffer) when the splits are even."""
    no_communication: bool = False
    """A call in a process group of one rank: nothing leaves the GPU (NCCL launches no kernel for it); never
    matched, listed apart."""


def _uneven_ok(op: str) -> bool:
    """Ops whose ranks may each send a different amount in one call (alltoallv: n blocks in, n blocks out)."""
    facts = OP_FACTS.get(op)
    return facts is not None and facts.send_blocks_nranks and facts.recv_blocks_nranks


def _agree(calls: Sequence[CollectiveCall]) -> bool:
    """Same op, distinct ranks, and the same size (any known size for an alltoall)."""
    first = calls[0]
    if any(c.op != first.op for c in calls) or len({c.rank for c in calls}) != len(calls):
        return False
    sizes = {c.size_bytes for c in calls}
    return len(sizes) == 1 or (_uneven_ok(first.op) and None not in sizes)


def _matched(calls: list[CollectiveCall], same: bool) -> Matched:
    calls.sort(key=lambda c: c.rank)
    durations = [c.duration_us for c in calls if c.duration_us is not None]
    both = same and len(calls) > 1
    sizes = [c.size_bytes for c in calls if c.size_bytes is not None]
    size = None
    if same and len(sizes) == len(calls):
        size = sizes[0] if len(set(sizes)) == 1 else round(sum(sizes) / len(sizes))
    return Matched(calls=tuple(calls), consistent=same, size_bytes=size,
                   transfer_us=min(durations) if both and len(durations) == len(calls) else None,
                   skew_us=(max(c.start_us for c in calls) - min(c.start_us for c in calls)) if both else None)


def match_calls(traces: Sequence[RankTrace]) -> tuple[list[Matched], list[str]]:
    """Every collective across the ranks (in start order of its first call) and the warnings matching raised.

    Calls with a sequence number match by (process group, sequence number). The others match by position within
    their (process group, step) only when every rank's calls there agree in op and size at every position: one
    missing or extra call would shift all that follow onto other collectives, so such a set is left unmatched
    whole (counted and said). Calls in a group of one rank are no communication: never matched."""
    by_seq: dict[tuple[object, ...], list[CollectiveCall]] = defaultdict(list)
    by_scope: dict[tuple[object, ...], dict[int, list[CollectiveCall]]] = defaultdict(lambda: defaultdict(list))
    out: list[Matched] = []
    for trace in traces:
        for call in trace.calls:  # the readers give each rank's calls in issue order
            if call.group_size == 1:
                out.append(Matched(calls=(call,), consistent=True, transfer_us=None, skew_us=None,
                                   size_bytes=call.size_bytes, no_communication=True))
            elif call.seq is not None:
                by_seq[(call.process_group, call.seq)].append(call)
            else:
                by_scope[(call.process_group, call.step)][call.rank].append(call)
    alone = len(out)
    disagree = 0
    for calls in by_seq.values():
        same = _agree(calls)
        disagree += not same
        out.append(_matched(calls, same))
    loose_sets = loose_calls = 0
    for per_rank in by_scope.values():
        lists = list(per_rank.values())
        lined_up = len({len(cs) for cs in lists}) == 1 and all(_agree(list(at)) for at in zip(*lists, strict=True))
        if lined_up:
            out.extend(_matched(list(at), True) for at in zip(*lists, strict=True))
            continue
        loose_sets += 1
        for cs in lists:
            loose_calls += len(cs)
            out.extend(_matched([c], False) for c in cs)
    out.sort(key=lambda m: min(c.start_us for c in m.calls))
    warnings = []
    if disagree:
        warnings.append(f"{disagree} collectives differ in op or size between ranks at the same place in their "
                        "group's order (the traces cover different steps or a rank ran other calls): left unmatched")
    if loose_sets:
        warnings.append(f"{loose_calls} calls of {loose_sets} (process group, step) sets left unmatched: the traces "
                        "carry no sequence number, and the ranks' calls there differ in number, op or size at some "
                        "position (a rank ran other calls or one is missing), so lining them up by position would "
                        "pair different collectives")
    if alone:
        warnings.append(f"{alone} calls are in process groups of 1 rank: no communication (NCCL launches no kernel "
                        "for them); listed apart and never matched")
    ranks = {t.rank for t in traces}
    sizes = {c.group_size for t in traces for c in t.calls if c.group_size is not None}
    if len(ranks) > 1 and sizes and max(sizes) > len(ranks):
        warnings.append(f"traces of {len(ranks)} ranks for groups of up to {max(sizes)}: transfer times are the "
                        "minimum over the traced ranks only")
    return out, warnings
