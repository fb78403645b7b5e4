"""The fit of LL128's rate on sm80 (collscope.analysis.nccl_model.measured.LL128_SM80_RATE).

NCCL's model picks Ring/LL128 for all_reduce on 8 A100 of one node from about 4 to 16 MiB. The rows it touches are
the scorecard's sm80 rows inside one NVLink domain that NCCL's model predicts as Ring/LL128. For each candidate rate
the script scores every row of ``bench/scorecard/published.csv`` and prints:

* the scorecard's view (a prediction from the geometry alone): the claimed rows within 15%, the rows more than 30%
  off with no stated reason, the rms of log(predicted / published), and each touched row's predicted / published;
* analyze's view: each touched row against the expected figure plus its curve's own per-call cost, the rule analyze
  applies to a run that measured its small sizes (``collscope.analysis.run_cost``, the curve's 64 B-64 KiB times from
  ``bench/scorecard/small_sizes.csv``).

The rate chosen is the least correction (the largest rate) at which every touched row is within 15% in analyze's
view: the run's measured per-call cost is its own and the rate is the GPU's, so the rate is fitted once the cost is
taken out. One source holds such rows (Azure ND A100 v4), so nothing can be left out: the script says so.

    .venv/bin/python bench/ll128_rate_fit.py
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py and run_cost_check.py

import run_cost_check  # noqa: E402
import scorecard  # noqa: E402

from collscope.analysis.nccl_model import measured  # noqa: E402
from collscope.units import format_size  # noqa: E402

RATES = (1.0, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55)


def touched(scored: Sequence[scorecard.ScoredRow]) -> list[scorecard.ScoredRow]:
    """The rows the rate moves: sm80 GPUs inside one NVLink domain, predicted as NCCL's Ring/LL128."""
    return [s for s in scored if s.model == "NCCL Ring/LL128" and not s.across_domains
            and any(g in s.row.gpu for g in ("A100", "A800"))]


def with_cost(published: Sequence[scorecard.PublishedRow], small: Sequence[scorecard.SmallPoint]
              ) -> dict[tuple[str, str, int], float]:
    """(system, op, size) -> predicted / published with the curve's own per-call cost, at the library's current
    constants (run_cost_check's rule), for the rows above 64 KiB of every curve with small sizes."""
    return {(j.row.system, j.row.op, j.row.size_bytes): j.with_cost_gbps / j.row.busbw_gbps
            for c in run_cost_check.check(published, small) for j in c.rows}


def main() -> int:
    rows = scorecard.read_published()
    small = scorecard.read_small()
    by_rate = scorecard.scored_by_constant(rows, measured, "LL128_SM80_RATE", RATES)
    analyze_view = scorecard.by_constant(measured, "LL128_SM80_RATE", RATES, lambda: with_cost(rows, small))
    shipped = measured.LL128_SM80_RATE
    moved = touched(by_rate[1.0])
    claimed = sum(s.claimed for s in by_rate[1.0])
    print(f"{len(rows)} published rows, {claimed} claimed; {len(moved)} rows on sm80 inside one NVLink domain that "
          f"NCCL's model predicts as Ring/LL128, of {len({s.row.source_url for s in moved})} source(s)")
    chosen = None
    for rate in RATES:
        within, far, rms = scorecard.criteria(by_rate[rate])
        now = {(s.row.system, s.row.op, s.row.size_bytes): s for s in touched(by_rate[rate])}
        geometry = ", ".join(f"{format_size(k[2])} {s.ratio:.2f}" for k, s in now.items() if s.ratio is not None)
        costed = [analyze_view[rate].get(k) for k in now]
        all_within = bool(costed) and all(c is not None and abs(c - 1) <= scorecard.TOLERANCE for c in costed)
        if all_within and chosen is None:
            chosen = rate
        label = " (no term: NCCL's model)" if rate == 1.0 else " (shipped)" if rate == shipped else ""
        print(f"  rate {rate:4g}: {within}/{claimed} claimed rows within 15%, {far} more than 30% off with no stated "
              f"reason, rms {rms:.4f}{label}")
        print(f"      predicted / published, from the geometry: {geometry}")
        print("      with the curve's own per-call cost (analyze): "
              + ", ".join(f"{format_size(k[2])} {c:.2f}" if c is not None else f"{format_size(k[2])} -"
                          for k, c in zip(now, costed, strict=True)))
    print(f"  the least correction placing every touched row within 15% with its curve's own per-call cost: "
          f"{chosen if chosen is not None else 'none of the candidates'} (shipped {shipped:g})")
    print("  one source holds the touched rows: no source can be left out to check the rate out of sample")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
