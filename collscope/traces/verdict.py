"""One line per (op, size) that says whether the job got what its fabric gives at that size, and the job's
one-line verdict: what communication costs of the step, how much of that is transfer and how much waiting (for
whom), and what a faster network would save. Each clause says "unknown" where the traces do not support it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import median
from typing import TYPE_CHECKING, Any

from collscope.units import format_size

if TYPE_CHECKING:
    from collscope.traces.exposure import StepStat

__all__ = ["verdict", "headline", "human_us"]


def human_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} us"


def verdict(op: str, size_bytes: int, calls_per_step: float | None, busbw: float | None, bench: float | None,
            model: float | None, exposed_per_step_us: float | None, *, has_steps: bool = True,
            model_spread: str | None = None, model_near_ties: str | None = None,
            model_note: str | None = None, model_ceiling: float | None = None) -> str:
    what = f"{op} {format_size(size_bytes)}"
    if calls_per_step and calls_per_step >= 1.5:
        what += f" (x{calls_per_step:.3g} {'per step' if has_steps else 'per rank in the trace'})"
    if busbw is None:
        head = f"{what}: bandwidth unknown (no duration)"
    elif bench:
        head = (f"{what}: {busbw / bench:.0%} of what this fabric gives at that size "
                f"({busbw:.3g} vs {bench:.3g} GB/s busbw in the sweep)")
    elif model:
        head = f"{what}: {busbw / model:.0%} of the model's {model:.3g} GB/s busbw ({busbw:.3g} GB/s)"
        if model_spread:
            head += f" [{model_spread}]"
        if model_ceiling:
            head += (f" (NVLS's own rate inside one NVLink domain, which NCCL's table holds lower: "
                     f"{model_ceiling:.3g} GB/s)")
        if model_note:  # the trace says which pair ran: that settles the near ties' "if it runs"
            head += f" ({model_note})"
        elif model_near_ties:
            head += f" (a near tie in NCCL's model, closer than collscope calls: {model_near_ties} if it runs)"
    else:
        head = f"{what}: {busbw:.3g} GB/s busbw (no sweep or model to compare with)"
    if exposed_per_step_us is not None:
        head += f"; {human_us(exposed_per_step_us)} exposed per step"
    return head


def headline(steps: Sequence[StepStat], late: Sequence[Mapping[str, Any]], what_if: Mapping[str, Any]) -> str:
    """``communication costs 36% of the step; 2% is transfer, 34% waiting for rank 7; a network at the sweep's
    busbw would save 0.3 ms of 16 ms``: shares of the summed step periods of all ranks (exposed time only), the
    savings of :mod:`collscope.traces.whatif` against the median period."""
    total = sum(s.duration_us for s in steps)
    if not steps or total <= 0:
        return "no ProfilerStep#N spans: what communication costs of a step is unknown"
    parts = [f"communication costs {sum(s.exposed_comm_us for s in steps) / total:.0%} of the step"]
    if all(s.exposed_transfer_us is not None and s.exposed_wait_us is not None for s in steps):
        transfer = sum(s.exposed_transfer_us or 0.0 for s in steps) / total
        wait = sum(s.exposed_wait_us or 0.0 for s in steps) / total
        parts.append(f"{transfer:.0%} is transfer, {wait:.0%} waiting{_for_whom(late)}")
    else:
        parts.append("transfer vs waiting unknown (no call has a transfer time: one rank traced, or ranks unmatched)")
    period = median(s.duration_us for s in steps)
    network, waiting = what_if.get("network_us_per_step"), what_if.get("waiting_us_per_step")
    if network is None and waiting is None:
        parts.append("what a faster network would save is unknown (no transfer time)")
    elif network is None:
        parts.append("what a faster network would save is unknown (no sweep or model figure: --against, --gpu or "
                     "--topo)")
    else:
        parts.append(f"a network at the {what_if.get('reference')}'s busbw would save {human_us(network)} of "
                     f"{human_us(period)}")
    if waiting:
        parts.append(f"ranks arriving together would save {human_us(waiting)}")
    return "; ".join(parts)


def _for_whom(late: Sequence[Mapping[str, Any]]) -> str:
    waited = sum(r["others_waited_us"] for r in late)
    if not late or waited <= 0:
        return ""
    top = late[0]
    share = top["others_waited_us"] / waited
    if share >= 0.5:
        return f" for rank {top['rank']}"
    return f" for late peers (rank {top['rank']} the most: {share:.0%} of the waiting)"
