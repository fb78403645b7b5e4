"""The trend figure of one series: busbw per run at a few representative sizes, one panel per size (each on its own
linear scale, so a 10% shift shows at every size), the changes marked where they happened and annotated with what
coincided, the outliers ringed. A series run several times a day (a fleet's nodes each running the same test)
shows each run as a dot and a line through each day's median.

Pure: a :class:`Trend` in, a matplotlib Figure out; :mod:`collscope.observe.report` saves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from collscope.figure_text import plain_text  # noqa: E402
from collscope.observe.changes import Change, Outlier  # noqa: E402
from collscope.observe.trends import Points, datetime64  # noqa: E402
from collscope.units import format_size  # noqa: E402

__all__ = ["Trend", "trend_figure", "representative_sizes", "coincide_text", "daily_medians", "MAX_PANELS"]

MAX_PANELS = 4
"""At most this many sizes per figure: the smallest, the middle and the largest common size, and the sizes at
which the series' changes were measured."""
_REGRESSION, _IMPROVEMENT, _OUTLIER = "#c0392b", "#2e7d32", "#e67e22"
_ANNOTATION_CHARS = 48


@dataclass(frozen=True, slots=True)
class Trend:
    """One series' points at the sizes drawn (:data:`collscope.observe.trends.Points`)."""

    title: str
    points: Points
    changes: Sequence[Change] = ()
    outliers: Sequence[Outlier] = ()
    versions: Sequence[tuple[datetime, str]] = ()
    """(first run, NCCL version) wherever the version differs from the run before: drawn in grey, so an upgrade
    that changed nothing shows too."""


