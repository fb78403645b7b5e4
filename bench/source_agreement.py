"""Do the published sources agree with each other where they measured the same thing? The yardstick of the
scorecard's misses.

A row of bench/scorecard/published.csv that the models miss is either the models' error or the source's own
scatter: another run of the same geometry would have published another figure. The scorecard alone cannot tell
the two apart. This script can, where two or more systems published the same model inputs (op, GPU, ranks,
nodes, NVLink domain, NICs, forced NCCL_ALGO: ``scorecard.model_inputs``) at the same size, so that the models
give them one prediction. For those groups it prints how far apart the sources are (largest over smallest
figure: above 1.15 / 0.85 no one value lies within 15% of them all), how many rows one value per group could
place within 15% (the ceiling no model of these inputs can pass on them), how many the models place, and each
group where every source lies within 15% of one value and the models still miss: there the miss is the models'
own, not the sources'.

Only the rows the models claim take part (predicted, no ``off_reason``): a row with a stated reason is already
known to measure something the models do not cover.

    .venv/bin/python bench/source_agreement.py
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py, the published rows' reader

import scorecard  # noqa: E402

from collscope.units import format_size  # noqa: E402

TOLERANCE = scorecard.TOLERANCE
ONE_VALUE_SPREAD = (1 + TOLERANCE) / (1 - TOLERANCE)
"""Largest over smallest figure of a group that one value can hold all within 15% (1.15 / 0.85 = 1.35)."""


@dataclass(frozen=True, slots=True)
class Group:
    """Published rows of two or more systems that share the model inputs and the size."""

    rows: tuple[scorecard.ScoredRow, ...]

    @property
    def figures(self) -> list[float]:
        return [s.row.busbw_gbps for s in self.rows]

    @property
    def spread(self) -> float:
        """Largest over smallest published busbw."""
        return max(self.figures) / min(self.figures)

    @property
    def agree(self) -> bool:
        """One value lies within 15% of every figure."""
        return self.spread <= ONE_VALUE_SPREAD + 1e-9

    @property
    def ceiling(self) -> int:
        """The most rows one value can place within 15%."""
        best = 0
        for figure in self.figures:
            for value in (figure, figure * (1 - TOLERANCE), figure * (1 + TOLERANCE)):
                best = max(best, sum(abs(value / f - 1) <= TOLERANCE + 1e-9 for f in self.figures))
        return best

    @property
    def within(self) -> int:
        """Rows the models place within 15%."""
        return sum(s.within for s in self.rows)

    @property
    def predicted_gbps(self) -> float:
        assert self.rows[0].predicted_gbps is not None
        return self.rows[0].predicted_gbps

    def text(self) -> str:
        r = self.rows[0].row
        sources = ", ".join(f"{s.row.busbw_gbps:.1f} ({s.row.system})" for s in self.rows)
        ratio = self.predicted_gbps / statistics.median(self.figures)
        nodes = "1 node" if r.nnodes == 1 else f"{r.nnodes} nodes"
        return (f"{r.op} {format_size(r.size_bytes)} on {r.nranks} x {r.gpu} ({nodes}, NVLink domain "
                f"{r.nvl_domain}): published {sources}; the models {self.predicted_gbps:.1f} ({self.rows[0].model}), "
                f"{ratio:.2f} x the sources' median, spread {self.spread:.2f}")


def groups(scored: Sequence[scorecard.ScoredRow]) -> list[Group]:
    """The claimed rows grouped by model inputs and size, groups of two or more systems only, in first-seen order."""
    by_key: dict[tuple[scorecard.ModelInputs, int], list[scorecard.ScoredRow]] = {}
    for s in scored:
        if s.claimed:
            by_key.setdefault((scorecard.model_inputs(s.row), s.row.size_bytes), []).append(s)
    return [Group(tuple(members)) for members in by_key.values() if len({s.row.system for s in members}) > 1]


def report(found: Sequence[Group]) -> list[str]:
    """The summary lines, then the groups where the sources agree and the models miss."""
    rows = sum(len(g.rows) for g in found)
    agreeing = [g for g in found if g.agree]
    apart = [g for g in found if not g.agree]
    lines = [f"{len(found)} groups of published rows from two or more systems share the model inputs and the size "
             f"({rows} rows the models claim)",
             f"  every source within {TOLERANCE:.0%} of one value: {len(agreeing)} groups; no one value within "
             f"{TOLERANCE:.0%} of all (largest over smallest figure above {ONE_VALUE_SPREAD:.2f}): {len(apart)}",
             f"  one value per group places {sum(g.ceiling for g in found)}/{rows} rows within {TOLERANCE:.0%} (no "
             f"model of these inputs can do better on them); the models place {sum(g.within for g in found)}/{rows}"]
    missed = [g for g in agreeing if g.within < len(g.rows)]
    lines.append(f"groups where the sources agree and the models miss ({len(missed)}, "
                 f"{sum(len(g.rows) - g.within for g in missed)} rows):")
    lines += [f"  {g.text()}" for g in missed]
    if apart:
        lines.append(f"groups whose sources no one value holds within {TOLERANCE:.0%} ({len(apart)}):")
        lines += [f"  {g.text()}" for g in apart]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    data = Path(args[1]) if len(args) == 2 and args[0] == "--data" else scorecard.DATA
    if args and len(args) != 2:
        print("usage: source_agreement.py [--data CSV]", file=sys.stderr)
        return 2
    try:
        rows = scorecard.read_published(data)
    except (OSError, ValueError) as exc:
        print(f"source_agreement: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report(groups(scorecard.score(rows)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
