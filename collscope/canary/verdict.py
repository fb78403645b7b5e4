"""The canary's verdict: go, no-go or inconclusive for B against A, priced on the workload's own size mix.

What is compared (:mod:`.verdict_cells`)
    Per block and side, one time per (op, nranks, size): the median of that run's records (nccl-tests'
    out-of-place records when present, else all). A side's communication time per step in a block is the sum
    over workload entries of ``calls x time(op, size)``, a size between measured sizes interpolated linearly
    in log2(size); a workload op or size that both sides did not measure is refused (ConfigError), never
    extrapolated. Without a workload, one call per measured size (the large sizes, where time goes, dominate).

The workload's change (:mod:`.verdict_stats`)
    Interleaved (ABBA), the statistic is the mean over blocks of ``log(T_B / T_A)``: each block holds one run
    of each side next to each other in time, so a drift in load or temperature multiplies both and cancels in
    the ratio (ABBA cancels a linear drift exactly over block pairs). Its interval is the **expanded
    percentile bootstrap** over blocks (resampling blocks, ``n_boot`` resamples, seeded): the plain percentile
    interval is too narrow with 4-16 blocks; the expanded one has the t interval's width and the bootstrap's
    shape, and it is never narrower than the t interval (which decides with 2-4 blocks). Reported as a
    relative change ``exp(x) - 1`` (+0.05: B takes 5% more time). Results that were not interleaved
    (``interleaved=False``) are compared unpaired, A's and B's runs resampled independently, with a caveat:
    node and time-of-day effects are then part of the "change".

The A/A noise
    The spread (standard deviation) of the differences between consecutive A runs, in logs: a difference of
    two A runs is exactly what one block's B/A ratio would be if B were A, and differencing neighbours then
    removing the mean difference cancels a linear drift that a plain spread of A would count as noise. It is
    a per-block figure (what one A/A block varies by); ``aa_noise`` is that of the workload's time, per size it
    is pooled with the two neighbouring sizes. Needs 3 blocks (2 differences).

Ranges (:mod:`.verdict_ranges`)
    Per op and size, the busbw change B against A (``T_A / T_B - 1`` at one size) with its interval. A size
    **loses** when its interval lies entirely on the slower side of 0 *and* its estimated loss exceeds both
    ``max_loss`` and the A/A noise at that size, taken as the largest change an A/A canary of the same blocks
    shows at any of the measured sizes (the per-block A/A noise there, pooled with its neighbours, times a
    Bonferroni t quantile over the sizes, over ``sqrt(blocks)``); **gains** symmetrically; else **same**. The
    noise condition is deliberately stricter than the interval alone: the ranges test every size at once (one
    in twenty excludes 0 by chance), and the noise comes from A alone, so a B/A interval that is narrow by
    chance cannot make its own case. At 8 blocks and 10 sizes the threshold is about one block's A/A noise;
    it shrinks like ``1/sqrt(blocks)``, so more blocks resolve smaller losses.
    Adjacent sizes of one op with the same verdict merge into a :class:`RangeChange`, its interval recomputed
    on the range's time-weighted change (the workload's calls as weights; one call per size when the workload
    calls none of them). ``time_share`` is the fraction of A's workload time spent in the range.

The decision
    * **no-go** when the workload change's interval lies entirely above ``+max_loss``, or a range carrying more
      than ``range_share`` of the workload's time loses (a gain elsewhere does not buy back such a loss);
    * **go** when the interval lies entirely below ``+max_loss`` (the issue's "inside --max-loss": an
      interval below ``-max_loss`` is an improvement, and an improvement is a go) and no heavy range loses;
    * **inconclusive** otherwise, with ``more_blocks``: about how many more blocks would narrow the interval
      enough to clear ``+max_loss`` were the estimate and the spread per block to stay as observed (the
      half-width scales with ``t(n-1) / sqrt(n)``); None when no number up to 64 would, or fewer than 2
      complete blocks exist.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from collscope.analysis.recommend.workload import Workload
from collscope.canary.verdict_cells import read_cells, workload_weights
from collscope.canary.verdict_ranges import SizeRun, size_runs
from collscope.canary.verdict_stats import boot_change, more_blocks_needed, successive_noise
from collscope.canary.verdict_text import (
    decision_reasons,
    pct,
    range_label,
    render_lines,
    share_pct,
)
from collscope.canary.verdict_types import EXIT_CODES, Decision, Interval, RangeChange, Verdict
from collscope.errors import ConfigError

__all__ = ["Decision", "EXIT_CODES", "Interval", "RangeChange", "Verdict", "judge", "render_verdict"]

def _check(max_loss: float, range_share: float, confidence: float, n_boot: int) -> None:
    if not (math.isfinite(max_loss) and 0 <= max_loss < 1):
        raise ConfigError(f"max_loss must be a fraction in [0, 1) (0.01 = 1%), got {max_loss!r}")
    if not 0 <= range_share <= 1:
        raise ConfigError(f"range_share must be a fraction in [0, 1] (0.05 = 5%), got {range_share!r}")
    if not 0.5 <= confidence < 1:
        raise ConfigError(f"confidence must be in [0.5, 1) (0.95 = 95%), got {confidence!r}")
    if n_boot < 200:
        raise ConfigError(f"n_boot must be >= 200 resamples, got {n_boot!r}")


def _to_range(run: SizeRun, confidence: float) -> RangeChange:
    est, low, high = run.log_change
    change = Interval(math.expm1(-est), math.expm1(-high), math.expm1(-low), confidence)
    return RangeChange(op=run.op, min_bytes=run.sizes[0], max_bytes=run.sizes[-1], busbw_change=change,
                       time_share=run.time_share, verdict=run.verdict, a_busbw_gbps=run.a_busbw_gbps,
                       b_busbw_gbps=run.b_busbw_gbps)


def _caveats(interleaved: bool, n: int, dropped: tuple[str, ...], no_workload: bool) -> list[str]:
    out = []
    if not interleaved:
        out.append("the two sides were not interleaved (existing results): node, time-of-day and drift effects "
                   "are not separated from the change, and A's and B's runs were resampled independently")
    if dropped:
        out.append(f"left out {len(dropped)} incomplete: " + "; ".join(dropped[:5]) +
                   (f"; and {len(dropped) - 5} more" if len(dropped) > 5 else ""))
    unit = "blocks" if interleaved else "runs per side"
    if 2 <= n < 5:
        out.append(f"with {n} {unit} the interval is the t interval of {n - 1} degree{'s' if n > 2 else ''} of "
                   f"freedom (too few to bootstrap): wide; 8 or more {unit} give a tighter one")
    if 2 <= n < 3:
        out.append(f"the A/A noise needs 3 {unit}: no size is called a loss or a gain beyond noise")
    if no_workload:
        out.append("no workload given: every measured size counts one call per step, so the largest sizes "
                   "carry most of the time (pass the job's --workload to price its own size mix)")
    return out


def judge(frame: pd.DataFrame, workload: Workload | None = None, *, max_loss: float = 0.01,
          range_share: float = 0.05, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0,
          interleaved: bool = True) -> Verdict:
    """Go, no-go or inconclusive for side B against side A of a canary frame (module docstring for the rules).

    ConfigError when a column is missing, a side has no records, nothing was measured by both sides, or a
    workload entry is not covered by both sides' measurements.
    """
    _check(max_loss, range_share, confidence, n_boot)
    cells = read_cells(frame, paired=interleaved)
    if not cells.keys:
        raise ConfigError("no (op, nranks, size) was measured by both sides in most of their blocks: "
                          "nothing to compare (check that A and B ran the same --op, --nranks and sizes)")
    weights, used = workload_weights(cells, workload)
    no_workload = workload is None or used.per_measured_size
    source = "one call per measured size (no --workload)" if no_workload else f"workload file {used.source}"
    n = min(len(cells.blocks["A"]), len(cells.blocks["B"]))
    caveats = _caveats(interleaved, n, cells.dropped, no_workload)
    nan = Interval(math.nan, math.nan, math.nan, confidence)
    if n < 2:
        unit = "complete block" if interleaved else "complete run of each side"
        reason = (f"only {n} {unit}{'s' if n != 1 else ''} (both sides measured every size): at least 2 are "
                  "needed for an interval; run more blocks")
        return Verdict(decision="inconclusive", workload_change=nan, a_time_us=math.nan, b_time_us=math.nan,
                       ranges=(), aa_noise=math.nan, blocks=n, more_blocks=None, max_loss=max_loss,
                       reasons=(reason,), caveats=tuple(caveats), workload_source=source, interleaved=interleaved)
    t_a, t_b = cells.time_us["A"] @ weights, cells.time_us["B"] @ weights
    la, lb = np.log(t_a)[:, None], np.log(t_b)[:, None]
    est, low, high = (float(v[0]) for v in boot_change(la, lb, paired=interleaved, confidence=confidence,
                                                        n_boot=n_boot, seed=seed))
    change = Interval(math.expm1(est), math.expm1(low), math.expm1(high), confidence)
    aa_noise = math.expm1(float(successive_noise(la)[0]))
    runs = size_runs(cells, weights, paired=interleaved, max_loss=max_loss, confidence=confidence,
                     n_boot=n_boot, seed=seed)
    ranges = tuple(_to_range(r, confidence) for r in runs)
    range_noise = tuple((math.expm1(r.noise), math.expm1(r.threshold)) for r in runs)
    heavy = [i for i, r in enumerate(ranges) if r.verdict == "loses" and r.time_share > range_share]
    boundary = math.log1p(max_loss)
    decision: Decision
    more: int | None = None
    if low > boundary or heavy:
        decision = "no-go"
    elif high <= boundary:
        decision = "go"
    else:
        decision = "inconclusive"
        more = more_blocks_needed(est, low, high, n, boundary, confidence)
    reasons = decision_reasons(decision=decision, change=(change.estimate, change.low, change.high),
                               confidence=confidence, n=n, interleaved=interleaved, max_loss=max_loss,
                               range_share=range_share, ranges=ranges, range_noise=range_noise,
                               heavy=heavy, more=more)
    return Verdict(decision=decision, workload_change=change, a_time_us=float(np.median(t_a)),
                   b_time_us=float(np.median(t_b)), ranges=ranges, aa_noise=aa_noise, blocks=n, more_blocks=more,
                   max_loss=max_loss, reasons=tuple(reasons), caveats=tuple(caveats), workload_source=source,
                   interleaved=interleaved)


def render_verdict(verdict: Verdict) -> str:
    """The text a terminal shows: the decision first, then the workload's change, the noise, the ranges
    table, the reasons and the caveats."""
    rows = [(r.op, range_label(r.min_bytes, r.max_bytes), r.a_busbw_gbps, r.b_busbw_gbps,
             f"{pct(r.busbw_change.estimate)} [{pct(r.busbw_change.low)}, {pct(r.busbw_change.high)}]",
             share_pct(r.time_share), r.verdict) for r in verdict.ranges]
    c = verdict.workload_change
    return render_lines(decision=verdict.decision, exit_code=verdict.exit_code, change=(c.estimate, c.low, c.high),
                        confidence=c.confidence, a_time_us=verdict.a_time_us, b_time_us=verdict.b_time_us,
                        blocks=verdict.blocks, interleaved=verdict.interleaved, aa_noise=verdict.aa_noise,
                        source=verdict.workload_source, rows=rows, reasons=verdict.reasons,
                        caveats=verdict.caveats)
