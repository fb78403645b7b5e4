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
from typing import Any

import pyarrow as pa

from collscope.analysis.formats import num_text, size_text
from collscope.analysis.report import _STYLE, _data_uri, _png, _table_html
from collscope.errors import ConfigError
from collscope.observe.changes import SERIES_COLUMNS, Change, Outlier, SeriesKey
from collscope.observe.plots import Trend, coincide_text, representative_sizes, trend_figure
from collscope.observe.series import changes_report
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


def _points(con: Any, read_from: datetime | None, cluster: str | None) -> pa.Table:
    """Per series, run and size: the run's time and its median busbw (the rows ``observe changes`` reads)."""
    where: list[str] = ["busbw_gbps > 0", "ok IS NOT false"]
    params: list[Any] = []
    if read_from is not None:
        where.append("run_time >= ?")
        params.append(read_from)
    if cluster is not None:
        where.append("cluster = ?")
        params.append(cluster)
    keys = ", ".join(SERIES_COLUMNS)
    result: Any = con.sql(f"SELECT {keys}, run_id, min(run_time) AS run_time, size_bytes, "
                          "median(busbw_gbps) AS busbw_gbps, any_value(nccl_version) AS nccl_version "
                          f"FROM records WHERE {' AND '.join(where)} GROUP BY {keys}, run_id, size_bytes "
                          "ORDER BY run_time, run_id", params=params)
    to_table = getattr(result, "to_arrow_table", None)  # duckdb >= 1.4; fetch_arrow_table before
    return to_table() if to_table is not None else result.fetch_arrow_table()


Points = dict[int, list[tuple[datetime, float]]]
"""size -> [(run time, busbw)] in time order."""


def _trends(table: pa.Table) -> tuple[dict[SeriesKey, Points], dict[SeriesKey, list[tuple[datetime, str]]]]:
    """Per series: its points, and (run time, NCCL version) where the version differs from the run before."""
    out: dict[SeriesKey, Points] = defaultdict(lambda: defaultdict(list))
    versions: dict[SeriesKey, list[tuple[datetime, str]]] = defaultdict(list)
    last: dict[SeriesKey, Any] = {}
    for row in table.to_pylist():
        key: SeriesKey = (row["cluster"], row["op"], row["nranks"], row["nnodes"], row["settings_text"], row["dtype"])
        out[key][int(row["size_bytes"])].append((row["run_time"], float(row["busbw_gbps"])))
        version = row["nccl_version"]
        if key in last and version is not None and version != last[key]:  # the first row of the run after
            versions[key].append((row["run_time"], str(version)))
        if version is not None:
            last[key] = version
    return out, versions


def _series_section(key: SeriesKey, points: Points, versions: list[tuple[datetime, str]], changes: list[Change],
                    outliers: list[Outlier], out: Path, index: int) -> str:
    runs = len({t for series in points.values() for t, _ in series})
    sizes = representative_sizes({s: len(p) for s, p in points.items()}, runs, changes)
    trend = Trend(series_title(key), {s: points[s] for s in sizes}, changes, outliers, versions)
    png = _png(trend_figure(trend), out / f"trend-{index:03d}.png")
    marks = (f"{len(changes)} change(s), {len(outliers)} outlier(s)" if changes or outliers
             else "no change beyond noise")
    return (f"<section class='series'><h3>{html.escape(trend.title)}</h3>"
            f"<p class='note'>{runs} runs at {len(points)} sizes; shown: "
            f"{html.escape(', '.join(size_text(s) for s in sizes))}; {marks}</p>"
            f"<img src='{_data_uri(out / png)}' alt='trend {html.escape(trend.title)}'></section>")


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
        points, versions = _trends(_points(con, found.read_from, cluster))
    finally:
        con.close()
    if not points:
        where = f" of cluster {cluster!r}" if cluster else ""
        window = f" since {found.read_from.isoformat()}" if found.read_from else ""
        raise ConfigError(f"{store}: no record{where} with a busbw{window}; valid: a store filled by "
                          "'collscope observe ingest' (a wider --since, another --cluster)")
    out.mkdir(parents=True, exist_ok=True)
    by_series_c: dict[SeriesKey, list[Change]] = defaultdict(list)
    by_series_o: dict[SeriesKey, list[Outlier]] = defaultdict(list)
    for c in found.changes:
        by_series_c[c.series].append(c)
    for o in found.outliers:
        by_series_o[o.series].append(o)
    order = sorted(points, key=lambda k: (not (by_series_c[k] or by_series_o[k]), series_title(k)))
    sections = [_series_section(k, points[k], versions[k], by_series_c[k], by_series_o[k], out, i)
                for i, k in enumerate(order[:max_plots])]
    left = (f"<p class='note'>{len(order) - max_plots} more series without a figure (at most {max_plots} per "
            "page; --cluster or a shorter --since narrows it)</p>" if len(order) > max_plots else "")
    window = (f"changes since {found.since.isoformat()}, figures from {found.read_from.isoformat()}"
              if found.since and found.read_from else "the whole history")
    regressions = len(found.regressions)
    summary = (f"{found.series} series, {found.runs} runs ({window}); {len(found.changes)} change(s) beyond noise "
               f"({regressions} regression(s)), {len(found.outliers)} outlier(s)")
    changes_html = (_table_html(CHANGE_HEADER, [_change_row(c) for c in found.changes])
                    if found.changes else "<p>none</p>")
    outliers_html = (_table_html(OUTLIER_HEADER, [_outlier_row(o) for o in found.outliers])
                     if found.outliers else "<p>none</p>")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>collscope observe report</title>
<style>{_STYLE}</style></head><body>
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
