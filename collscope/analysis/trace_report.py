"""The report of a training job's traces (``collscope trace --report DIR``): a per-step timeline of compute vs
communication, with the exposed communication in its own colour, and every call's busbw against the sweep's curve.

Writes ``DIR/timeline.png``, ``DIR/busbw.png`` and a self-contained ``DIR/index.html`` (images as data URIs, no
script) with the per-(op, size) summary table of :class:`~collscope.traces.report.TraceReport`.
"""

from __future__ import annotations

import base64
import html
from collections import defaultdict
from pathlib import Path

from collscope.analysis.formats import num_text, pct_text, size_text
from collscope.traces.compare import BenchCurves
from collscope.traces.report import TraceReport

__all__ = ["write_trace_report"]

_COMPUTE, _OVERLAPPED, _EXPOSED = "#9bb7d4", "#6aa84f", "#cc0000"


def _timeline(report: TraceReport, path: Path) -> None:
    """One horizontal bar per (rank, step): compute only, communication hidden under compute, exposed."""
    from matplotlib.figure import Figure

    steps = sorted(report.steps, key=lambda s: (s.rank, s.step))
    fig = Figure(figsize=(9, 0.35 * max(4, len(steps)) + 1.8))
    ax = fig.subplots()
    labels = []
    for i, s in enumerate(steps):
        exposed = min(s.exposed_comm_us, s.comm_us) / 1e3
        overlapped = max(s.comm_us - s.exposed_comm_us, 0.0) / 1e3
        compute_only = max(s.duration_us / 1e3 - exposed - overlapped, 0.0)
        ax.barh(i, compute_only, color=_COMPUTE, label="compute only" if i == 0 else None)
        ax.barh(i, overlapped, left=compute_only, color=_OVERLAPPED,
                label="communication under compute" if i == 0 else None)
        ax.barh(i, exposed, left=compute_only + overlapped, color=_EXPOSED,
                label="exposed communication" if i == 0 else None)
        labels.append(f"rank {s.rank} step {s.step}")
    ax.set_yticks(range(len(steps)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("time per step (ms)")
    ax.set_title("per step: compute vs communication (exposed = not hidden by compute)")
    if steps:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize="small", frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _busbw(report: TraceReport, bench: BenchCurves | None, path: Path) -> None:
    """Every call's busbw (from its transfer time) by size, per op, with the sweep's curve of the same op."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 5))
    ax = fig.subplots()
    per_op: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for call in report.collectives:
        size, bus = call.get("size_bytes"), call.get("busbw_gbps")
        if isinstance(size, int) and size > 0 and isinstance(bus, (int, float)) and bus > 0:
            per_op[str(call["op"])].append((size, float(bus)))
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    for i, (op, points) in enumerate(sorted(per_op.items())):
        colour = colours[i % len(colours)]
        ax.scatter([s for s, _ in points], [b for _, b in points], s=14, color=colour, alpha=0.7,
                   label=f"{op}: job calls")
        if bench is not None:
            for (bop, nranks), curve in sorted(bench.curves.items()):
                if bop == op and curve:
                    ax.plot([s for s, _ in curve], [b for _, b in curve], color=colour, linewidth=1.5,
                            label=f"{op}: sweep, {nranks} ranks")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes, nccl-tests 'size')")
    ax.set_ylabel("bus bandwidth (GB/s, decimal)")
    ax.set_title("busbw per call against the sweep")
    if per_op:
        ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _geometry(report: TraceReport) -> str:
    """The job's geometry with its evidence, and each process group of the calls (what the text output says)."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in report.geometry.lines(
        ("nranks", "nnodes", "ranks_per_node", "nvl_domain")))
    groups = []
    for g in report.process_groups:
        name = "unnamed" if g["process_group"] is None else str(g["process_group"])
        size = "unknown" if g["group_size"] is None else str(g["group_size"])
        nodes = g["nnodes"]
        cells = (name, size, "; ".join(g["evidence"]) or "no evidence in the trace",
                 "unknown" if nodes["value"] is None else str(nodes["value"]), "; ".join(nodes["evidence"]))
        groups.append("<tr class='pg'>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("process group", "ranks", "evidence", "nodes", "why"))
    return f"<ul>{items}</ul>" + (f"<table><tr>{head}</tr>{''.join(groups)}</table>" if groups else "")


def _table(report: TraceReport) -> str:
    head = ("op", "size", "ranks", "nodes", "calls", "job busbw (GB/s)", "sweep", "model", "goodput",
            "exposed/step (us)")
    rows = []
    for r in report.summary:
        cells = (r.op, size_text(r.size_bytes), "?" if r.nranks is None else str(r.nranks),
                 "?" if r.nnodes is None else str(r.nnodes), str(r.calls), num_text(r.busbw_gbps),
                 num_text(r.bench_busbw_gbps), num_text(r.model_busbw_gbps), pct_text(r.goodput_ratio),
                 num_text(r.exposed_us_per_step))
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    return f"<table>{header}{''.join(rows)}</table>"


def write_trace_report(report: TraceReport, out_dir: Path, *, bench: BenchCurves | None = None) -> Path:
    """Write the PNGs and ``index.html`` into ``out_dir`` (created by the caller's output check); returns the page."""
    out_dir.mkdir(parents=True, exist_ok=True)
    timeline, busbw = out_dir / "timeline.png", out_dir / "busbw.png"
    _timeline(report, timeline)
    _busbw(report, bench, busbw)
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in report.warnings)
    page = out_dir / "index.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>collscope trace report</title>"
        "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}</style></head><body>"
        f"<h1>collscope trace report</h1><p>{len(report.ranks)} rank trace(s), backend "
        f"{html.escape(report.backend)}, {len(report.collectives)} collective calls; sources: "
        f"{html.escape(', '.join(report.sources))}</p>"
        f"<h2>Geometry</h2>{_geometry(report)}"
        f"<h2>Per (op, size)</h2>{_table(report)}"
        f"<h2>Per step</h2><img src='{_data_uri(timeline)}' alt='timeline'>"
        f"<h2>busbw per call</h2><img src='{_data_uri(busbw)}' alt='busbw per call'>"
        + (f"<h2>Warnings</h2><ul>{warnings}</ul>" if warnings else "") + "</body></html>\n")
    return page
