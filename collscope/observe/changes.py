"""Change points in a fleet's history: what got slower or faster, when, at which sizes, and what changed with it.

The records (:class:`Change`, :class:`Outlier`) come first; the detector (pure functions on arrays, no DuckDB)
follows. :mod:`collscope.observe.series` reads the series from the store. The method: docs/observe.md.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np

__all__ = ["Change", "Outlier", "SeriesKey", "SERIES_COLUMNS", "COINCIDE_COLUMNS", "MIN_GAIN", "MIN_RUNS",
           "OUTLIER_SIGMAS", "FIXED_T", "BOOTSTRAP", "split_threshold", "noise_of", "outlier_mask",
           "binary_segmentation", "seeded_intervals", "detect", "Detection", "Shift", "Spike"]

SERIES_COLUMNS: tuple[str, ...] = ("cluster", "op", "nranks", "nnodes", "settings_text", "dtype")
"""The store's columns that name one series: runs of the same series are comparable night after night."""

COINCIDE_COLUMNS: tuple[str, ...] = ("nccl_version", "nccl_git", "net_plugin", "net_plugin_version", "tuner_plugin",
                                     "tuner_plugin_version", "profiler_plugin", "profiler_plugin_version",
                                     "engine_version", "hosts", "fabric_fingerprint", "gpu")
"""Provenance columns compared between the runs just before and just after a change (``coincides_with``)."""

SeriesKey = tuple[str, str, "int | None", "int | None", str, "str | None"]
"""(cluster, op, nranks, nnodes, settings, dtype): one series."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """A sustained shift of busbw in one series over a range of adjacent sizes."""

    cluster: str
    op: str
    nranks: int | None
    nnodes: int | None
    settings: str
    """The settings as canonical text (``settings_text``: sorted K=V joined by ';', or 'default')."""
    dtype: str | None
    size_min_bytes: int
    size_max_bytes: int
    """The range of adjacent sizes that changed together (both ends included)."""
    at: datetime
    """Run time (UTC) of the first run after the change."""
    before_busbw_gbps: float
    """Median busbw of the segment before, at the range's median size (the size ``sizes_bytes`` lists)."""
    after_busbw_gbps: float
    """Median busbw of the segment after, at the same size."""
    change_pct: float
    """after/before - 1 in percent, the median over the range's sizes of each size's ratio of medians."""
    ci_low_pct: float
    ci_high_pct: float
    """95 % bootstrap confidence interval of change_pct (runs resampled within each segment)."""
    coincides_with: dict[str, tuple[Any, Any]]
    """Provenance column -> (value in the last run before, value in the first run after), for the columns whose
    values differ (nccl_version, plugins, hosts, fabric_fingerprint, gpu, ...); empty when nothing logged changed."""
    kind: Literal["regression", "improvement"]
    before_at: datetime | None = None
    """Run time of the last run before the change."""
    runs_before: int = 0
    runs_after: int = 0
    """Runs in the segments either side (each at least :data:`MIN_RUNS`)."""
    sizes_bytes: tuple[int, ...] = field(default=())
    """The sizes of the range that changed, ascending."""
    representative_size_bytes: int = 0
    """The size whose medians before_busbw_gbps and after_busbw_gbps are."""

    @property
    def series(self) -> SeriesKey:
        return (self.cluster, self.op, self.nranks, self.nnodes, self.settings, self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "op": self.op, "nranks": self.nranks, "nnodes": self.nnodes,
                "settings": self.settings, "dtype": self.dtype, "size_min_bytes": self.size_min_bytes,
                "size_max_bytes": self.size_max_bytes, "at": self.at.isoformat(),
                "before_at": self.before_at.isoformat() if self.before_at else None,
                "before_busbw_gbps": self.before_busbw_gbps, "after_busbw_gbps": self.after_busbw_gbps,
                "change_pct": self.change_pct, "ci_low_pct": self.ci_low_pct, "ci_high_pct": self.ci_high_pct,
                "coincides_with": {k: [_plain(b), _plain(a)] for k, (b, a) in self.coincides_with.items()},
                "kind": self.kind, "runs_before": self.runs_before, "runs_after": self.runs_after,
                "sizes_bytes": list(self.sizes_bytes), "representative_size_bytes": self.representative_size_bytes}