def representative_sizes(runs_per_size: dict[int, int], runs: int, changes: Sequence[Change] = (),
                         limit: int = MAX_PANELS) -> list[int]:
    """The sizes a figure shows: the changes' representative sizes first, then the smallest, the largest and the
    middle (in log size) of the sizes measured in at least half of the runs (all sizes when none is), ascending."""
    common = sorted(s for s, n in runs_per_size.items() if n * 2 >= runs) or sorted(runs_per_size)
    chosen: list[int] = []
    for size in [c.representative_size_bytes for c in changes if c.representative_size_bytes in runs_per_size]:
        if size not in chosen:
            chosen.append(size)
    if common:
        middle = common[len(common) // 2]
        for size in (common[0], common[-1], middle):
            if size not in chosen:
                chosen.append(size)
    return sorted(chosen[:limit])


def _short(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    text = "none" if value is None else str(value)
    return text if len(text) <= _ANNOTATION_CHARS else text[:_ANNOTATION_CHARS - 3] + "..."


def coincide_text(change: Change, *, short: bool = False) -> str:
    """``nccl_version 2.28.9 -> 2.29.2; hosts a,b -> c,d``, or ``nothing logged changed``."""
    if not change.coincides_with:
        return "nothing logged changed"
    show = _short if short else (lambda v: "none" if v is None else
                                 ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v))
    return "; ".join(f"{name} {show(before)} -> {show(after)}"
                     for name, (before, after) in sorted(change.coincides_with.items()))


def daily_medians(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per UTC day of ``times`` (datetime64, ascending): the mean time and the median value of its runs."""
    if not len(times):
        return times, values
    days = times.astype("datetime64[D]")
    starts = np.flatnonzero(np.concatenate([[True], days[1:] != days[:-1]]))
    ends = [*starts[1:], len(times)]
    at = np.array([times[a:b].astype("int64").mean() for a, b in zip(starts, ends, strict=True)])
    return (at.astype("int64").astype(times.dtype),
            np.array([np.median(values[a:b]) for a, b in zip(starts, ends, strict=True)]))


def _in_range(size: int, low: int, high: int) -> bool:
    return low <= size <= high


@plain_text
def trend_figure(trend: Trend) -> Figure:
    """One panel per size (shared time axis): the runs' busbw, a vertical line at each change (red: regression,
    green: improvement; solid in the panels whose size changed, dotted in the others) annotated once with the
    change and what coincided, a ring around each outlier at the sizes it covers, and a grey line where the NCCL
    version changed."""
    sizes = sorted(trend.points)
    height_in = 1.2 + 1.7 * max(len(sizes), 1)
    fig = Figure(figsize=(9, height_in), dpi=100)
    axes = fig.subplots(max(len(sizes), 1), 1, sharex=True, squeeze=False)[:, 0]
    # fixed margins in inches (title above, dates below): tight_layout drew every figure twice
    fig.subplots_adjust(left=0.09, right=0.98, top=1 - 0.45 / height_in, bottom=0.6 / height_in, hspace=0.12)
    for ax, size in zip(axes, sizes, strict=False):
        times, values = trend.points[size]
        day_times, day_medians = daily_medians(times, values)
        if len(day_times) == len(times):  # one run a day: the runs joined
            ax.plot(times, values, marker="o", ms=3, lw=1.2, color="#1f4e79")
        else:  # several a day: each run a dot, the line through each day's median
            ax.plot(times, values, ls="none", marker="o", ms=2, alpha=0.35, color="#1f4e79")
            ax.plot(day_times, day_medians, lw=1.4, color="#1f4e79", label="median of the day's runs")
        ax.set_ylabel(f"{format_size(size)}\nGB/s", fontsize=8)
        ax.grid(True, alpha=0.25)
        ax.tick_params(labelsize=7)
        for o in trend.outliers:
            hit = np.flatnonzero(times == datetime64(o.at))
            if _in_range(size, o.size_min_bytes, o.size_max_bytes) and len(hit):
                ax.plot(times[hit[:1]], values[hit[:1]], marker="o", ms=11, mfc="none", mec=_OUTLIER, mew=2)
        for c in trend.changes:
            colour = _REGRESSION if c.kind == "regression" else _IMPROVEMENT
            changed = _in_range(size, c.size_min_bytes, c.size_max_bytes)
            ax.axvline(c.at, color=colour, lw=1.6 if changed else 1.0, ls="-" if changed else ":")
        for at, _version in trend.versions:
            ax.axvline(at, color="#888888", lw=0.8, ls="--", zorder=0)
    first = axes[0]
    for at, version in trend.versions:
        first.annotate(f"NCCL {version}", xy=(at, 0.0), xycoords=("data", "axes fraction"), xytext=(2, 3),
                       textcoords="offset points", fontsize=6.5, color="#666666", rotation=90, va="bottom")
    for i, c in enumerate(trend.changes):
        colour = _REGRESSION if c.kind == "regression" else _IMPROVEMENT
        text = (f"{c.change_pct:+.1f}% at {format_size(c.size_min_bytes)}..{format_size(c.size_max_bytes)}\n"
                f"{coincide_text(c, short=True)}")
        first.annotate(text, xy=(c.at, 1.0), xycoords=("data", "axes fraction"), xytext=(4, -4 - 22 * i),
                       textcoords="offset points", va="top", fontsize=7, color=colour,
                       bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": colour, "alpha": 0.85})
    locator = AutoDateLocator()
    axes[-1].xaxis.set_major_locator(locator)
    axes[-1].xaxis.set_major_formatter(ConciseDateFormatter(locator, show_offset=False))
    ends = [t for times, _ in trend.points.values() if len(times) for t in (times[0], times[-1])]
    years = sorted({int(str(t)[:4]) for t in ends})
    span = "" if not years else f", {years[0]}" if len(years) == 1 else f", {years[0]}-{years[-1]}"
    axes[-1].set_xlabel(f"run time (UTC{span})", fontsize=8)
    if not sizes:
        first.text(0.5, 0.5, "no run with a busbw", ha="center", va="center", transform=first.transAxes)
    fig.suptitle(trend.title, fontsize=10)
    return fig
