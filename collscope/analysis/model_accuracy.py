"""How close the models' expected measurement comes to what healthy systems publish, per size band and scope.

The models (NCCL's cost model plus the measured terms, :mod:`.nccl_model.measured`; the grouped point-to-point
model, :mod:`.nccl_model.p2p`) are held against published nccl-tests results in ``bench/scorecard``. Their
accuracy is not one number: at 1 GiB inside one NVLink domain nine published figures in ten are within 15% of the
model, at 1-8 MiB across nodes about half, because mid-size times depend on what a source does not publish (the
channels NCCL settled on, the network's latency, the launch path). This module is that accuracy as a table, so
that ``predict`` says beside each figure how far published systems scatter around it, and ``analyze`` calls a
measurement ``low`` (``suspicious``) only when it is further below (above) the model than published healthy
systems are, at that size and scope.

The table, ``collscope/data/model_accuracy.csv``, is written by ``bench/scorecard.py --accuracy`` from the rows the
models claim (predicted, with no stated reason to be off: a bug report, a TCP transport, SHARP not modelled); a
test fails when it and the scorecard disagree, so a change of the models or of the published rows regenerates it.
Each band holds the published figure over the model's expected measurement (``measured / model``): its 10th,
50th and 90th percentile and how many were within 15%. Some of those rows fitted the measured terms
(``bench/scorecard.py``'s ``FIT_TIME_SOURCES``), so the bands read slightly better than unseen systems would.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from collscope.errors import ConfigError
from collscope.units import format_size
from collscope.vocab.ops import op_facts

__all__ = ["BandAccuracy", "AccuracySample", "published_accuracy", "accuracy_table", "render_accuracy_csv",
           "parse_accuracy_csv", "model_family", "BAND_EDGES_BYTES", "MIN_ROWS_FOR_MARGIN", "TOLERANCE"]

Family = Literal["nccl", "p2p"]

BAND_EDGES_BYTES: tuple[int, ...] = (64, 128 << 10, 1 << 20, 8 << 20, 64 << 20, 512 << 20)
"""Size bands [64 B, 128 KiB), [128 KiB, 1 MiB), [1 MiB, 8 MiB), [8 MiB, 64 MiB), [64 MiB, 512 MiB), [512 MiB, ...).
The scorecard's rows start at 1 MiB; below, the published curves' own times at 64 B-64 KiB
(``bench/scorecard/small_sizes.csv``) fill the first band, and nothing the second."""
MIN_ROWS_FOR_MARGIN = 20
"""A band widens analyze's margins only when it holds at least this many published figures: with fewer, its 10th
and 90th percentiles are one or two sources' figures."""
TOLERANCE = 0.15
"""The scorecard's yardstick (issue 24): a prediction within 15% of the published busbw counts."""
_COLUMNS = ("family", "across_domains", "lo_bytes", "hi_bytes", "rows", "within_15pct", "measured_over_model_p10",
            "measured_over_model_p50", "measured_over_model_p90")
_DATA = "model_accuracy.csv"


def model_family(op: str) -> Family:
    """``"p2p"`` for an op NCCL runs as grouped point-to-point (no NCCL function of its tuning model), else
    ``"nccl"``."""
    return "p2p" if op_facts(op).nccl_func is None else "nccl"


@dataclass(frozen=True, slots=True, kw_only=True)
class AccuracySample:
    """One published figure against the model's expected measurement at the same geometry."""

    family: Family
    across_domains: bool
    """The job spans more than one NVLink domain, so the network carries part of it."""
    size_bytes: int
    measured_over_model: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BandAccuracy:
    """The published figures of one size band and scope, against the model."""

    family: Family
    across_domains: bool
    lo_bytes: int
    hi_bytes: int | None
    """None: no upper edge."""
    rows: int
    within_15pct: int
    measured_over_model_p10: float
    measured_over_model_p50: float
    measured_over_model_p90: float

    @property
    def band(self) -> str:
        lo = format_size(self.lo_bytes)
        return f">= {lo}" if self.hi_bytes is None else f"{lo}-{format_size(self.hi_bytes)}"

    @property
    def scope(self) -> str:
        return "across NVLink domains" if self.across_domains else "inside one NVLink domain"

    @property
    def margins(self) -> tuple[float, float] | None:
        """(below, above) the model: how far the 10th and 90th percentile of the published figures lie from it, or
        None when the band holds fewer than :data:`MIN_ROWS_FOR_MARGIN` figures."""
        if self.rows < MIN_ROWS_FOR_MARGIN:
            return None
        return max(0.0, 1.0 - self.measured_over_model_p10), max(0.0, self.measured_over_model_p90 - 1.0)

    def sentence(self) -> str:
        """The band in words, as predict and analyze print it."""
        few = (f"; only {self.rows} published figure(s), too few to widen analyze's margins"
               if self.margins is None else "")
        network = " (the network)" if self.across_domains else ""
        return (f"published figures at {self.band}, {self.scope}{network}: {self.within_15pct} of {self.rows} within "
                f"{TOLERANCE:.0%} of this model; the middle 80% measured {self.measured_over_model_p10:.2f}-"
                f"{self.measured_over_model_p90:.2f}x it (median {self.measured_over_model_p50:.2f}x){few}")

    def brief(self) -> str:
        """The band in a clause, for a line that already names the model's figure (trace's verdicts)."""
        return (f"published systems measure {self.measured_over_model_p10:.2f}-{self.measured_over_model_p90:.2f}x "
                f"the model at {self.band} {self.scope}, {self.within_15pct} of {self.rows} within "
                f"{TOLERANCE:.0%}")

    def to_dict(self) -> dict[str, object]:
        return {"family": self.family, "across_domains": self.across_domains, "lo_bytes": self.lo_bytes,
                "hi_bytes": self.hi_bytes, "rows": self.rows, "within_15pct": self.within_15pct,
                "measured_over_model_p10": self.measured_over_model_p10,
                "measured_over_model_p50": self.measured_over_model_p50,
                "measured_over_model_p90": self.measured_over_model_p90, "sentence": self.sentence()}


