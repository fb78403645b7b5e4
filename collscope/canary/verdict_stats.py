"""The statistics under the canary verdict (:mod:`collscope.canary.verdict`): bootstrap intervals over blocks,
the A/A noise of one block, and how many more blocks would narrow an interval enough to decide.

Everything works on natural logs of times (a change of a ratio is a difference of logs, symmetric in A and B,
and a drift that multiplies both sides cancels in a difference). Callers turn logs back into relative changes
with ``expm1``.

**The interval is the expanded percentile bootstrap** (Hesterberg, "What teachers should know about the
bootstrap", The American Statistician 69, 2015): the plain percentile interval of a mean is too narrow with few
resamplable units (it behaves like a z interval with the ``1/n`` variance), and a canary has 4 to 16 blocks. The
expanded interval reads the bootstrap distribution at the percentiles ``alpha'/2`` and ``1 - alpha'/2`` where
``Phi^-1(1 - alpha'/2) = sqrt(n / (n - 1)) * t(1 - alpha/2, n - 1)``, which gives it the width of the t interval
while keeping the bootstrap's shape (skew). It is never narrower than the t interval on either side: with 2 to 4
blocks the bootstrap cannot reach beyond the blocks it resamples (with 2 it would be their range, a 50%
interval), and the t interval then sets the width.

The statistic is the mean of the per-block log ratios (paired, interleaved) or the difference of the sides'
mean log times (unpaired: A's and B's runs resampled independently, ``n`` the smaller side's count).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

__all__ = ["t_quantile", "expanded_levels", "boot_change", "successive_noise", "more_blocks_needed",
           "MORE_BLOCKS_CAP"]

MORE_BLOCKS_CAP = 64
"""More blocks than this are never suggested: past it the difference sits too close to the margin to resolve."""
_NORMAL = NormalDist()


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish-Fisher expansion in ``1/df``
    (Abramowitz and Stegun 26.7.5; 3.1824 for p = 0.975, df = 3, exact 3.1824)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = _NORMAL.inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _width_factor(n: int, confidence: float) -> float:
    """``sqrt(n / (n - 1)) * t(1 - alpha/2, n - 1)``: the expanded interval's half-width in units of the
    bootstrap's standard error (``sd / sqrt(n)`` with ``ddof = 0``)."""
    return math.sqrt(n / (n - 1)) * t_quantile(0.5 + confidence / 2, n - 1)


def expanded_levels(n: int, confidence: float) -> tuple[float, float]:
    """The quantiles of the bootstrap distribution that bound the expanded percentile interval."""
    z = _width_factor(n, confidence)
    tail = 1.0 - _NORMAL.cdf(z)
    return tail, 1.0 - tail


def boot_change(log_a: np.ndarray, log_b: np.ndarray, *, paired: bool, confidence: float, n_boot: int,
                seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate, low and high of the log change B against A, one per column.

    ``log_a``/``log_b``: log times, one row per block (paired: row i of both is block i) or per run (unpaired),
    one column per quantity (a size, a range, the workload). The same resampled blocks serve every column, so
    columns stay coherent (a range's blocks are its sizes' blocks).
    """
    rng = np.random.default_rng(seed)
    if paired:
        diff = log_b - log_a
        n = diff.shape[0]
        estimate = diff.mean(axis=0)
        idx = rng.integers(0, n, size=(n_boot, n))
        boot = diff[idx].mean(axis=1)
    else:
        n_a, n_b = log_a.shape[0], log_b.shape[0]
        n = min(n_a, n_b)
        estimate = log_b.mean(axis=0) - log_a.mean(axis=0)
        idx_a = rng.integers(0, n_a, size=(n_boot, n_a))
        idx_b = rng.integers(0, n_b, size=(n_boot, n_b))
        boot = log_b[idx_b].mean(axis=1) - log_a[idx_a].mean(axis=1)
    q_low, q_high = expanded_levels(n, confidence)
    low, high = np.quantile(boot, [q_low, q_high], axis=0)
    if paired:
        se = diff.std(axis=0, ddof=1) / math.sqrt(n)
    else:
        se = np.sqrt(log_a.var(axis=0, ddof=1) / n_a + log_b.var(axis=0, ddof=1) / n_b)
    half = t_quantile(0.5 + confidence / 2, n - 1) * se
    return estimate, np.minimum(low, estimate - half), np.maximum(high, estimate + half)


def successive_noise(log_a: np.ndarray) -> np.ndarray:
    """The A/A noise of one block, per column: the standard deviation of the differences between consecutive A
    runs (rows in time order), ``nan`` with fewer than 3 runs.

    A difference of two A runs is what one block's B/A log ratio would be if B were A, so its spread *is* the
    A/A noise of a block; taking differences of neighbours and removing their mean cancels a linear drift (a
    slow warm-up or a neighbour job ramping up), which a plain standard deviation of A would count as noise.
    """
    if log_a.shape[0] < 3:
        return np.full(log_a.shape[1:], np.nan)
    diffs = np.diff(log_a, axis=0)
    return np.asarray(diffs.std(axis=0, ddof=1))


def more_blocks_needed(estimate: float, low: float, high: float, n: int, boundary: float,
                       confidence: float) -> int | None:
    """About how many more blocks would bring the interval's near edge to the other side of ``boundary``
    (all in logs), were the estimate and the per-block spread to stay as observed; None when no number up to
    :data:`MORE_BLOCKS_CAP` would (the estimate sits at the boundary)."""
    if estimate < boundary:
        half, margin = high - estimate, boundary - estimate
    else:
        half, margin = estimate - low, estimate - boundary
    if not (margin > 0 and half > 0 and n >= 2):
        return None
    per_block = half / _width_factor(n, confidence) * math.sqrt(n)
    for total in range(n + 1, n + MORE_BLOCKS_CAP + 1):
        if _width_factor(total, confidence) * per_block / math.sqrt(total) <= margin:
            return total - n
    return None
