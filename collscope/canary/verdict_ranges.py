"""Per op and size, the busbw change B against A with its interval, judged against the A/A noise; adjacent sizes
of one op that agree merge into one range (see :mod:`collscope.canary.verdict` for the rule).

The A/A noise at a size is :func:`~collscope.canary.verdict_stats.successive_noise` of A's times there, pooled
(root mean square) with its two measured neighbours of the same op: 3 x (blocks - 2) degrees of freedom
instead of blocks - 2 make a steadier estimate, and noise changes slowly with size.

"Beyond noise" at a size means beyond the largest change an A/A canary of the same blocks would show at any
of the measured sizes: ``t(1 - (1 - confidence) / (2 m), df) x noise x sqrt((1/n_A + 1/n_B) / 2)`` for ``m``
measured sizes (Bonferroni over the sizes: the ranges test all of them at once, and one size in twenty
excludes 0 by chance), ``df`` the pooled noise's degrees of freedom. The noise comes from A alone, so a B/A
interval that happens to be narrow cannot make its own case; the threshold shrinks like ``1/sqrt(blocks)``, so
more blocks resolve smaller losses. At 8 blocks and 10 sizes it is about the A/A noise of one block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from collscope.canary.verdict_cells import Cells, Key
from collscope.canary.verdict_stats import boot_change, successive_noise, t_quantile

__all__ = ["SizeRun", "size_runs"]

SizeVerdict = Literal["loses", "gains", "same"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SizeRun:
    """Adjacent sizes of one (op, nranks) with one verdict; changes in logs of time (+ = B slower)."""

    op: str
    nranks: int
    sizes: tuple[int, ...]
    verdict: SizeVerdict
    log_change: tuple[float, float, float]
    """Estimate, low, high of the time-weighted log time change of the range."""
    noise: float
    """The largest A/A noise (log, one block) of its sizes; nan when unknown."""
    threshold: float
    """The largest change (log) an A/A canary of these blocks shows at its sizes: what "beyond noise" means."""
    time_share: float
    a_busbw_gbps: float
    b_busbw_gbps: float


def _pooled_noise(keys: tuple[Key, ...], noise: np.ndarray) -> np.ndarray:
    out = np.full(len(keys), np.nan)
    for i, (op, nranks, _) in enumerate(keys):
        near = [j for j in (i - 1, i, i + 1) if 0 <= j < len(keys) and keys[j][:2] == (op, nranks)]
        values = noise[near]
        if np.isfinite(values).all():
            out[i] = math.sqrt(float(np.mean(values**2)))
    return out


def _thresholds(noise: np.ndarray, n_a: int, n_b: int, confidence: float) -> np.ndarray:
    """Per size, the change (log) an A/A canary of these runs stays within at every size (module docstring)."""
    if n_a < 3 or n_b < 2:
        return np.full(noise.shape, np.nan)
    m = max(len(noise), 1)
    df = 3 * (n_a - 2)
    crit = t_quantile(1 - (1 - confidence) / (2 * m), df)
    return np.asarray(crit * noise * math.sqrt((1 / n_a + 1 / n_b) / 2))


def _size_verdicts(est: np.ndarray, low: np.ndarray, high: np.ndarray, threshold: np.ndarray,
                   max_loss: float) -> list[SizeVerdict]:
    floor = math.log1p(max_loss)
    out: list[SizeVerdict] = []
    for e, lo, hi, thr in zip(est, low, high, threshold, strict=True):
        need = max(floor, thr) if math.isfinite(thr) else math.inf
        out.append("loses" if lo > 0 and e > need else "gains" if hi < 0 and -e > need else "same")
    return out


def size_runs(cells: Cells, weights: np.ndarray, *, paired: bool, max_loss: float, confidence: float,
              n_boot: int, seed: int) -> list[SizeRun]:
    """Every measured size in one range of its op (the table covers all of them), in (op, nranks, size) order."""
    ta, tb = cells.time_us["A"], cells.time_us["B"]
    la, lb = np.log(ta), np.log(tb)
    est, low, high = boot_change(la, lb, paired=paired, confidence=confidence, n_boot=n_boot, seed=seed)
    noise = _pooled_noise(cells.keys, successive_noise(la))
    threshold = _thresholds(noise, la.shape[0], lb.shape[0], confidence)
    verdicts = _size_verdicts(est, low, high, threshold, max_loss)
    a_time = np.median(ta, axis=0) * weights
    shares = a_time / a_time.sum() if a_time.sum() > 0 else np.zeros_like(a_time)
    runs: list[SizeRun] = []
    start = 0
    keys = cells.keys
    while start < len(keys):
        end = start + 1
        while end < len(keys) and keys[end][:2] == keys[start][:2] and verdicts[end] == verdicts[start]:
            end += 1
        cols = slice(start, end)
        w = weights[cols] if weights[cols].sum() > 0 else np.ones(end - start)
        r_est, r_low, r_high = boot_change(np.log(ta[:, cols] @ w)[:, None], np.log(tb[:, cols] @ w)[:, None],
                                           paired=paired, confidence=confidence, n_boot=n_boot, seed=seed)
        span_noise, span_threshold = noise[cols], threshold[cols]
        runs.append(SizeRun(
            op=keys[start][0], nranks=keys[start][1], sizes=tuple(k[2] for k in keys[start:end]),
            verdict=verdicts[start], log_change=(float(r_est[0]), float(r_low[0]), float(r_high[0])),
            noise=float(np.max(span_noise)) if np.isfinite(span_noise).all() else math.nan,
            threshold=float(np.max(span_threshold)) if np.isfinite(span_threshold).all() else math.nan,
            time_share=float(shares[cols].sum()),
            a_busbw_gbps=float(np.median(cells.busbw_gbps["A"][:, cols])),
            b_busbw_gbps=float(np.median(cells.busbw_gbps["B"][:, cols]))))
        start = end
    return runs