@dataclass(frozen=True, slots=True, kw_only=True)
class Outlier:
    """One run far from its neighbours at a range of sizes, with the runs either side back to normal: not a
    change (listed apart)."""

    cluster: str
    op: str
    nranks: int | None
    nnodes: int | None
    settings: str
    dtype: str | None
    size_min_bytes: int
    size_max_bytes: int
    at: datetime
    """Run time (UTC) of the outlying run."""
    run_id: str
    busbw_gbps: float
    """Its busbw at the size where it deviates most (worst_size_bytes)."""
    expected_busbw_gbps: float
    """The series' local median (its neighbours' runs) at that size."""
    deviation_pct: float
    """busbw / expected - 1 in percent, the median over the outlying sizes."""
    worst_size_bytes: int = 0
    source: str | None = None
    """The input file the run came from."""

    @property
    def series(self) -> SeriesKey:
        return (self.cluster, self.op, self.nranks, self.nnodes, self.settings, self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "op": self.op, "nranks": self.nranks, "nnodes": self.nnodes,
                "settings": self.settings, "dtype": self.dtype, "size_min_bytes": self.size_min_bytes,
                "size_max_bytes": self.size_max_bytes, "at": self.at.isoformat(), "run_id": self.run_id,
                "busbw_gbps": self.busbw_gbps, "expected_busbw_gbps": self.expected_busbw_gbps,
                "deviation_pct": self.deviation_pct, "worst_size_bytes": self.worst_size_bytes,
                "source": self.source}


def _plain(value: Any) -> Any:
    """A provenance value as JSON has it (hosts as a list)."""
    if isinstance(value, tuple):
        return list(value)
    return value


# -- the detector: pure functions on arrays (runs x sizes of busbw), no store, no DuckDB --------------------------

MIN_GAIN = 0.03
"""A change smaller than 3 % (either way) is never reported, however certain."""
MIN_RUNS = 3
"""A change is sustained: at least 3 runs on each side. A shorter excursion is outliers, one per run."""
OUTLIER_SIGMAS = 5.0
"""A run is an outlier at a size when it is this many noise sigmas (and at least MIN_GAIN) away from the median of
the (up to) 3 runs before it and from that of the 3 runs after, on the same side, and as far from the run just
before or the run just after (so 1 or 2 runs off are outliers, 3 a change and its return)."""
FIXED_T = 4.0
"""At a change's run, another size joins its range when its before/after t statistic reaches this."""
BOOTSTRAP = 400
"""Bootstrap resamples of the confidence interval."""
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
    pad = np.concatenate([np.full(_WINDOW, np.nan), v, np.full(_WINDOW, np.nan)])
    win = np.lib.stride_tricks.sliding_window_view(pad, _WINDOW)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN window at the ends
        before = np.nanmedian(win[: len(v)], axis=1)
        after = np.nanmedian(win[_WINDOW + 1: _WINDOW + 1 + len(v)], axis=1)
    threshold = max(OUTLIER_SIGMAS * sigma, -math.log1p(-MIN_GAIN))
    db, da = v - before, v - after
    far = (np.abs(db) > threshold) & (np.abs(da) > threshold) & (np.sign(db) == np.sign(da))
    step = np.abs(np.diff(v)) > threshold  # the middle of 3 runs off together is no outlier: a short change
    far &= np.concatenate([[True], step]) | np.concatenate([step, [True]])
    mask[where[far]] = True
    return mask


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


def _segment(values: np.ndarray, sigma: float, min_runs: int, threshold: float) -> list[int]:
    n = len(values)
    cums = np.concatenate([[0.0], np.cumsum(values)])
    found: list[tuple[float, int, int, int]] = []
    for size, starts in seeded_intervals(n, min_runs).items():
        k = np.arange(min_runs, size - min_runs + 1)
        s = starts[:, None]
        stat = (np.abs((cums[s + k] - cums[s]) / k - (cums[s + size] - cums[s + k]) / (size - k))
                * np.sqrt(k * (size - k) / size) / sigma)
        best = stat.argmax(axis=1)
        top = stat[np.arange(len(starts)), best]
        for i in np.flatnonzero(top > threshold):
            found.append((float(top[i]), int(starts[i] + k[best[i]]), int(starts[i]), int(starts[i] + size)))
    taken: list[int] = []
    for _, cut, a, b in sorted(found, reverse=True):
        if not any(a < t < b or abs(cut - t) < min_runs for t in taken):
            taken.append(cut)
    if not taken:
        return []
    bounds = [0, *sorted(taken), n]  # each stretch between splits searched again (the other edge of an excursion)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        taken += [a + c for c in _segment(values[a:b], sigma, min_runs, threshold)]
    return sorted(taken)


