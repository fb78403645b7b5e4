"""The fit of the network's per-call cost (collscope.analysis.nccl_model.measured.NET_EXTRA_US) on published rows.

The rows are the scorecard's multi-node rows that NCCL's model predicts (not alltoall, gather, scatter or sendrecv,
which have their own terms, and not the rows whose ``off_reason`` states why they are off). For each candidate cost the
script scores every row with the library, then leaves one source (URL) out at a time: the cost is chosen on the other
sources (most rows within 15%, the smaller cost on a tie) and the left-out source is scored with it. It prints the
shipped cost's count, the count without the term (the yardstick), and the held-out count with and without it.

Then the same for an LL call's cost (``NET_EXTRA_LL_US``) on the published curves' own small sizes
(``bench/scorecard/small_sizes.csv``: 64 B-64 KiB, where NCCL runs LL), across NVLink domains, of the curves the
models claim; its yardstick is the 1-64 MiB rows' cost (``NET_EXTRA_US``) on LL too.

    .venv/bin/python bench/net_term_fit.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py, the published rows' reader

import scorecard  # noqa: E402

from collscope.analysis.nccl_model import measured  # noqa: E402

COSTS_US = (0.0, 10.0, 20.0, 25.0, 30.0, 35.0, 40.0, 50.0)


def main() -> int:
    rows = [r for r in scorecard.read_published()
            if r.nnodes > 1 and scorecard.on_nccl_model(r) and not r.off_reason]
    by_cost = scorecard.scored_by_constant(rows, measured, "NET_EXTRA_US", COSTS_US)
    sources = sorted({r.source_url for r in rows})
    print(f"{len(rows)} multi-node rows from {len(sources)} sources (point-to-point ops and rows with a stated "
          "reason left out)")
    print(f"  without the term (the yardstick): {sum(s.within for s in by_cost[0.0])}/{len(rows)} within 15%")
    print(f"  shipped cost {measured.NET_EXTRA_US:g} us: "
          f"{sum(s.within for s in by_cost[measured.NET_EXTRA_US])}/{len(rows)}")
    folds = scorecard.leave_one_source_out(by_cost, lambda cost, scored: (sum(s.within for s in scored), -cost),
                                           0.0)
    for fold in folds:
        print(f"    left out {fold.source}: cost {fold.chosen:g} us chosen on the others; {fold.within}/{fold.rows} "
              f"within 15% ({fold.within_baseline} without the term)")
    print(f"  leaving one source out: {sum(f.within for f in folds)}/{len(rows)} within 15% "
          f"({sum(f.within_baseline for f in folds)} without the term)")
    ll_main()
    return 0


def ll_main() -> None:
    """The LL call's cost on the published small sizes across NVLink domains (module doc)."""
    published = scorecard.read_published()
    small = scorecard.small_size_rows(scorecard.score(published), scorecard.read_small())
    candidates = sorted({*COSTS_US, measured.NET_EXTRA_US})
    by_cost = scorecard.scored_by_constant(small, measured, "NET_EXTRA_LL_US", candidates)

    def counted(s: scorecard.ScoredRow) -> bool:
        return s.across_domains and scorecard.on_nccl_model(s.row) and bool(s.model.startswith("NCCL "))

    n = sum(counted(s) for s in by_cost[0.0])
    shipped = measured.NET_EXTRA_LL_US
    print(f"{n} published small-size figures (64 B-64 KiB) across NVLink domains, of "
          f"{len({s.row.source_url for s in by_cost[0.0] if counted(s)})} sources")
    for cost in candidates:
        print(f"  LL cost {cost:g} us: {sum(s.within for s in by_cost[cost] if counted(s))}/{n} within 15%"
              + (" (shipped)" if cost == shipped else "")
              + (" (the 1-64 MiB rows' cost, the yardstick)" if cost == measured.NET_EXTRA_US else ""))
    folds = scorecard.leave_one_source_out(
        by_cost, lambda cost, scored: (sum(s.within for s in scored if counted(s)), -cost), measured.NET_EXTRA_US,
        counted=counted)
    folds = [f for f in folds if f.rows]
    for fold in folds:
        print(f"    left out {fold.source}: LL cost {fold.chosen:g} us chosen on the others; {fold.within}/{fold.rows}"
              f" within 15% ({fold.within_baseline} with {measured.NET_EXTRA_US:g} us)")
    print(f"  leaving one source out: {sum(f.within for f in folds)}/{n} within 15% "
          f"({sum(f.within_baseline for f in folds)} with {measured.NET_EXTRA_US:g} us)")


if __name__ == "__main__":
    raise SystemExit(main())
