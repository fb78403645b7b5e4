"""analyze's per-call cost rule (collscope.analysis.run_cost) held against published curves.

``analyze`` judges a measured curve's larger sizes against the model's expected time plus the run's own per-call
cost: its fastest call from 64 B to 64 KiB less the model's time there, when that is positive and the curve has
three such sizes or more (``run_cost.curve_run_cost``). The scorecard (bench/scorecard.py) predicts from the
geometry alone, as ``predict`` does, so that rule had never been scored. This script scores it: for every published
curve whose small sizes ``bench/scorecard/small_sizes.csv`` holds (the source's own times at 64 B-64 KiB, or its
busbw where it prints no time), it takes the scorecard's prediction at those sizes, the cost the rule gives, and
the curve's published rows above 64 KiB with and without that cost, and prints the counts within 15% and more than
30% off: for the rows the scorecard claims (no stated reason) and for the rows whose stated reason is a per-call
cost.

    .venv/bin/python bench/run_cost_check.py [--rows]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py, the published rows' reader

import scorecard  # noqa: E402

from collscope.analysis.analyze_options import AnalyzeOptions  # noqa: E402
from collscope.analysis.efficiency import Margins  # noqa: E402
from collscope.analysis.run_cost import (  # noqa: E402
    RUN_FLOOR_MAX_BYTES,
    RunCost,
    curve_run_cost,
    model_time_us,
    slower_busbw,
)
from collscope.units import format_size  # noqa: E402

_OPTIONS = AnalyzeOptions()
MARGINS = Margins(nccl=_OPTIONS.nccl_model_error, alpha_beta=_OPTIONS.alpha_beta_error, link=_OPTIONS.link_tolerance,
                  published=_OPTIONS.published_margins)
"""analyze's margins at its defaults (the published bands widen them): a published figure further below the
expected one than the margin below reads ``low``."""
PER_CALL_REASON = "per call"
"""Words of the stated reasons that name a per-call cost the model does not price (published.csv off_reason)."""


@dataclass(frozen=True, slots=True)
class Judged:
    """One published row above 64 KiB: the scorecard's prediction, and the same with the curve's cost."""

    scored: scorecard.ScoredRow
    model_gbps: float
    with_cost_gbps: float

    @property
    def row(self) -> scorecard.PublishedRow:
        return self.scored.row

    @property
    def across_domains(self) -> bool:
        return self.scored.across_domains


@dataclass(frozen=True, slots=True)
class CurveCheck:
    """One published curve: the rule's cost and its rows above 64 KiB that the scorecard predicts."""

    system: str
    op: str
    cost: RunCost | None
    model_floor_us: float | None
    rows: tuple[Judged, ...]


def check(published: Sequence[scorecard.PublishedRow], small: Sequence[scorecard.SmallPoint]) -> list[CurveCheck]:
    """Each curve of ``small`` against its published rows (ValueError for a curve the published rows lack)."""
    out = []
    for (system, op), (points, rows) in scorecard.small_curves(published, small).items():
        template = rows[0]
        at_small = scorecard.score(scorecard.curve_small_rows(points, rows))
        model_us = {s.row.size_bytes: model_time_us(op, template.nranks, s.row.size_bytes, s.predicted_gbps)
                    for s in at_small if s.predicted_gbps and s.model.startswith("NCCL ")}
        cost = curve_run_cost([(p.size_bytes, p.time(template.nranks)) for p in points], model_us.get)
        judged = []
        for s in scorecard.score(rows):
            if not s.predicted_gbps or s.row.size_bytes <= RUN_FLOOR_MAX_BYTES:
                continue
            extra_us = cost.extra_us if cost is not None and s.model.startswith("NCCL ") else 0.0
            judged.append(Judged(s, s.predicted_gbps,
                                 slower_busbw(s.predicted_gbps, op, s.row.nranks, s.row.size_bytes, extra_us)))
        out.append(CurveCheck(system, op, cost, model_us.get(cost.floor_size) if cost else None, tuple(judged)))
    return out


def _close(j: Judged, predicted: float) -> bool:
    return abs(predicted / j.row.busbw_gbps - 1) <= scorecard.TOLERANCE


def _far(j: Judged, predicted: float) -> bool:
    return abs(predicted / j.row.busbw_gbps - 1) > scorecard.FAR


def _low(j: Judged, predicted: float) -> bool:
    """Whether analyze calls the published figure ``low`` against ``predicted`` (its margin below, :data:`MARGINS`)."""
    below, _ = MARGINS.for_scope(j.row.op, j.row.size_bytes, across_domains=j.across_domains)
    return j.row.busbw_gbps < (1 - below) * predicted


def _counts(rows: Sequence[Judged]) -> str:
    def count(test: Callable[[Judged, float], bool]) -> str:
        return f"{sum(test(j, j.model_gbps) for j in rows)} -> {sum(test(j, j.with_cost_gbps) for j in rows)}"

    return (f"within 15% {count(_close)} of {len(rows)}; more than 30% off {count(_far)}; "
            f"read low by analyze {count(_low)}")


def render(checks: Sequence[CurveCheck], show_rows: bool) -> str:
    lines = []
    for c in checks:
        if c.cost is None:
            lines.append(f"{c.system} {c.op}: no cost (fewer than 3 small sizes, no model there, or no call "
                         "slower than the model)")
        else:
            lines.append(f"{c.system} {c.op}: fastest call {c.cost.floor_us:.1f} us at "
                         f"{format_size(c.cost.floor_size)}, model {c.model_floor_us:.1f} us: "
                         f"cost {c.cost.extra_us:.1f} us a call")
        if show_rows:
            for j in c.rows:
                tag = "claimed" if j.scored.claimed else "reason"
                lines.append(f"    {format_size(j.row.size_bytes):>6} published {j.row.busbw_gbps:8.2f}  "
                             f"model {j.model_gbps / j.row.busbw_gbps:5.2f}x  with the cost "
                             f"{j.with_cost_gbps / j.row.busbw_gbps:5.2f}x  ({tag})")
    rows = [j for c in checks for j in c.rows]
    claimed = [j for j in rows if j.scored.claimed]
    per_call = [j for j in rows if PER_CALL_REASON in j.row.off_reason]
    costed = sum(c.cost is not None for c in checks)
    lines += ["",
              f"{len(checks)} published curves with their small sizes, {costed} with a per-call cost by the rule",
              f"  rows the scorecard claims: {_counts(claimed)}",
              f"  rows whose stated reason is a per-call cost: {_counts(per_call)}"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", action="store_true", help="each published row, without and with the cost")
    args = parser.parse_args(argv)
    try:
        checks = check(scorecard.read_published(), scorecard.read_small())
    except (OSError, ValueError) as exc:
        print(f"run_cost_check: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render(checks, args.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