@dataclass(frozen=True, slots=True)
class Shift:
    """A change found in a matrix (rows: runs in time order, columns: sizes ascending), before provenance."""

    row: int
    """The first run after."""
    first_col: int
    last_col: int
    start_row: int
    end_row: int
    """Rows [start_row, row) are the segment before, [row, end_row) the one after."""
    log_change: float
    ci_low: float
    ci_high: float
    before_log: float
    after_log: float
    """Medians either side at the representative column (the range's middle)."""
    col: int


@dataclass(frozen=True, slots=True)
class Spike:
    """An outlying run: the columns where it is far from both neighbourhoods, its log deviations there."""

    row: int
    cols: tuple[int, ...]
    deviations: tuple[float, ...]
    expected_log: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Detection:
    shifts: list[Shift]
    spikes: list[Spike]
    noise: np.ndarray
    """Noise sigma per column (log busbw)."""


def _t_at(col: np.ndarray, start: int, row: int, end: int, sigma: float) -> tuple[float, float, int, int]:
    """(t statistic of the means, log change of the medians, runs before, runs after) of one column at ``row``."""
    b, a = col[start:row], col[row:end]
    b, a = b[~np.isnan(b)], a[~np.isnan(a)]
    if len(b) < MIN_RUNS or len(a) < MIN_RUNS:
        return 0.0, 0.0, len(b), len(a)
    t = (a.mean() - b.mean()) / (sigma * math.sqrt(1 / len(a) + 1 / len(b)))
    return float(t), float(np.median(a) - np.median(b)), len(b), len(a)


def _passes(t: float, change: float, sigma: float, sign: float) -> bool:
    return (abs(t) >= FIXED_T and np.sign(t) == sign and np.sign(change) == sign and abs(change) >= sigma
            and abs(math.expm1(change)) >= MIN_GAIN)


