"""``observe report``: the fleet's trends in one self-contained HTML page (figures inlined, as ``collscope report``).

The page holds the table of changes (when, which series and sizes, before and after, the change with its 95%
interval, what coincided) and of outliers, then one trend figure per series (:mod:`collscope.observe.plots`):
the series with a change or an outlier first, then the others, at most ``max_plots`` figures (the rest are counted,
never silently dropped). The changes are :func:`collscope.observe.series.changes_report`'s, so the page says what
``observe changes`` says; the points are the same per-run medians it reads (``ok`` false and busbw missing left
out), from the start of its context window.
"""

from __future__ import annotations

import html
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from collscope.analysis.formats import num_text, size_text
from collscope.analysis.html_page import PAGE_STYLE, png_data_uri, save_png, table_html
from collscope.errors import ConfigError
from collscope.observe.changes import Change, Outlier, SeriesKey
from collscope.observe.plots import Trend, coincide_text, representative_sizes, trend_figure
from collscope.observe.series import changes_report
from collscope.observe.trends import Points, SeriesSizes, series_points, series_sizes, version_changes
from collscope.observe.views import connect

__all__ = ["write_observe_report", "series_title", "CHANGE_HEADER", "OUTLIER_HEADER", "MAX_PLOTS"]

MAX_PLOTS = 100
"""Figures on one page at most (about 0.2 s and 40 kB each); the series left out are counted on the page."""
CHANGE_HEADER = ["when (UTC)", "series", "sizes", "before GB/s", "after GB/s", "change", "95% interval",
                 "runs before/after", "coincides with"]
OUTLIER_HEADER = ["when (UTC)", "series", "sizes", "busbw GB/s", "expected GB/s", "deviation", "source"]


def series_title(key: SeriesKey) -> str:
    """``alpha: all_reduce, 16 ranks, 2 nodes, float, default``; unknown counts said so."""
    cluster, op, nranks, nnodes, settings, dtype = key
    ranks = "ranks unknown" if nranks is None else f"{nranks} ranks"
    nodes = "nodes unknown" if nnodes is None else f"{nnodes} nodes"
    return f"{cluster}: {op}, {ranks}, {nodes}, {dtype or 'dtype unknown'}, {settings}"


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M")


def _sizes(low: int, high: int) -> str:
    return size_text(low) if low == high else f"{size_text(low)}..{size_text(high)}"


def _change_row(c: Change) -> list[str]:
    return [_when(c.at), series_title(c.series), _sizes(c.size_min_bytes, c.size_max_bytes),
            num_text(c.before_busbw_gbps), num_text(c.after_busbw_gbps), f"{c.change_pct:+.1f}%",
            f"{c.ci_low_pct:+.1f}%..{c.ci_high_pct:+.1f}%", f"{c.runs_before}/{c.runs_after}", coincide_text(c)]


def _outlier_row(o: Outlier) -> list[str]:
    return [_when(o.at), series_title(o.series), _sizes(o.size_min_bytes, o.size_max_bytes), num_text(o.busbw_gbps),
            num_text(o.expected_busbw_gbps), f"{o.deviation_pct:+.1f}%", o.source or "-"]


def _series_section(info: SeriesSizes, sizes: list[int], points: Points, versions: list[tuple[datetime, str]],
                    changes: list[Change], outliers: list[Outlier], out: Path, index: int) -> str:
    trend = Trend(series_title(info.key), {s: points[s] for s in sizes if s in points}, changes, outliers, versions)
    png = save_png(trend_figure(trend), out / f"trend-{index:03d}.png")
    marks = (f"{len(changes)} change(s), {len(outliers)} outlier(s)" if changes or outliers
             else "no change beyond noise")
    return (f"<section class='series'><h3>{html.escape(trend.title)}</h3>"
            f"<p class='note'>{info.runs} runs at {len(info.runs_per_size)} sizes; shown: "
            f"{html.escape(', '.join(size_text(s) for s in trend.points))}; {marks}</p>"
            f"<img src='{png_data_uri(out / png)}' alt='trend {html.escape(trend.title)}'></section>")


