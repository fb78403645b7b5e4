"""The fit of NVLS's shortest step on sm100 (collscope.analysis.nccl_model.measured.NVLS_STEP_MIN_US).

For each candidate floor the script scores every row of ``bench/scorecard/published.csv`` with the library and counts
the rows the models claim (no stated reason to be off) within 15% and the rows more than 30% off with no stated
reason; the floor chosen is the one with the most rows within 15%, then the fewest rows far off, then the smallest
rms of log(predicted / published). It then leaves one source (URL) out at a time: the floor is chosen on the other
sources' rows the same way and the left-out source's claimed rows are scored with it. It prints each candidate's
counts, the yardstick (no floor: the models before the term), the shipped floor's, and the held-out count with and
without the term.

    .venv/bin/python bench/nvls_step_fit.py
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py, the published rows' reader

import scorecard  # noqa: E402

from collscope.analysis.nccl_model import measured  # noqa: E402

FLOORS_US = (0.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0)


def rank(scored: Sequence[scorecard.ScoredRow]) -> tuple[int, int, float]:
    """The choice's key: claimed rows within 15%, fewer rows far off with no reason, smaller rms."""
    within, far, rms = scorecard.criteria(scored)
    return within, -far, -rms


def main() -> int:
    rows = scorecard.read_published()
    by_floor = scorecard.scored_by_constant(rows, measured, "NVLS_STEP_MIN_US", FLOORS_US)
    claimed = sum(s.claimed for s in by_floor[0.0])
    print(f"{len(rows)} published rows, {claimed} claimed by the models")
    for floor, scored in by_floor.items():
        within, far, rms = rank(scored)
        label = " (no term: the yardstick)" if floor == 0.0 else " (shipped)" if floor == measured.NVLS_STEP_MIN_US \
            else ""
        print(f"  floor {floor:4g} us: {within}/{claimed} claimed rows within 15%, {-far} more than 30% off with no "
              f"stated reason, rms {-rms:.4f}{label}")
    folds = scorecard.leave_one_source_out(by_floor, lambda _, scored: rank(scored), 0.0,
                                           counted=lambda s: s.claimed)
    for fold in folds:
        if fold.within != fold.within_baseline:
            print(f"    left out {fold.source}: floor {fold.chosen:g} us chosen on the others; {fold.within} claimed "
                  f"rows within 15% ({fold.within_baseline} without the term)")
    print(f"  leaving one source out: {sum(f.within for f in folds)}/{claimed} claimed rows within 15% "
          f"({sum(f.within_baseline for f in folds)} without the term)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
