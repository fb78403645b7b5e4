"""The JSON document of a canary: what ``collscope canary --json`` prints and ``verdict.json`` holds.

DESIGN.md's ``canary --json`` keys at the top level (``verdict``, ``workload_change {estimate, ci}``, ``ranges
[{op, min_bytes, max_bytes, change, ci, a_choice, b_choice}]``, ``aa_noise``, ``blocks``, ``tuner_rules``,
``needed_blocks``), with what the verdict rests on beside them (its reasons, caveats, the workload, each range's
verdict and time share, the why). Changes are fractions, B against A: the workload's time (+ = B slower), a
range's busbw (- = B slower). Non-finite numbers are null.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from collscope.canary.verdict_types import finite_or_none as _num

if TYPE_CHECKING:
    from collscope.canary.verdict_types import RangeChange, Verdict
    from collscope.canary.why import Why

__all__ = ["canary_document"]


def _choices(why: Why | None, r: RangeChange) -> tuple[str | None, str | None]:
    """What each side chose over the range, where the why found the choice changed there (None: not known, or
    the same on both sides)."""
    if why is None:
        return None, None
    hits = [c for c in why.changes if c.op == r.op and c.min_bytes <= r.max_bytes and c.max_bytes >= r.min_bytes]
    if not hits:
        return None, None
    return "; ".join(dict.fromkeys(c.a_choice for c in hits)), "; ".join(dict.fromkeys(c.b_choice for c in hits))


def canary_document(verdict: Verdict, why: Why | None = None, **extra: Any) -> dict[str, Any]:
    """The document (module doc); ``extra`` keys (the results directory, the labels, the inputs) are added."""
    wc = verdict.workload_change
    ranges = []
    for r in verdict.ranges:
        a_choice, b_choice = _choices(why, r)
        ranges.append({"op": r.op, "min_bytes": r.min_bytes, "max_bytes": r.max_bytes,
                       "change": _num(r.busbw_change.estimate),
                       "ci": [_num(r.busbw_change.low), _num(r.busbw_change.high)], "verdict": r.verdict,
                       "time_share": _num(r.time_share), "a_busbw_gbps": _num(r.a_busbw_gbps),
                       "b_busbw_gbps": _num(r.b_busbw_gbps), "a_choice": a_choice, "b_choice": b_choice})
    return {"verdict": verdict.decision, "exit_code": verdict.exit_code,
            "workload_change": {"estimate": _num(wc.estimate), "ci": [_num(wc.low), _num(wc.high)],
                                "confidence": wc.confidence},
            "a_time_us": _num(verdict.a_time_us), "b_time_us": _num(verdict.b_time_us), "ranges": ranges,
            "aa_noise": _num(verdict.aa_noise), "blocks": verdict.blocks, "needed_blocks": verdict.more_blocks,
            "max_loss": verdict.max_loss, "interleaved": verdict.interleaved,
            "workload_source": verdict.workload_source, "reasons": list(verdict.reasons),
            "caveats": list(verdict.caveats),
            "tuner_rules": [] if why is None else [rule.line() for rule in why.tuner_rules],
            "tuner_csv": None if why is None else why.tuner_csv,
            "why": None if why is None else why.to_dict(), **extra}
