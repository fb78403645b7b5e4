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

from collscope.observe.segmentation import MIN_GAIN, MIN_RUNS, binary_segmentation, noise_of, outlier_mask

__all__ = ["Change", "Outlier", "SeriesKey", "SERIES_COLUMNS", "COINCIDE_COLUMNS", "FIXED_T", "BOOTSTRAP", "detect",
           "Detection", "Shift", "Spike"]

SERIES_COLUMNS: tuple[str, ...] = ("cluster", "op", "nranks", "nnodes", "settings_text", "dtype")
"""The store's columns that name one series: runs of the same series are comparable night after night."""

COINCIDE_COLUMNS: tuple[str, ...] = ("nccl_version", "nccl_git", "net_plugin", "net_plugin_version", "tuner_plugin",
                                     "tuner_plugin_version", "profiler_plugin", "profiler_plugin_version",
                                     "engine_version", "hosts", "fabric_fingerprint", "gpu")
"""Provenance columns compared between the runs just before and just after a change (``coincides_with``)."""

SeriesKey = tuple[str, str, "int | None", "int | None", str, "str | None"]
"""(cluster, op, nranks, nnodes, settings, dtype): one series."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _InSeries:
    """What a change and an outlier both say: which series, which sizes, when."""

    cluster: str
    op: str
    nranks: int | None
    nnodes: int | None
    settings: str
    """The settings as canonical text (``settings_text``: sorted K=V joined by ';', or 'default')."""
    dtype: str | None
    size_min_bytes: int
    size_max_bytes: int
    """The range of adjacent sizes concerned (both ends included)."""
    at: datetime
    """Run time (UTC): a change's first run after it, an outlier's own run."""

    @property
    def series(self) -> SeriesKey:
        return (self.cluster, self.op, self.nranks, self.nnodes, self.settings, self.dtype)

    def _series_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "op": self.op, "nranks": self.nranks, "nnodes": self.nnodes,
                "settings": self.settings, "dtype": self.dtype, "size_min_bytes": self.size_min_bytes,
                "size_max_bytes": self.size_max_bytes, "at": self.at.isoformat()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Change(_InSeries):
    """A sustained shift of busbw in one series over a range of adjacent sizes (``at``: the first run after it)."""

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

    def to_dict(self) -> dict[str, Any]:
        return {**self._series_dict(), "before_at": self.before_at.isoformat() if self.before_at else None,
                "before_busbw_gbps": self.before_busbw_gbps, "after_busbw_gbps": self.after_busbw_gbps,
                "change_pct": self.change_pct, "ci_low_pct": self.ci_low_pct, "ci_high_pct": self.ci_high_pct,
                "coincides_with": {k: [_plain(b), _plain(a)] for k, (b, a) in self.coincides_with.items()},
                "kind": self.kind, "runs_before": self.runs_before, "runs_after": self.runs_after,
                "sizes_bytes": list(self.sizes_bytes), "representative_size_bytes": self.representative_size_bytes}


@dataclass(frozen=True, slots=True, kw_only=True)
class Outlier(_InSeries):
    """One run far from its neighbours at a range of sizes, with the runs either side back to normal: not a
    change (listed apart; ``at``: that run)."""

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

    def to_dict(self) -> dict[str, Any]:
        return {**self._series_dict(), "run_id": self.run_id,
                "busbw_gbps": self.busbw_gbps, "expected_busbw_gbps": self.expected_busbw_gbps,
                "deviation_pct": self.deviation_pct, "worst_size_bytes": self.worst_size_bytes,
                "source": self.source}


def _plain(value: Any) -> Any:
    """A provenance value as JSON has it (hosts as a list)."""
    if isinstance(value, tuple):
        return list(value)
    return value


# -- the detector: pure functions on arrays (runs x sizes of busbw), no store, no DuckDB --------------------------

FIXED_T = 4.0
"""At a change's run, another size joins its range when its before/after t statistic reaches this."""
BOOTSTRAP = 400
"""Bootstrap resamples of the confidence interval."""
_WINDOW = 3


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
    shifts = _distinct([s for event in _events(seeds) for s in _shifts(event, clean, noise, seed)])
    return Detection(shifts=shifts, spikes=spikes, noise=noise)


def _distinct(shifts: list[Shift]) -> list[Shift]:
    """One change per step: of two same-way shifts over common sizes each inside the other's segments (the same
    step found by seeds a few runs apart), the better determined (change / interval width) is kept."""
    kept: list[Shift] = []
    for s in sorted(shifts, key=lambda x: -abs(x.log_change) / max(x.ci_high - x.ci_low, 1e-12)):
        if not any((k.log_change < 0) == (s.log_change < 0) and k.first_col <= s.last_col
                   and s.first_col <= k.last_col and s.start_row < k.row < s.end_row
                   and k.start_row < s.row < k.end_row for k in kept):
            kept.append(s)
    return sorted(kept, key=lambda x: (x.row, x.first_col))


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
    stats = [_t_at(clean[:, c], start, best_row, end, noise[c]) if noise[c] > 0 else (0.0, 0.0, 0, 0)
             for c in range(clean.shape[1])]
    ok = [_passes(t, change, noise[c], sign) if noise[c] > 0 else False for c, (t, change, _, _) in enumerate(stats)]
    for c in range(1, len(ok) - 1):  # one size between two of the range, changed the same way less surely: in it
        if ok[c - 1] and ok[c + 1] and np.sign(stats[c][1]) == sign:
            ok[c] = True
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
