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


def scored_by_floor(rows: Sequence[scorecard.PublishedRow]) -> dict[float, list[scorecard.ScoredRow]]:
    """floor -> every row scored with NVLS's shortest step at that floor (0: no term)."""
    out = {}
    shipped = measured.NVLS_STEP_MIN_US
    try:
        for floor in FLOORS_US:
            measured.NVLS_STEP_MIN_US = floor  # nvls_step_us reads the module's constant at each call
            out[floor] = scorecard.score(rows)
    finally:
        measured.NVLS_STEP_MIN_US = shipped
    return out


def rank(scored: Sequence[scorecard.ScoredRow]) -> tuple[int, int, float]:
    """The choice's key: claimed rows within 15%, fewer rows far off with no reason, smaller rms."""
    claimed = [s for s in scored if s.claimed]
    return (sum(s.within for s in claimed), -sum(s.unexplained for s in scored),
            -scorecard.rms_log_ratio(claimed))


def main() -> int:
    rows = scorecard.read_published()
    by_floor = scored_by_floor(rows)
    claimed = sum(s.claimed for s in by_floor[0.0])
    print(f"{len(rows)} published rows, {claimed} claimed by the models")
    for floor, scored in by_floor.items():
        within, far, rms = rank(scored)
        label = " (no term: the yardstick)" if floor == 0.0 else " (shipped)" if floor == measured.NVLS_STEP_MIN_US \
            else ""
        print(f"  floor {floor:4g} us: {within}/{claimed} claimed rows within 15%, {-far} more than 30% off with no "
              f"stated reason, rms {-rms:.4f}{label}")
    sources = sorted({r.source_url for r in rows})
    held = held_without = 0
    for source in sources:
        floor = max(FLOORS_US, key=lambda f, left=source: rank([s for s in by_floor[f] if s.row.source_url != left]))
        ok = sum(s.within for s in by_floor[floor] if s.row.source_url == source and s.claimed)
        before = sum(s.within for s in by_floor[0.0] if s.row.source_url == source and s.claimed)
        held += ok
        held_without += before
        if ok != before:
            print(f"    left out {source}: floor {floor:g} us chosen on the others; {ok} claimed rows within 15% "
                  f"({before} without the term)")
    print(f"  leaving one source out: {held}/{claimed} claimed rows within 15% ({held_without} without the term)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
