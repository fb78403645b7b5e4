"""Where a matched collective's time went on each rank: waiting for the last peer, or transfer; which rank came
last; and the parts of both that compute hid.

A collective moves data only once every rank of its group has arrived, and it ends on all of them at about the
same time. So on each rank:

- ``transfer_us`` is the matched call's transfer time: the shortest duration over its ranks (the rank that
  arrived last waited for nobody);
- ``wait_us = duration_us - transfer_us``: the time the rank sat in the call before the last peer arrived. The
  wait is the call's first ``wait_us``, the transfer its last ``transfer_us``; ``exposed_wait_us`` /
  ``exposed_transfer_us`` are the parts of each no compute of the same rank covers (hidden = the rest);
- ``late_rank``: the rank with the shortest duration, i.e. the one that started last; ``late_by_us``: how much
  later it arrived than the next-latest rank, read as the difference between the two shortest durations (the
  next-latest rank's wait). Durations are each rank's own clock, so this holds across hosts whose clocks differ,
  where start times do not; with synchronized clocks it equals the difference of the two latest starts. A tie
  (two ranks with the same shortest duration) has no late rank (None) and ``late_by_us`` 0.

A call without a transfer time (one rank traced, ranks unmatched, no durations) has no split: its fields are None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from collscope.traces.match import Matched

__all__ = ["CallSplit", "MatchedLate", "split_matched"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSplit:
    """One rank's call split into wait and transfer, each into its exposed and hidden part (us)."""

    transfer_us: float
    wait_us: float
    exposed_transfer_us: float
    exposed_wait_us: float
    late_rank: int | None
    late_by_us: float

    @property
    def hidden_transfer_us(self) -> float:
        return self.transfer_us - self.exposed_transfer_us

    @property
    def hidden_wait_us(self) -> float:
        return self.wait_us - self.exposed_wait_us


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchedLate:
    """Who came last at one matched call and how long the others waited for it."""

    matched: Matched
    late_rank: int | None
    late_by_us: float
    others_waited_us: float
    """The summed wait of the call's other ranks."""


Exposed = Callable[[float, float], float]
"""The part of [lo, hi) no compute of a rank covers (:meth:`collscope.traces.exposure.RankSpans.exposed`)."""


def split_matched(matched: Sequence[Matched], exposed: Mapping[int, Exposed]
                  ) -> tuple[dict[int, CallSplit], list[MatchedLate]]:
    """The split of every call of a matched collective that has a transfer time (keyed by ``id(call)``), and per
    such collective its late rank. ``exposed``: per rank, what compute leaves uncovered of an interval (a rank
    missing there has no compute: all exposed)."""
    splits: dict[int, CallSplit] = {}
    lates: list[MatchedLate] = []
    for m in matched:
        transfer = m.transfer_us
        if transfer is None or len(m.calls) < 2 or any(c.duration_us is None for c in m.calls):
            continue
        by_duration = sorted(m.calls, key=lambda c: c.duration_us or 0.0)
        first, second = by_duration[0], by_duration[1]
        late_by = (second.duration_us or 0.0) - (first.duration_us or 0.0)
        late_rank = first.rank if late_by > 0 else None
        waited = 0.0
        for call in m.calls:
            duration = call.duration_us or 0.0
            wait = max(duration - transfer, 0.0)
            end = call.start_us + duration
            uncovered = exposed.get(call.rank, _all_exposed)
            splits[id(call)] = CallSplit(
                transfer_us=transfer, wait_us=wait,
                exposed_wait_us=uncovered(call.start_us, call.start_us + wait),
                exposed_transfer_us=uncovered(end - min(transfer, duration), end),
                late_rank=late_rank, late_by_us=late_by)
            if call.rank != late_rank:
                waited += wait
        lates.append(MatchedLate(matched=m, late_rank=late_rank, late_by_us=late_by,
                                 others_waited_us=waited if late_rank is not None else 0.0))
    return splits, lates


def _all_exposed(lo: float, hi: float) -> float:
    return max(hi - lo, 0.0)
