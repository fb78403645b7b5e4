"""Change points and outliers in one size's series of runs: the noise estimate, the outlier rule and seeded binary
segmentation, pure functions on arrays of log busbw (:mod:`collscope.observe.changes` joins the sizes into
changes). The method and its calibration: docs/observe.md, "observe changes".
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["MIN_GAIN", "MIN_RUNS", "OUTLIER_SIGMAS", "split_threshold", "noise_of", "outlier_mask",
           "seeded_intervals", "binary_segmentation"]

MIN_GAIN = 0.03
"""A change smaller than 3 % (either way) is never reported, however certain."""
MIN_RUNS = 3
"""A change is sustained: at least 3 runs on each side. A shorter excursion is outliers, one per run."""
OUTLIER_SIGMAS = 5.0
"""A run is an outlier at a size when it is this many noise sigmas (and at least MIN_GAIN) away from the median of
the (up to) 3 runs before it and from that of the 3 runs after, on the same side, and as far from the run just
before or the run just after (so 1 or 2 runs off are outliers, 3 a change and its return)."""
_NOISE_FLOOR = 1e-4
_WINDOW = 3


def split_threshold(runs: int) -> float:
    """The CUSUM statistic (in noise sigmas) a split must exceed in a series of ``runs`` runs.

    Calibrated on stationary Gaussian series with the noise estimated as :func:`noise_of` does (so its own error
    counts) and every seeded interval searched (:func:`binary_segmentation`): about 0.2 % of stationary series
    get a split at one size. The 99.8 % quantile of the largest statistic was 6.1-6.3, 5.7, 5.55, 5.0, 4.8 and
    5.2 at 20-40, 60, 90, 200, 1000 and 4000 runs; tests/observe/test_observe_changes.py pins the rate."""
    n = max(runs, 2)
    return 4.6 + 0.08 * math.log(n) + 40.0 / n


def noise_of(values: np.ndarray) -> float:
    """Run-to-run noise (sigma) of log busbw at one size: the MAD of successive differences / (0.6745 sqrt 2),
    which a level shift or a lone outlier barely moves. NaN (missing) values are left out."""
    v = values[~np.isnan(values)]
    if len(v) < 3:
        return math.nan
    d = np.diff(v)
    return max(float(np.median(np.abs(d - np.median(d)))) / (0.6745 * math.sqrt(2.0)), _NOISE_FLOOR)


def outlier_mask(values: np.ndarray, sigma: float) -> np.ndarray:
    """True where a value (log busbw of consecutive runs at one size) is far from both its neighbourhoods."""
    mask = np.zeros(len(values), dtype=bool)
    where = np.flatnonzero(~np.isnan(values))
    if len(where) < 3 or not sigma > 0:
        return mask
    v = values[where]
    med = _medians_of_3(v)  # med[j]: the median of v[j:j + 3]
    before = np.full(len(v), np.nan)
    after = np.full(len(v), np.nan)
    before[3:] = med[: len(v) - 3]
    after[: len(v) - 3] = med[1: len(v) - 2]
    before[1], after[-2] = v[0], v[-1]  # the ends have fewer neighbours
    before[2], after[-3] = (v[0] + v[1]) / 2, (v[-1] + v[-2]) / 2
    threshold = max(OUTLIER_SIGMAS * sigma, -math.log1p(-MIN_GAIN))
    db, da = v - before, v - after
    far = (np.abs(db) > threshold) & (np.abs(da) > threshold) & (np.sign(db) == np.sign(da))
    step = np.abs(np.diff(v)) > threshold  # the middle of 3 runs off together is no outlier: a short change
    far &= np.concatenate([[True], step]) | np.concatenate([step, [True]])
    mask[where[far]] = True
    return mask


def _medians_of_3(v: np.ndarray) -> np.ndarray:
    a, b, c = v[:-2], v[1:-1], v[2:]
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


@functools.lru_cache(maxsize=64)
def seeded_intervals(runs: int, min_runs: int = MIN_RUNS) -> dict[int, np.ndarray]:
    """Interval length -> start indices: the whole series, then lengths shrinking by sqrt(2) down to
    2 ``min_runs``, each length's intervals overlapping by half (Kovacs, Li, Buhlmann, Munk 2020, "Seeded
    binary segmentation")."""
    out: dict[int, set[int]] = {}
    length = float(runs)
    while length >= 2 * min_runs:
        size = int(math.ceil(length))
        count = max(int(math.ceil(2 * runs / length)) - 1, 1)
        starts = np.floor(np.linspace(0, runs - size, count)).astype(int) if count > 1 else np.zeros(1, int)
        out.setdefault(size, set()).update(int(x) for x in starts)
        length /= math.sqrt(2.0)
    return {size: np.array(sorted(starts)) for size, starts in out.items()}


