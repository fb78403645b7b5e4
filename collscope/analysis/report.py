"""A sweep report: PNG figures plus a self-contained HTML page (images inlined) and a Markdown twin.

The page holds, per collective: busbw vs size per configuration with the min-max band over repeats and the
alpha-beta model curves, the heatmap of every configuration against the default, the fitted alpha/beta per
configuration, the anomalies, the recommendation, the topology drawing when captures are given, and the
caveats needed to read busbw correctly.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import pandas as pd

from collscope.analysis.anomaly_groups import group_anomalies, shown_groups
from collscope.analysis.compare import analyze
from collscope.analysis.compare_render import (
    EFFICIENCY_FROM,
    EFFICIENCY_HEADER,
    efficiency_intro,
    efficiency_rows,
    geometry_blocks,
    host_lines,
    source_lines,
)
from collscope.analysis.fit import aggregate, fit_alpha_beta
from collscope.analysis.formats import markdown_fence, markdown_table, markdown_text, num_text, size_text
from collscope.analysis.html_page import PAGE_STYLE, png_data_uri, save_png, table_html
from collscope.analysis.load import load_results
from collscope.analysis.logged_choices import logged_choices
from collscope.analysis.models import ALPHA_BETA_MODELS, alpha_beta_predictions
from collscope.analysis.params import link_params
from collscope.analysis.params_source import job_params_source
from collscope.analysis.plots import busbw_vs_size, gain_heatmap, line_labels
from collscope.analysis.recommend.core import recommend
from collscope.analysis.recommend.env import render_env
from collscope.analysis.report_topo import NIC_HEADER, nic_rows, no_gpu_note
from collscope.analysis.size_zero import size_zero_note
from collscope.errors import ConfigError
from collscope.figure_text import plain_text
from collscope.vocab.configs import DEFAULT_CONFIG

__all__ = ["write_report", "CAVEATS"]

CAVEATS = (
    "busbw = algbw x factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast 1), "
    "as nccl-tests computes it. The factor assumes point-to-point algorithms: with NVLS or CollNet (in-switch "
    "reduction) neither algbw nor busbw is the bandwidth on the wire.",
    "Bandwidths are decimal GB/s (1e9 bytes/s); sizes are bytes with binary suffixes (1M = 1048576 B). "
    "Comparing with GiB/s understates by 7%.",
    "Times are per call from a batch of iterations between barriers (nccl-tests' default), the maximum over ranks; "
    "blocking per-call timings (nccl-tests -z 1) are higher for small messages.",
    "Forcing NCCL_ALGO or NCCL_PROTO disables NCCL tuner plugins; the tuner CSV (collscope recommend --format tuner) "
    "applies per size range instead.",
    "Model curves use alpha and beta fitted to the default configuration of each collective: they show the shape "
    "each algorithm should have on this machine, not an independent prediction; 'Against the model' holds the "
    "measurements against the models of the GPU, links and geometry.",
)


@plain_text
def _model_curves(agg: pd.DataFrame, fits: pd.DataFrame, op: str) -> tuple[dict[str, pd.DataFrame], str | None]:
    default = fits[(fits["op"] == op) & (fits["config"] == "default")]
    if default.empty or op not in ALPHA_BETA_MODELS:
        return {}, None
    row = default.iloc[0]
    if not (math.isfinite(row["alpha_us"]) and math.isfinite(row["bw_gbps"]) and row["bw_gbps"] > 0):
        return {}, None
    nranks = int(row["nranks"])
    nnodes = int(row["nnodes"]) if pd.notna(row["nnodes"]) else 1
    try:
        params = link_params(None, nranks=nranks, nnodes=nnodes, alpha_us=max(float(row["alpha_us"]), 0.01),
                             bw_gbps=float(row["bw_gbps"]))
    except ConfigError:
        return {}, None
    sizes = sorted(int(s) for s in agg[agg["op"] == op]["size_bytes"].unique())
    curves = {}
    for algo in ALPHA_BETA_MODELS[op]:
        preds = alpha_beta_predictions(op, params, sizes, algos=[algo])
        curves[algo] = pd.DataFrame({"size_bytes": [p.size_bytes for p in preds],
                                     "busbw_gbps": [p.busbw_gbps for p in preds]})
    note = (f"alpha {params.alpha_us:.2f} us, bandwidth {float(row['bw_gbps']):.2f} GB/s (fitted to the default of "
            f"{op})")
    return curves, note


_FIT_HEADER = ["config", "ranks", "alpha us", "alpha 95%", "bw GB/s", "busbw GB/s", "n1/2 (fit)", "r2"]
_ANOMALY_HEADER = ["kind", "op", "config", "sizes", "detail"]
def _fit_rows(op_fits: pd.DataFrame) -> list[list[str]]:
    rows = []
    for r in op_fits.to_dict(orient="records"):
        lo, hi = num_text(r["alpha_lo_us"]), num_text(r["alpha_hi_us"])
        interval = "-" if "-" in (lo, hi) else f"{lo}..{hi}"
        rows.append([str(r["config"]), str(int(r["nranks"])), num_text(r["alpha_us"]), interval,
                     num_text(r["bw_gbps"]), num_text(r["busbw_gbps"]), size_text(r["n_half_bytes"]),
                     "-" if pd.isna(r["r2"]) else f"{float(r['r2']):.2f}"])
    return rows


def _anomalies(analysis: Any) -> tuple[list[list[str]], list[str]]:
    """Grouped anomalies (:mod:`.anomaly_groups`): the rows shown and the lines counting the rest."""
    shown, more = shown_groups(group_anomalies(analysis))
    return [[g.kind, g.op, g.config, g.size_range, g.detail] for g in shown], more


def _no_baseline(op: str) -> str:
    return (f"no baseline: the default of {op} (nothing forced) was not measured, so no configuration is compared "
            "with it (no heatmap, no model curves); the curves above show each configuration alone.")


def _op_section(agg: pd.DataFrame, fits: pd.DataFrame, op: str, out: Path, min_gain: float
                ) -> tuple[str, list[str]]:
    """The HTML and Markdown of one collective: curves, the heatmap or one 'no baseline' line, the fits."""
    curves, note = _model_curves(agg, fits, op)
    curve_png = save_png(busbw_vs_size(agg, op, models=curves), out / f"busbw-{op}.png")
    has_default = bool(((agg["op"] == op) & (agg["config"] == DEFAULT_CONFIG) & (agg["n"] > 0)).any())
    op_fits = line_labels(fits[fits["op"] == op])  # a configuration of two inputs or rank counts: two rows, named
    op_fits = op_fits.assign(config=op_fits["series"])[["config", "nranks", "alpha_us", "alpha_lo_us", "alpha_hi_us",
                                                        "bw_gbps", "busbw_gbps", "n_half_bytes", "r2"]]
    page = (f"<section class='op'><h2>{html.escape(op)}</h2>"
            f"<img src='{png_data_uri(out / curve_png)}' alt='busbw vs size'>"
            + (f"<p class='note'>Model curves: {html.escape(note)}</p>" if note else ""))
    md = [f"## {op}", "", f"![busbw]({curve_png})", ""]
    if has_default:
        heat_png = save_png(gain_heatmap(agg, op, min_gain=min_gain), out / f"heatmap-{op}.png")
        page += f"<img src='{png_data_uri(out / heat_png)}' alt='heatmap'>"
        md += [f"![heatmap]({heat_png})", ""]
    else:
        page += f"<p class='note no-baseline'>{html.escape(_no_baseline(op))}</p>"
        md += [markdown_text(_no_baseline(op)), ""]
    page += (f"<h3>Fitted time = alpha + size / bandwidth</h3>{table_html(_FIT_HEADER, _fit_rows(op_fits))}"
             "</section>")
    md += ["### Fitted time = alpha + size / bandwidth", "", *markdown_table(_FIT_HEADER, _fit_rows(op_fits)), ""]
    return page, md


def _model_section(analysis: Any, left_out: str | None) -> tuple[str, list[str]]:
    """The measurements against the model of the job's geometry, as ``collscope analyze`` prints them: each
    group's geometry with its evidence, the efficiency verdicts, and the analysis' notes (why a group has no
    efficiency and what supplies it, the GPU read from the records, the caveats)."""
    notes = [n for n in analysis.notes if n != left_out]
    rows = efficiency_rows(analysis)
    page = ["<section class='model'><h2>Against the model</h2>"]
    md = ["## Against the model", ""]
    for title, lines in geometry_blocks(analysis):
        page.append(f"<h3>{html.escape(title)}</h3><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines)
                    + "</ul>")
        md += [f"### {markdown_text(title)}", "", *(f"- {markdown_text(x)}" for x in lines), ""]
    if rows:
        intro = efficiency_intro(analysis)
        page.append(f"<p class='note'>{html.escape(intro)}</p>{table_html(EFFICIENCY_HEADER, rows)}"
                    f"<p class='note'>{html.escape(EFFICIENCY_FROM)}</p>")
        md += [markdown_text(intro), "", *markdown_table(EFFICIENCY_HEADER, rows), "", markdown_text(EFFICIENCY_FROM),
               ""]
    if notes:
        page.append("<h3>Notes</h3><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
        md += ["### Notes", "", *(f"- {markdown_text(n)}" for n in notes), ""]
    page.append("</section>")
    return "".join(page), md


def _topology_section(topo_paths: list[str], out: Path) -> tuple[str, list[str]]:
    """The node's drawing, or a table of its NICs when the captures have no GPU (:mod:`.report_topo`)."""
    from collscope.topo.load import load_one_node

    node = load_one_node(topo_paths)
    if not node.gpus:
        note, rows = no_gpu_note(node), nic_rows(node)
        return (f"<section class='topology'><h2>Topology</h2><p class='note'>{html.escape(note)}</p>"
                f"{table_html(NIC_HEADER, rows)}</section>",
                ["## Topology", "", markdown_text(note), "", *markdown_table(NIC_HEADER, rows), ""])
    from collscope.topo.draw import draw_png

    draw_png(node, out / "topology.png")
    return (f"<section class='topology'><h2>Topology</h2>"
            f"<img src='{png_data_uri(out / 'topology.png')}' alt='topology'></section>",
            ["## Topology", "", "![topology](topology.png)", ""])


