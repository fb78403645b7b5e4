"""The one noise rule of the analysis: when does one configuration beat another beyond the measured noise?

DESIGN.md ("a difference counts only beyond noise"): wins (recommend), crossovers (analyze), heatmap boxes
(report) and anomalies all use :func:`beyond_noise`. A candidate beats a baseline at a measured size when

* both cells have at least :data:`MIN_REPEATS` repeats (fewer: the noise is unknown, nothing is claimed);
* ``gain = median(candidate) / median(baseline) - 1`` is larger than the minimum gain;
* the gain is larger than the combined spread ``spread(candidate) + spread(baseline)``, where a cell's
  spread is its relative range ``(max - min) / median`` of busbw over the repeats (with 3-5 repeats an IQR is
  as wide as the range or unstable; the range is the conservative choice);

and that holds at **at least** :data:`MIN_ADJACENT_SIZES` adjacent measured sizes: a lone size that wins is
as likely noise as a trend. "Loses beyond noise" is the same rule with the two sides swapped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = ["MIN_REPEATS", "MIN_ADJACENT_SIZES", "Measured", "Sample", "CellVerdict", "relative_spread", "gain",
           "combined_noise", "cell_verdict", "beyond_noise", "describe_rule"]

MIN_REPEATS = 3
"""Repeats each side needs before a difference counts."""
MIN_ADJACENT_SIZES = 2
"""Adjacent measured sizes a difference must hold at."""

CellVerdict = Literal["beats", "too few repeats", "within noise", "below min gain"]


class Measured(Protocol):
    """busbw of one (configuration, size) cell over its repeats, decimal GB/s."""

    @property
    def median_gbps(self) -> float: ...
    @property
    def min_gbps(self) -> float: ...
    @property
    def max_gbps(self) -> float: ...
    @property
    def repeats(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """A plain :class:`Measured` (for callers that hold the statistics in a DataFrame row)."""

    median_gbps: float
    min_gbps: float
    max_gbps: float
    repeats: int


def relative_spread(cell: Measured) -> float:
    """``(max - min) / median`` of busbw; infinite when the median is not positive or not a number."""
    if not cell.median_gbps > 0:
        return math.inf
    return (cell.max_gbps - cell.min_gbps) / cell.median_gbps


def gain(candidate: Measured, baseline: Measured) -> float:
    """``median(candidate) / median(baseline) - 1`` (infinite when the baseline's median is not positive)."""
    return candidate.median_gbps / baseline.median_gbps - 1 if baseline.median_gbps > 0 else math.inf


def combined_noise(candidate: Measured, baseline: Measured) -> float:
    return relative_spread(candidate) + relative_spread(baseline)


def cell_verdict(candidate: Measured, baseline: Measured, min_gain: float) -> CellVerdict:
    """The rule at one size, before the adjacent-sizes condition."""
    g = gain(candidate, baseline)
    if not g > min_gain:
        return "below min gain"
    if min(candidate.repeats, baseline.repeats) < MIN_REPEATS:
        return "too few repeats"
    return "beats" if g > combined_noise(candidate, baseline) else "within noise"


def beyond_noise(pairs: Sequence[tuple[Measured | None, Measured | None]], min_gain: float) -> list[bool]:
    """Per measured size, in size order: does the candidate (first) beat the baseline (second) beyond noise?

    ``pairs`` holds one (candidate, baseline) per adjacent measured size; None where a side has no usable cell
    (it breaks a run). A size counts only inside a run of at least :data:`MIN_ADJACENT_SIZES` adjacent sizes
    that all pass :func:`cell_verdict`.
    """
    hits = [c is not None and b is not None and cell_verdict(c, b, min_gain) == "beats" for c, b in pairs]
    out = [False] * len(hits)
    start = 0
    while start < len(hits):
        if not hits[start]:
            start += 1
            continue
        end = start
        while end < len(hits) and hits[end]:
            end += 1
        if end - start >= MIN_ADJACENT_SIZES:
            out[start:end] = [True] * (end - start)
        start = end
    return out


def describe_rule(min_gain: float) -> str:
    """One sentence for reports and comments."""
    return (f"a difference counts when both sides have >= {MIN_REPEATS} repeats and the median busbw differs by "
            f"more than {min_gain * 100:g}% and by more than the combined spread ((max-min)/median over repeats, "
            f"both sides), at >= {MIN_ADJACENT_SIZES} adjacent measured sizes")
