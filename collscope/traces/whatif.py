"""What a faster collective would save per step: the network at the sweep's (``--against``) or the model's busbw,
or no rank arriving late. Only exposed time counts: time compute hid would not shorten the step.

Per call and rank (its split: :mod:`collscope.traces.wait`):

- network: the transfer at the reference busbw lasts ``transfer_us x busbw / reference`` (never longer than
  it did); the rank saves the shortening, at most its exposed transfer;
- waiting: the rank saves its exposed wait.

Per step, the ranks run in lock step (each collective ends on all of them together), so a step shortens by what
every rank saves: the network saving of a step is the smallest over its ranks (a rank whose transfer compute hid
finishes the step no sooner), the waiting saving the largest (the earliest rank waited for the whole lateness;
had the late rank come in time, all would move on by that much). A call counts in the step that issued it.
Figures per step are means over the distinct steps traced; None when no call has a split (waiting) or a
reference (network). Both are upper bounds: work that depended on the late arrival is not modelled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from collscope.traces.wait import CallSplit

__all__ = ["Saving", "call_saving", "per_step"]


@dataclass(frozen=True, slots=True)
class Saving:
    """What one rank's call would save; ``key``: its (op, size, group size) row."""

    rank: int
    step: int
    key: Hashable
    network_us: float | None
    waiting_us: float


def call_saving(rank: int, step: int, key: Hashable, split: CallSplit, busbw_gbps: float | None,
                reference_gbps: float | None) -> Saving:
    network = None
    if busbw_gbps is not None and reference_gbps:
        faster = split.transfer_us * min(busbw_gbps / reference_gbps, 1.0)
        network = min(split.exposed_transfer_us, split.transfer_us - faster)
    return Saving(rank=rank, step=step, key=key, network_us=network, waiting_us=split.exposed_wait_us)


def per_step(savings: Iterable[Saving], n_steps: int) -> tuple[float | None, float | None]:
    """(network, waiting) us saved per step: per step the smallest network / the largest waiting saving over the
    ranks that ran calls in it, summed over steps, over ``n_steps``."""
    network: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    waiting: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    any_network = any_waiting = False
    for s in savings:
        any_waiting = True
        waiting[s.step][s.rank] += s.waiting_us
        if s.network_us is not None:
            any_network = True
            network[s.step][s.rank] += s.network_us
    if not n_steps:
        return None, None
    net = sum(min(ranks.values()) for ranks in network.values()) / n_steps if any_network else None
    wait = sum(max(ranks.values()) for ranks in waiting.values()) / n_steps if any_waiting else None
    return net, wait