def binary_segmentation(values: np.ndarray, sigma: float, min_runs: int = MIN_RUNS) -> list[int]:
    """Change points of the mean of ``values`` (no NaN): indices of the first value after each, ascending.

    Seeded binary segmentation: in every interval of :func:`seeded_intervals`, the best split by the CUSUM
    statistic |mean(left) - mean(right)| sqrt(k (n - k) / n) / sigma (``min_runs`` values each side at least);
    splits over :func:`split_threshold` are taken greedily, the largest first, each only when its interval
    holds no split already taken; then each stretch between splits is searched the same way (so both edges of a
    short excursion between two long stretches are found, which plain binary segmentation misses)."""
    cuts = _segment(values, sigma, min_runs, split_threshold(len(values)))
    for i in range(len(cuts)):  # each split placed best between its neighbours (an interval's edge biases it)
        a, b = cuts[i - 1] if i else 0, cuts[i + 1] if i + 1 < len(cuts) else len(values)
        k = np.arange(min_runs, b - a - min_runs + 1)
        if len(k):
            cums = np.concatenate([[0.0], np.cumsum(values[a:b])])
            n = b - a
            stat = np.abs(cums[k] / k - (cums[n] - cums[k]) / (n - k)) * np.sqrt(k * (n - k) / n)
            cuts[i] = a + int(k[int(np.argmax(stat))])
    return cuts


@functools.lru_cache(maxsize=64)
def _splits(runs: int, min_runs: int) -> tuple[np.ndarray, ...]:
    """Every (interval, split) of :func:`seeded_intervals` flat: start, split, end, 1/left, 1/right, weight
    sqrt(k (n - k) / n), the interval's number."""
    parts = []
    number = 0
    for size, starts in seeded_intervals(runs, min_runs).items():
        k = np.arange(min_runs, size - min_runs + 1)
        grid = np.broadcast_to(starts[:, None], (len(starts), len(k)))
        parts.append((grid.ravel(), (grid + k).ravel(), (grid + size).ravel(), np.tile(1.0 / k, len(starts)),
                      np.tile(1.0 / (size - k), len(starts)), np.tile(np.sqrt(k * (size - k) / size), len(starts)),
                      np.repeat(np.arange(number, number + len(starts)), len(k))))
        number += len(starts)
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def _segment(values: np.ndarray, sigma: float, min_runs: int, threshold: float) -> list[int]:
    n = len(values)
    if n < 2 * min_runs:
        return []
    cums = np.concatenate([[0.0], np.cumsum(values)])
    start, cut, end, inv_left, inv_right, weight, interval = _splits(n, min_runs)
    mid = cums[cut]
    stat = np.abs((mid - cums[start]) * inv_left - (cums[end] - mid) * inv_right) * weight / sigma
    over = np.flatnonzero(stat > threshold)  # nearly always empty: the rest is for the few intervals over it
    best: dict[int, int] = {}
    for i in over:
        j = int(interval[i])
        if j not in best or stat[i] > stat[best[j]]:
            best[j] = int(i)
    found = sorted(((float(stat[i]), int(cut[i]), int(start[i]), int(end[i])) for i in best.values()), reverse=True)
    taken: list[int] = []
    for _, at, a, b in found:
        if not any(a < t < b or abs(at - t) < min_runs for t in taken):
            taken.append(at)
    if not taken:
        return []
    bounds = [0, *sorted(taken), n]  # each stretch between splits searched again (the other edge of an excursion)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        taken += [a + c for c in _segment(values[a:b], sigma, min_runs, threshold)]
    return sorted(taken)
