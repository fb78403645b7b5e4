"""What a canary's verdict is made of (:mod:`collscope.canary.verdict` decides it): the decision, its intervals and
the per-range changes, as plain records that the text, the why, the report and the JSON document read."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Decision", "EXIT_CODES", "Interval", "RangeChange", "Verdict", "finite_or_none"]

Decision = Literal["go", "no-go", "inconclusive"]
EXIT_CODES: dict[str, int] = {"go": 0, "no-go": 1, "inconclusive": 3}


def finite_or_none(x: float | None) -> float | None:
    """``x`` as a JSON number, or None (null) when it is missing or not finite."""
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class Interval:
    """A relative change with its bootstrap confidence interval (nan when it could not be computed)."""

    estimate: float
    low: float
    high: float
    confidence: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": finite_or_none(self.estimate), "low": finite_or_none(self.low),
                "high": finite_or_none(self.high), "confidence": self.confidence}


@dataclass(frozen=True)
class RangeChange:
    """Adjacent measured sizes of one op merged while they agree (same verdict)."""

    op: str
    min_bytes: int
    max_bytes: int
    busbw_change: Interval
    """B vs A, relative (-0.05 = B 5% lower busbw)."""
    time_share: float
    """Fraction of the workload's A communication time in this range (0..1)."""
    verdict: Literal["loses", "gains", "same"]
    a_busbw_gbps: float
    """Median over blocks and the range's sizes."""
    b_busbw_gbps: float

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "min_bytes": self.min_bytes, "max_bytes": self.max_bytes,
                "busbw_change": self.busbw_change.to_dict(), "time_share": self.time_share,
                "verdict": self.verdict, "a_busbw_gbps": finite_or_none(self.a_busbw_gbps),
                "b_busbw_gbps": finite_or_none(self.b_busbw_gbps)}


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    workload_change: Interval
    """Relative change of communication time per step, B vs A (+ = B slower)."""
    a_time_us: float
    """Per step, median over blocks."""
    b_time_us: float
    ranges: tuple[RangeChange, ...]
    aa_noise: float
    """A/A relative noise of the workload time per block (module docstring); nan with fewer than 3 blocks."""
    blocks: int
    """Complete blocks used (not interleaved: the smaller side's count of complete runs)."""
    more_blocks: int | None
    """Inconclusive: about how many more blocks would decide at the observed noise; else None."""
    max_loss: float
    reasons: tuple[str, ...]
    caveats: tuple[str, ...]
    workload_source: str
    interleaved: bool

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.decision]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; non-finite numbers become null."""
        return {"decision": self.decision, "exit_code": self.exit_code,
                "workload_change": self.workload_change.to_dict(), "a_time_us": finite_or_none(self.a_time_us),
                "b_time_us": finite_or_none(self.b_time_us), "aa_noise": finite_or_none(self.aa_noise),
                "blocks": self.blocks,
                "more_blocks": self.more_blocks, "max_loss": self.max_loss,
                "ranges": [r.to_dict() for r in self.ranges], "reasons": list(self.reasons),
                "caveats": list(self.caveats), "workload_source": self.workload_source,
                "interleaved": self.interleaved}