def detect(busbw_gbps: np.ndarray, *, seed: int = 0) -> Detection:
    """Changes and outliers of one series: ``busbw_gbps`` is runs (time order) x sizes (ascending), NaN where a
    run lacks a size. Outliers are taken out first (each size on its own), then each size is segmented
    (:func:`binary_segmentation`, seeded, on log busbw); the change points of all sizes with the same direction
    within one run of each other are one event, placed at the run that best splits the sizes that found it;
    every size whose before/after difference at that run is significant (:data:`FIXED_T`), at least its own
    noise and at least :data:`MIN_GAIN` joins it, and each block of adjacent such sizes holding a size that
    found it is a Shift when the confidence interval of its change excludes 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(np.where(busbw_gbps > 0, busbw_gbps, np.nan))
    rows, cols = logs.shape
    noise = np.array([noise_of(logs[:, c]) for c in range(cols)])
    masks = np.zeros_like(logs, dtype=bool)
    for c in range(cols):
        masks[:, c] = outlier_mask(logs[:, c], noise[c])
    clean = np.where(masks, np.nan, logs)
    spikes = _spikes(logs, clean, masks)
    seeds: list[tuple[int, int, float, int, int]] = []  # (row, col, sign, start, end)
    for c in range(cols):
        where = np.flatnonzero(~np.isnan(clean[:, c]))
        if not noise[c] > 0 or len(where) < 2 * MIN_RUNS:
            continue
        cuts = binary_segmentation(clean[where, c], float(noise[c]))
        bounds = [0, *cuts, len(where)]
        for i, cut in enumerate(cuts):
            sign = float(np.sign(np.mean(clean[where[cut:bounds[i + 2]], c])
                                 - np.mean(clean[where[bounds[i]:cut], c])))
            start = int(where[bounds[i]])
            end = int(where[bounds[i + 2] - 1]) + 1
            seeds.append((int(where[cut]), c, sign, start, end))
    shifts = [s for event in _events(seeds) for s in _shifts(event, clean, noise, seed)]
    return Detection(shifts=shifts, spikes=spikes, noise=noise)


def _events(seeds: list[tuple[int, int, float, int, int]]) -> list[list[tuple[int, int, float, int, int]]]:
    """Seeds of the same direction whose rows are within one of the previous one (spanning at most 2 rows)."""
    events: list[list[tuple[int, int, float, int, int]]] = []
    for sign in (-1.0, 1.0):
        group: list[tuple[int, int, float, int, int]] = []
        for s in sorted(x for x in seeds if x[2] == sign):
            if group and (s[0] - group[-1][0] > 1 or s[0] - group[0][0] > 2):
                events.append(group)
                group = []
            group.append(s)
        if group:
            events.append(group)
    return events


def _shifts(event: list[tuple[int, int, float, int, int]], clean: np.ndarray, noise: np.ndarray,
            seed: int) -> list[Shift]:
    sign = event[0][2]
    start, end = max(s[3] for s in event), min(s[4] for s in event)
    seed_cols = sorted({s[1] for s in event})
    candidates = range(max(min(s[0] for s in event) - 1, start + 1), min(max(s[0] for s in event) + 1, end - 1) + 1)
    best_row, best = -1, -1.0
    for row in candidates:
        score = sum(_t_at(clean[:, c], start, row, end, noise[c])[0] ** 2 for c in seed_cols)
        if score > best:
            best_row, best = row, score
    if best_row < 0:
        return []
    ok = [_passes(*_t_at(clean[:, c], start, best_row, end, noise[c])[:2], noise[c], sign)
          if noise[c] > 0 else False for c in range(clean.shape[1])]
    shifts = []
    c = 0
    while c < len(ok):
        if not ok[c]:
            c += 1
            continue
        first = c
        while c + 1 < len(ok) and ok[c + 1]:
            c += 1
        if any(first <= s <= c for s in seed_cols):
            shift = _shift(clean, start, best_row, end, first, c, seed)
            if shift.ci_low * shift.ci_high > 0 and np.sign(shift.log_change) == sign:  # the interval excludes 0
                shifts.append(shift)
        c += 1
    return shifts


def _shift(clean: np.ndarray, start: int, row: int, end: int, first: int, last: int, seed: int) -> Shift:
    """The Shift of columns [first, last] at ``row``: the change is the median over runs of each run's mean
    (over the range's sizes) of log busbw less each size's median before, after minus before; its 95 % interval
    is the percentile bootstrap of the same statistic, runs resampled within each side."""
    block = clean[start:end, first:last + 1]
    k = row - start
    base = np.nanmedian(block[:k], axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a run lacking every size of the range
        scores = np.nanmean(block - base, axis=1)
    before, after = scores[:k], scores[k:]
    before, after = before[~np.isnan(before)], after[~np.isnan(after)]
    change = float(np.median(after) - np.median(before))
    rng = np.random.default_rng([seed, row, first, last])
    boot = (np.median(after[rng.integers(0, len(after), (BOOTSTRAP, len(after)))], axis=1)
            - np.median(before[rng.integers(0, len(before), (BOOTSTRAP, len(before)))], axis=1))
    low, high = np.quantile(boot, [0.025, 0.975])
    mid = (first + last) // 2
    col = clean[start:end, mid]
    return Shift(row=row, first_col=first, last_col=last, start_row=start, end_row=end, log_change=change,
                 ci_low=float(low), ci_high=float(high), before_log=float(np.nanmedian(col[:k])),
                 after_log=float(np.nanmedian(col[k:])), col=mid)


def _spikes(logs: np.ndarray, clean: np.ndarray, masks: np.ndarray) -> list[Spike]:
    spikes = []
    for row in np.flatnonzero(masks.any(axis=1)):
        cols = np.flatnonzero(masks[row])
        expected = []
        for c in cols:
            near = clean[max(row - _WINDOW, 0):row + _WINDOW + 1, c]
            expected.append(float(np.nanmedian(near)) if np.any(~np.isnan(near)) else math.nan)
        spikes.append(Spike(row=int(row), cols=tuple(int(c) for c in cols),
                            deviations=tuple(float(logs[row, c] - e) for c, e in zip(cols, expected, strict=True)),
                            expected_log=tuple(expected)))
    return spikes