def _band_of(size_bytes: int) -> tuple[int, int | None] | None:
    if size_bytes < BAND_EDGES_BYTES[0]:
        return None
    for lo, hi in zip(BAND_EDGES_BYTES, BAND_EDGES_BYTES[1:], strict=False):
        if lo <= size_bytes < hi:
            return lo, hi
    return BAND_EDGES_BYTES[-1], None


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default), on a sorted list."""
    position = q * (len(sorted_values) - 1)
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    return sorted_values[below] + (sorted_values[above] - sorted_values[below]) * (position - below)


def accuracy_table(samples: Iterable[AccuracySample]) -> list[BandAccuracy]:
    """The bands of ``samples`` (figures below 64 B dropped), in (family, scope, size) order, figures rounded to
    two decimals as the shipped table holds them."""
    groups: dict[tuple[Family, bool, int, int | None], list[float]] = {}
    for s in samples:
        band = _band_of(s.size_bytes)
        if band is not None and math.isfinite(s.measured_over_model) and s.measured_over_model > 0:
            groups.setdefault((s.family, s.across_domains, *band), []).append(s.measured_over_model)
    out = []
    for (family, across, lo, hi), values in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        values.sort()
        out.append(BandAccuracy(family=family, across_domains=across, lo_bytes=lo, hi_bytes=hi, rows=len(values),
                                within_15pct=sum(abs(1.0 / v - 1.0) <= TOLERANCE for v in values),
                                measured_over_model_p10=round(_quantile(values, 0.1), 2),
                                measured_over_model_p50=round(_quantile(values, 0.5), 2),
                                measured_over_model_p90=round(_quantile(values, 0.9), 2)))
    return out


def render_accuracy_csv(table: Sequence[BandAccuracy]) -> str:
    """The CSV of ``collscope/data/model_accuracy.csv``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_COLUMNS)
    for b in table:
        writer.writerow([b.family, int(b.across_domains), b.lo_bytes, "" if b.hi_bytes is None else b.hi_bytes,
                         b.rows, b.within_15pct, f"{b.measured_over_model_p10:.2f}",
                         f"{b.measured_over_model_p50:.2f}", f"{b.measured_over_model_p90:.2f}"])
    return out.getvalue()


def parse_accuracy_csv(text: str, *, where: str = _DATA) -> list[BandAccuracy]:
    """The table from its CSV; a malformed line is a ConfigError naming it."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(header) != _COLUMNS:
        raise ConfigError(f"{where}:1: expected the header {','.join(_COLUMNS)}, got {header}")
    out = []
    for line, cells in enumerate(reader, start=2):
        try:
            family, across, lo, hi, rows, within, p10, p50, p90 = cells
            if family not in ("nccl", "p2p") or across not in ("0", "1"):
                raise ValueError(f"family nccl|p2p and across_domains 0|1, got {family!r}, {across!r}")
            out.append(BandAccuracy(family="nccl" if family == "nccl" else "p2p", across_domains=across == "1",
                                    lo_bytes=int(lo), hi_bytes=int(hi) if hi else None, rows=int(rows),
                                    within_15pct=int(within), measured_over_model_p10=float(p10),
                                    measured_over_model_p50=float(p50), measured_over_model_p90=float(p90)))
        except ValueError as exc:
            raise ConfigError(f"{where}:{line}: expected {len(_COLUMNS)} fields ({', '.join(_COLUMNS)}): {exc}") \
                from None
    return out


@cache
def _shipped() -> tuple[BandAccuracy, ...]:
    text = (resources.files("collscope") / "data" / _DATA).read_text(encoding="utf-8")
    return tuple(parse_accuracy_csv(text))


def published_accuracy(op: str, *, across_domains: bool, size_bytes: int) -> BandAccuracy | None:
    """The published band of ``op``'s model family at ``size_bytes`` and that scope; None when the scorecard holds
    no published figure there (below 64 B, 128 KiB-1 MiB, or a scope without rows)."""
    band = _band_of(size_bytes)
    if band is None:
        return None
    family = model_family(op)
    return next((b for b in _shipped() if (b.family, b.across_domains, b.lo_bytes, b.hi_bytes)
                 == (family, across_domains, *band)), None)