def write_report(paths: list[str | Path], out_dir: Path | str, *, topo_paths: list[str] | None = None,
                 min_gain: float = 0.03, op: str | None = None, nranks: int | None = None,
                 nnodes: int | None = None, nvl_domain: int | None = None, gpu: str | None = None,
                 alpha_us: float | None = None, bw_gbps: float | None = None, nic_gbit: float | None = None,
                 nics_per_node: int | None = None) -> Path:
    """Write ``out_dir/index.html`` (self-contained), ``report.md`` and the PNGs; returns the HTML path.

    ``op``, ``nranks``, ``nnodes``, ``nvl_domain``: the geometry overrides of :func:`~.load.load_results`;
    ``topo_paths``, ``gpu``, ``alpha_us``, ``bw_gbps``, ``nic_gbit``, ``nics_per_node``: the link parameters of
    :func:`~.params_source.job_params_source`, so that the page's verdicts are ``collscope analyze``'s."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df = load_results(paths, op=op, nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain)
    if df.empty:
        raise ConfigError(f"no records in {', '.join(str(p) for p in paths)}")
    agg = aggregate(df)
    fits = fit_alpha_beta(agg)
    source = job_params_source(df, topo_paths=topo_paths or (), gpu=gpu, alpha_us=alpha_us, bw_gbps=bw_gbps,
                               nic_gbit=nic_gbit, nics_per_node=nics_per_node)
    analysis = analyze(df, params=source,
                       logged=logged_choices([Path(p) for p in paths], df) if source is not None else None)
    from collscope.analysis.recommend.core import RecommendOptions

    options = RecommendOptions(min_gain=min_gain)
    try:
        env_text = render_env(recommend(df, options))
    except ConfigError as exc:  # recommend refuses (configurations measured on other hosts): the page says why
        env_text = "\n".join(f"# {line}" for line in f"no recommendation: {exc}".splitlines()) + "\n"
    sources = ", ".join(str(p) for p in paths)
    counts = (f"{analysis.n_records} records, {len(analysis.configs)} configuration(s), "
              f"{df['op'].nunique()} collective(s)")
    sections: list[str] = []
    md: list[str] = ["# collscope report", "", f"Sources: {markdown_text(sources)}; {counts}.", ""]
    left_out = size_zero_note(df)
    if left_out:
        md += [markdown_text(left_out), ""]
    for name in sorted(str(o) for o in agg["op"].unique()):
        page, op_md = _op_section(agg, fits, name, out, min_gain)
        sections.append(page)
        md += op_md
    model_html, model_md = _model_section(analysis, left_out)
    md += model_md
    topo_html = ""
    if topo_paths:
        topo_html, topo_md = _topology_section(topo_paths, out)
        md += topo_md
    comparisons = [line.strip() for line in host_lines(analysis) + source_lines(analysis) if line.strip()]
    if comparisons:  # node differences and inputs side by side, first: every figure below compares them
        md += [markdown_text(comparisons[0]), "", *(f"- {markdown_text(c)}" for c in comparisons[1:]), ""]
    comparisons_html = "".join(f"<p class='note warning'>{html.escape(c)}</p>" for c in comparisons)
    anomaly_rows, more = _anomalies(analysis)
    anomalies_html = (table_html(_ANOMALY_HEADER, anomaly_rows) if anomaly_rows else "<p>none</p>") + "".join(
        f"<p class='note'>{html.escape(line)}</p>" for line in more)
    caveats = "".join(f"<li>{html.escape(c)}</li>" for c in CAVEATS)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>collscope report</title>
<style>{PAGE_STYLE}</style></head><body>
<h1>collscope report</h1>
<p class="note">Sources: {html.escape(sources)}; {counts}.</p>
{f'<p class="note">{html.escape(left_out)}</p>' if left_out else ''}
{comparisons_html}
<section class="recommendation"><h2>Recommendation</h2><pre>{html.escape(env_text)}</pre></section>
{''.join(sections)}
{model_html}
{topo_html}
<section class="anomalies"><h2>Anomalies</h2>{anomalies_html}</section>
<section class="caveats"><h2>How to read this</h2><ul>{caveats}</ul></section>
</body></html>
"""
    index = out / "index.html"
    index.write_text(page)
    md += ["## Anomalies", "", *(markdown_table(_ANOMALY_HEADER, anomaly_rows) if anomaly_rows else ["none"]), ""]
    md += [*(markdown_text(line) for line in more), *([""] if more else [])]
    fence = markdown_fence(env_text)
    md += ["## Recommendation", "", fence, env_text.rstrip(), fence, "", "## How to read this", ""]
    md += [f"- {c}" for c in CAVEATS]
    (out / "report.md").write_text("\n".join(md) + "\n")
    return index
