"""``collscope canary report``: a canary's verdict in one self-contained HTML page (figures inlined as data URIs,
as ``collscope report`` and ``observe report`` write theirs; the PNGs are also kept beside the page).

The page holds, top to bottom: the decision and what it rests on (the workload's change with its interval, the
A/A noise, the blocks, whether the sides were interleaved, the reasons and the caveats), the per-range changes,
the why (what each side chose, the statements and the tuner CSV that restores A's choices on B) when given, and
per op both sides' busbw against size with their bands over blocks and the losing or gaining ranges shaded
(:mod:`.report_plot`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from collscope.analysis.formats import num_text, size_text
from collscope.analysis.html_page import PAGE_STYLE, png_data_uri, save_png, table_html
from collscope.canary.report_plot import band_name, op_figure, side_curves
from collscope.errors import ConfigError

if TYPE_CHECKING:
    from collscope.canary.verdict import Interval, RangeChange, Verdict
    from collscope.canary.why import Why

__all__ = ["write_canary_report", "RANGE_HEADER", "CHOICE_HEADER"]

RANGE_HEADER = ["op", "sizes", "B vs A", "busbw change", "interval", "A busbw GB/s", "B busbw GB/s",
                "share of A's time"]
CHOICE_HEADER = ["op", "sizes", "A chose", "B chose", "read from"]
_DECISION_COLOUR = {"go": "#1e7b34", "no-go": "#b3261e", "inconclusive": "#8a6d00"}
_EXTRA_STYLE = """
.decision { font-size: 28px; font-weight: bold; padding: 0.3em 0.6em; color: white; display: inline-block; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; font-size: 14px; }
dl.facts dt { font-weight: bold; } dl.facts dd { margin: 0; }
tr.loses td { background: #fbe3e1; } tr.gains td { background: #e3f3e5; }
"""


def _pct(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{100.0 * value:+.1f}%"


def _interval(i: Interval) -> str:
    if not (math.isfinite(i.low) and math.isfinite(i.high)):
        return "not computed"
    return f"{_pct(i.low)} .. {_pct(i.high)} ({i.confidence:.0%})"


def _sizes(low: int, high: int) -> str:
    return size_text(low) if low == high else f"{size_text(low)}..{size_text(high)}"


def _range_row(r: RangeChange) -> list[str]:
    said = {"loses": "loses", "gains": "gains", "same": "same within noise"}.get(r.verdict, r.verdict)
    return [r.op, _sizes(r.min_bytes, r.max_bytes), said, _pct(r.busbw_change.estimate), _interval(r.busbw_change),
            num_text(r.a_busbw_gbps), num_text(r.b_busbw_gbps), f"{100.0 * r.time_share:.1f}%"]


def _ranges_html(verdict: Verdict) -> str:
    """The table of ranges, the rows that lose or gain coloured (class ``loses``/``gains``)."""
    if not verdict.ranges:
        return "<p>no range: too few blocks to compare sizes (the reasons above say why)</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in RANGE_HEADER)
    body = "".join(f"<tr class='{html.escape(r.verdict)}'>" + "".join(f"<td>{html.escape(c)}</td>"
                                                                     for c in _range_row(r)) + "</tr>"
                   for r in verdict.ranges)
    return f"<table class='t ranges'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _headline(verdict: Verdict, labels: Mapping[str, str]) -> str:
    d = verdict.decision
    change = verdict.workload_change
    noise = ("not estimated (it needs 3 blocks)" if not math.isfinite(verdict.aa_noise)
             else f"{100.0 * verdict.aa_noise:.1f}% per block (spread of successive A runs)")
    more = "" if verdict.more_blocks is None else f"; about {verdict.more_blocks} more block(s) would decide it"
    facts = [
        ("A", labels.get("A", "A")), ("B", labels.get("B", "B")),
        ("workload change", f"{_pct(change.estimate)} communication time per step, B against A (+ = B slower)"),
        ("interval", _interval(change)),
        ("time per step", f"A {num_text(verdict.a_time_us)} us, B {num_text(verdict.b_time_us)} us (medians)"),
        ("max loss", f"{100.0 * verdict.max_loss:.1f}%"),
        ("A/A noise", noise),
        ("blocks", f"{verdict.blocks}{more}"),
        ("interleaved", "yes: ABBA blocks on the same nodes" if verdict.interleaved
         else "no: existing results of each side, judged unpaired"),
        ("workload", verdict.workload_source),
    ]
    dl = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in facts)
    reasons = "".join(f"<li>{html.escape(r)}</li>" for r in verdict.reasons)
    caveats = "".join(f"<li>{html.escape(c)}</li>" for c in verdict.caveats)
    return (f"<section class='verdict'><div class='decision' style='background:{_DECISION_COLOUR.get(d, '#444')}'>"
            f"{html.escape(d.upper())} <small>(exit {verdict.exit_code})</small></div>"
            f"<dl class='facts'>{dl}</dl><h3>Why this decision</h3><ul class='reasons'>{reasons}</ul>"
            + (f"<h3>Caveats</h3><ul class='caveats'>{caveats}</ul>" if caveats else "") + "</section>")


def _why_html(why: Why | None) -> str:
    if why is None:
        return ""
    parts = ["<section class='why'><h2>Why</h2>"]
    if why.statements:
        parts.append("<ul class='statements'>" + "".join(f"<li>{html.escape(s)}</li>" for s in why.statements)
                     + "</ul>")
    else:
        parts.append("<p>no choice of the library was seen to change between the sides</p>")
    if why.changes:
        parts.append(table_html(CHOICE_HEADER, [[c.op, _sizes(c.min_bytes, c.max_bytes), c.a_choice, c.b_choice,
                                                  c.source] for c in why.changes]))
    if why.tuner_csv:
        parts.append("<h3>Tuner rules that restore A's choices on B</h3>"
                     f"<pre class='tuner'>{html.escape(why.tuner_csv)}</pre>")
    if why.notes:
        parts.append("<ul class='note'>" + "".join(f"<li>{html.escape(n)}</li>" for n in why.notes) + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def _op_section(frame: pd.DataFrame, verdict: Verdict, op: str, labels: Mapping[str, str], out: Path,
                index: int) -> str:
    curves = side_curves(frame, op)
    png = save_png(op_figure(op, curves, verdict.ranges, labels, verdict.max_loss), out / f"canary-{index:02d}.png")
    bands = "; ".join(f"{side}: {band_name(c.blocks)} ({c.blocks} block{'s' if c.blocks != 1 else ''})"
                      for side, c in sorted(curves.items()))
    return (f"<section class='op'><h2>{html.escape(op)}</h2>"
            f"<img src='{png_data_uri(out / png)}' alt='busbw of {html.escape(op)}, A and B'>"
            f"<p class='note'>Lines: the median over blocks of each block's busbw (the median of its run's "
            "out-of-place records when present; busbw from the records' times, as nccl-tests prints it rounded to "
            f"0.01 GB/s); bands: {html.escape(bands)}. Shaded: the ranges where B loses "
            "(red) or gains (green) beyond noise. Below: B's busbw change per size (medians) against the "
            "maximum loss.</p></section>")


def write_canary_report(frame: pd.DataFrame, verdict: Verdict, out_dir: Path | str, *, why: Why | None = None,
                        labels: Mapping[str, str] | None = None) -> Path:
    """Write ``out_dir/index.html`` (self-contained) and one PNG per op beside it; returns the HTML path.

    ``frame``: the canary frame the verdict was judged from (``side``, ``block``, ``op``, ``size_bytes``,
    ``busbw_gbps``, ``in_place``); ``labels``: the sides' names ({"A": "NCCL 2.28.9", "B": ...}), "A"/"B" when
    not given. ConfigError when the frame has neither side's records or lacks a column the figures need.
    """
    missing = [c for c in ("side", "block", "op", "size_bytes", "busbw_gbps", "in_place") if c not in frame]
    if missing:
        raise ConfigError(f"the canary frame lacks {', '.join(missing)}; pass the frame the verdict was judged "
                          "from (canary_frame or results_frame)")
    if frame.empty or not set(frame["side"].astype(str)) & {"A", "B"}:
        raise ConfigError("the canary frame holds no record of side A or B: nothing to draw")
    names = {"A": "A", "B": "B", **(labels or {})}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ops = sorted({str(o) for o in frame["op"].dropna().unique()})
    sections = "".join(_op_section(frame, verdict, op, names, out, i) for i, op in enumerate(ops))
    title = f"collscope canary: {names['B']} against {names['A']}"
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{PAGE_STYLE}{_EXTRA_STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
{_headline(verdict, names)}
<section class="ranges"><h2>Changes per size range</h2>{_ranges_html(verdict)}
<p class="note">Adjacent sizes of one op merged while they agree. A range loses (or gains) when its interval
excludes no change and the change exceeds both the A/A noise at those sizes and the maximum loss; the share is
the fraction of A's communication time per step spent in it. busbw in decimal GB/s, nccl-tests' factors.</p>
</section>
{_why_html(why)}
{sections}
</body></html>
"""
    index = out / "index.html"
    index.write_text(page)
    return index
