"""Text and CSV renderings of an :class:`~.compare.Analysis` (what ``collscope analyze`` prints)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pandas as pd

from collscope.analysis.compare import Analysis
from collscope.analysis.formats import num_text, pct_text, size_text
from collscope.geometry import GeometryField

__all__ = ["render_text", "render_csv", "efficiency_intro", "efficiency_rows", "geometry_blocks", "EFFICIENCY_HEADER",
           "EFFICIENCY_FROM", "host_lines", "source_lines"]


def _size(value: Any) -> str:
    return size_text(value)


def _num(value: Any, fmt: str | None = None) -> str:
    if value is None or pd.isna(value) or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return num_text(value) if fmt is None else format(float(value), fmt)


def _interval(mid: Any, lo: Any, hi: Any) -> str:
    if _num(lo) == "-" or _num(hi) == "-":
        return _num(mid)
    return f"{_num(mid)} [{_num(lo)}, {_num(hi)}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return [line(header), *(line(r) for r in rows)]


def _group(row: Any) -> str:
    nodes = "" if row.get("nnodes") is None or pd.isna(row.get("nnodes")) else f"/{int(row['nnodes'])}n"
    place = " in-place" if row.get("in_place") else ""
    return f"{int(row['nranks'])}r{nodes}{place}"


def _source_label(source: Any) -> str:
    text = str(source)
    if "near tie" in text:
        return "near tie"
    for prefix, label in (("NCCL log", "log"), ("forced", "forced"), ("collscope's model", "modelled"),
                          ("alpha-beta", "alpha-beta")):
        if text.startswith(prefix):
            return label
    return text


def _span(texts: list[str], *, sort: bool = False) -> str:
    """``first-last`` of a run of cells (numerically lowest-highest with ``sort``), one value when equal."""
    if sort:
        known = [t for t in texts if t not in ("-", "")]
        texts = sorted(known, key=float) if known else texts
    lo, hi = texts[0], texts[-1]
    return lo if lo == hi else f"{lo}-{hi}"


EFFICIENCY_HEADER = ["op", "config", "ranks", "sizes", "busbw", "algorithm", "from", "model", "eff", "bound",
                     "verdict"]
EFFICIENCY_FROM = ("from: log = NCCL's TUNING lines in the point's log (or its settings check); forced = the "
                   "configuration's NCCL_ALGO/NCCL_PROTO; modelled = collscope's model of NCCL's choice; near tie = "
                   "a pair within 5% of that choice in NCCL's model, which the measurement matches (predict shows "
                   "both); alpha-beta = no NCCL model (Open MPI, or no GPU generation)")


def efficiency_intro(analysis: Analysis) -> str:
    """What the efficiency table's figures and verdicts mean, with this analysis' margins."""
    opts = analysis.options
    widened = (" or wider where published systems of that size and scope fall further from it"
               if opts.published_margins else "")
    return (f"Efficiency: measured busbw / the model of the algorithm that ran. Verdict: normal within the "
            f"model's error margin (NCCL's model +-{opts.nccl_model_error:.0%}{widened}, alpha-beta "
            f"+-{opts.alpha_beta_error:.0%}: AnalyzeOptions says why), low below it, suspicious above it or above "
            f"the algorithm's own bound by more than {opts.link_tolerance:.0%}; - not judged (the notes say why)")


def efficiency_rows(analysis: Analysis) -> list[list[str]]:
    """The rows of :data:`EFFICIENCY_HEADER`: one per run of adjacent sizes with the same algorithm, source, bound
    and verdict; none when nothing was modelled."""
    sizes = analysis.sizes
    if "verdict" not in sizes.columns or sizes["model_busbw_gbps"].isna().all():
        return []
    runs: list[tuple[tuple[str, ...], list[dict[str, Any]]]] = []
    for row in sizes[sizes["model_busbw_gbps"].notna()].to_dict(orient="records"):
        verdict = "-" if pd.isna(row["verdict"]) else str(row["verdict"])
        key = (str(row["op"]), str(row["config"]), _group(row), str(row["model"]), _source_label(row["algo_source"]),
               f"{_num(row['bound_busbw_gbps'])} ({row['bound_limited_by']})", verdict)
        if runs and runs[-1][0] == key:
            runs[-1][1].append(row)
        else:
            runs.append((key, [row]))
    rows = []
    for (op, config, group, model, source, bound, verdict), cells in runs:
        rows.append([op, config, group, _span([_size(c["size_bytes"]) for c in cells]),
                     _span([_num(c["busbw_gbps"]) for c in cells], sort=True), model, source,
                     _span([_num(c["model_busbw_gbps"]) for c in cells], sort=True),
                     _span([pct_text(c["efficiency"]).rstrip("%") for c in cells], sort=True) + "%", bound, verdict])
    return rows


def _efficiency_lines(analysis: Analysis, max_rows: int) -> list[str]:
    rows = efficiency_rows(analysis)
    if not rows:
        return []
    out = ["", efficiency_intro(analysis)]
    out += _table(EFFICIENCY_HEADER, rows[:max_rows])
    if len(rows) > max_rows:
        out.append(f"  {len(rows) - max_rows} more rows (--csv lists every size)")
    out.append(f"  {EFFICIENCY_FROM}")
    return out


def geometry_blocks(analysis: Analysis) -> list[tuple[str, list[str]]]:
    """The geometry of each (nranks, nnodes) group: a title and one line per field with its evidence (unknown
    ones say so)."""
    return [(f"Geometry of {group.label()} (evidence; --nranks/--nnodes/--nvl-domain override)",
             group.lines(_GEOMETRY_FIELDS)) for group in analysis.geometry]


def _geometry_lines(analysis: Analysis) -> list[str]:
    out = []
    for title, lines in geometry_blocks(analysis):
        out += ["", title, *(f"  {line}" for line in lines)]
    return out


_GEOMETRY_FIELDS: tuple[GeometryField, ...] = ("nranks", "nnodes", "ranks_per_node", "nvl_domain")


def render_text(analysis: Analysis, *, max_per_kind: int = 8, max_rows: int = 40) -> str:
    """A readable summary: fits per configuration, half-peak sizes, the efficiency verdict per size (runs of
    sizes with one verdict, the first ``max_rows``),
    crossovers, anomalies (the first ``max_per_kind`` of each kind), notes."""
    configs = analysis.configs
    several = len(analysis.inputs) > 1
    out = [f"{analysis.n_records} records, {len(configs)} configuration(s)"
           + (f" from {len(analysis.inputs)} inputs, kept apart" if several else "")]
    out += host_lines(analysis)
    out += ["", "Fits: time = alpha + size x beta (95% intervals); bw = 1/beta (algbw), busbw = bw x factor"]
    rows = []
    for row in configs.to_dict(orient="records"):
        rows.append([str(row["op"]), str(row["config"]), _group(row), _interval(row["alpha_us"], row["alpha_lo_us"],
                     row["alpha_hi_us"]), _interval(row["bw_gbps"], row["bw_lo_gbps"], row["bw_hi_gbps"]),
                     _num(row["busbw_gbps"]), _num(row["r2"], ".2f"), _num(row["peak_busbw_gbps"]),
                     _size(row["peak_size_bytes"]), _size(row["n_half_measured_bytes"]), _size(row["n_half_bytes"]),
                     pct_text(row["peak_efficiency"]), *([str(row.get("input"))] if several else [])])
    out += _table(["op", "config", "ranks", "alpha us", "bw GB/s", "busbw", "r2", "peak busbw", "at",
                   "n1/2", "n1/2 fit", "eff@peak", *(["input"] if several else [])], rows)
    out += source_lines(analysis)
    out += _geometry_lines(analysis)
    out += _efficiency_lines(analysis, max_rows)
    out += ["", "Crossovers (the leading configuration changes beyond noise)" if analysis.crossovers else
            "Crossovers: none beyond noise"]
    for c in analysis.crossovers:
        nodes = "" if c.nnodes is None else f"/{c.nnodes}n"
        source = f" ({c.input})" if several and c.input else ""
        out.append(f"  {c.op} {c.nranks}r{nodes}{' in-place' if c.in_place else ''}{source}: from "
                   f"{_size(c.size_bytes)} {c.to_config} ({_num(c.to_busbw_gbps)} GB/s) beats {c.from_config} "
                   f"({_num(c.from_busbw_gbps)} GB/s)")
        if c.hosts_differ:
            out.append(f"    not a setting comparison: {c.hosts_differ}")
    counts = Counter(a.kind for a in analysis.anomalies)
    out.append("")
    if not analysis.anomalies:
        out.append("Anomalies: none")
    else:
        out.append("Anomalies: " + ", ".join(f"{k} {n}" for k, n in counts.items()))
        shown: Counter[str] = Counter()
        for a in analysis.anomalies:
            shown[a.kind] += 1
            if shown[a.kind] > max_per_kind:
                if shown[a.kind] == max_per_kind + 1:
                    out.append(f"  {a.kind}: {counts[a.kind] - max_per_kind} more (--json lists all)")
                continue
            where = "" if a.size_bytes is None else f" at {_size(a.size_bytes)}"
            source = f" ({a.input})" if several and a.input else ""
            place = " in-place" if a.in_place else ""
            out.append(f"  {a.kind}: {a.op} {a.config}{place}{source}{where}: {a.detail}")
    if analysis.notes:
        out += ["", "Notes", *(f"  {n}" for n in analysis.notes)]
    return "\n".join(out) + "\n"


def host_lines(analysis: Analysis) -> list[str]:
    """The comparisons that are node differences (:mod:`.placement`), first: everything below compares them."""
    if not analysis.host_differences:
        return []
    out = ["", "Warning: configurations compared here were measured on different hosts; their differences are "
           "node differences, not setting differences (collscope recommend refuses them):"]
    several = len(analysis.inputs) > 1
    out += [f"  {h.where(with_input=several)}: {h.sentence()}" for h in analysis.host_differences]
    return out


def source_lines(analysis: Analysis) -> list[str]:
    """One configuration read from two inputs, side by side (:mod:`.sources`)."""
    if not analysis.sources:
        return []
    out = ["", "Inputs side by side (the same configuration from different inputs, never pooled; the noise rule "
           "decides)"]
    for c in analysis.sources:
        out.append(f"  {c.label()}: {c.second} against {c.first}: {c.detail}")
    return out


def render_csv(analysis: Analysis) -> str:
    """Per configuration x size rows with efficiency (``Analysis.to_frame``) as CSV."""
    return str(analysis.to_frame().to_csv(index=False))