def write_observe_report(store: str | Path, out_dir: str | Path, *, since: datetime | None = None,
                         cluster: str | None = None, now: datetime | None = None,
                         max_plots: int = MAX_PLOTS) -> Path:
    """Write ``out_dir/index.html`` (self-contained) and the trend PNGs beside it; returns the HTML path.

    ``since``/``cluster``/``now``: as :func:`collscope.observe.series.changes_report` (the changes listed are at
    or after ``since``; the figures start at its context window). ConfigError when the store holds no busbw."""
    out = Path(out_dir)
    con = connect(store)
    try:
        found = changes_report(con, since=since, cluster=cluster, now=now)
        series = series_sizes(con, found.read_from, cluster)
        by_series_c: dict[SeriesKey, list[Change]] = defaultdict(list)
        by_series_o: dict[SeriesKey, list[Outlier]] = defaultdict(list)
        for c in found.changes:
            by_series_c[c.series].append(c)
        for o in found.outliers:
            by_series_o[o.series].append(o)
        series.sort(key=lambda s: (not (by_series_c[s.key] or by_series_o[s.key]), series_title(s.key)))
        drawn = series[:max_plots]
        sizes = {s.hash: representative_sizes(s.runs_per_size, s.runs, by_series_c[s.key]) for s in drawn}
        points = series_points(con, found.read_from, cluster, sizes)
        versions = version_changes(con, found.read_from, cluster, [s.hash for s in drawn])
    finally:
        con.close()
    if not series:
        where = f" of cluster {cluster!r}" if cluster else ""
        window = f" since {found.read_from.isoformat()}" if found.read_from else ""
        raise ConfigError(f"{store}: no record{where} with a busbw{window}; valid: a store filled by "
                          "'collscope observe ingest' (a wider --since, another --cluster)")
    out.mkdir(parents=True, exist_ok=True)
    sections = [_series_section(s, sizes[s.hash], points.get(s.hash, {}), versions.get(s.hash, []),
                                by_series_c[s.key], by_series_o[s.key], out, i) for i, s in enumerate(drawn)]
    left = (f"<p class='note'>{len(series) - max_plots} more series without a figure (at most {max_plots} per "
            "page; --cluster or a shorter --since narrows it)</p>" if len(series) > max_plots else "")
    window = (f"changes since {found.since.isoformat()}, figures from {found.read_from.isoformat()}"
              if found.since and found.read_from else "the whole history")
    regressions = len(found.regressions)
    summary = (f"{found.series} series, {found.runs} runs ({window}); {len(found.changes)} change(s) beyond noise "
               f"({regressions} regression(s)), {len(found.outliers)} outlier(s)")
    changes_html = (table_html(CHANGE_HEADER, [_change_row(c) for c in found.changes])
                    if found.changes else "<p>none</p>")
    outliers_html = (table_html(OUTLIER_HEADER, [_outlier_row(o) for o in found.outliers])
                     if found.outliers else "<p>none</p>")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>collscope observe report</title>
<style>{PAGE_STYLE}</style></head><body>
<h1>collscope observe report</h1>
<p class="note">Store: {html.escape(str(store))}; {html.escape(summary)}.</p>
<section class="changes"><h2>Changes</h2>{changes_html}
<p class="note">A change is a shift of busbw sustained for at least 3 runs, beyond the minimum gain (3%) and the
series' own run-to-run noise, over a range of adjacent sizes; 'coincides with' lists the provenance that differs
between the last run before and the first run after (docs/observe.md).</p></section>
<section class="outliers"><h2>Outliers</h2>{outliers_html}
<p class="note">One run far from its neighbours, the runs either side normal: not a change.</p></section>
<section class="trends"><h2>Trends</h2>
<p class="note">busbw (decimal GB/s, nccl-tests' factors) of each run, the median over its repeats, at a few sizes
per series; vertical lines mark changes (red: slower, green: faster; solid where that size changed), rings mark
outliers.</p>
{''.join(sections)}{left}</section>
</body></html>
"""
    index = out / "index.html"
    index.write_text(page)
    return index
