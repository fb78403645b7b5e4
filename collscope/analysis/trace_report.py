"""The report of a training job's traces (``collscope trace --report DIR``): the one-line verdict, a per-step
timeline of compute vs communication (the exposed transfer and the exposed wait for a late peer each in its own
colour), where each rank's step went, the late ranks with the evidence for the first, what a faster collective
would save, and every call's busbw against the sweep's curve.

Writes ``DIR/timeline.png``, ``DIR/busbw.png`` and a self-contained ``DIR/index.html`` (images as data URIs, no
script) with the tables of :class:`~collscope.traces.report.TraceReport`.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import median

from collscope.analysis.formats import num_text, pct_text, size_text
from collscope.analysis.html_page import png_data_uri
from collscope.traces.compare import BenchCurves
from collscope.traces.report import TraceReport

__all__ = ["write_trace_report"]

_COMPUTE, _OVERLAPPED, _EXPOSED, _WAIT = "#9bb7d4", "#6aa84f", "#cc0000", "#f1a340"


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
        wait = min(s.exposed_wait_us / 1e3, exposed) if s.exposed_wait_us is not None else 0.0
        ax.barh(i, compute_only, color=_COMPUTE, label="rest of the step" if i == 0 else None)
        ax.barh(i, overlapped, left=compute_only, color=_OVERLAPPED,
                label="communication under compute" if i == 0 else None)
        ax.barh(i, exposed - wait, left=compute_only + overlapped, color=_EXPOSED,
                label="exposed communication (transfer)" if i == 0 else None)
        ax.barh(i, wait, left=compute_only + overlapped + exposed - wait, color=_WAIT,
                label="exposed wait for a late peer" if i == 0 else None)
        labels.append(f"rank {s.rank} step {s.step}")
    ax.set_yticks(range(len(steps)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("time per step (ms)")
    ax.set_title("per step: compute vs communication (exposed = not hidden by compute)")
    if steps:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize="small", frameon=False)
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


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    attr = f" class='{cls}'" if cls else ""
    body = "".join(f"<tr{attr}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{header}{body}</table>"


def _table(report: TraceReport) -> str:
    head = ("op", "size", "ranks", "nodes", "calls", "NCCL ran", "job busbw (GB/s)", "sweep", "model", "goodput",
            "wait share", "exposed/step (us)", "network saves/step (us)", "no late rank saves/step (us)")
    rows = []
    for r in report.summary:
        rows.append((r.op, size_text(r.size_bytes), "?" if r.nranks is None else str(r.nranks),
                     "?" if r.nnodes is None else str(r.nnodes), str(r.calls), r.ran or "not in the trace",
                     num_text(r.busbw_gbps), num_text(r.bench_busbw_gbps),
                     num_text(r.model_busbw_gbps) + (f" ({r.model_pair})" if r.model_busbw_gbps is not None
                                                     and r.model_pair else ""),
                     pct_text(r.goodput_ratio),
                     pct_text(r.wait_us / r.total_us if r.wait_us is not None and r.total_us else None),
                     num_text(r.exposed_us_per_step), num_text(r.network_us_per_step),
                     num_text(r.waiting_us_per_step)))
    return _html_table(head, rows)


def _median(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    return num_text(median(known)) if known else "unknown"


def _time_went(report: TraceReport) -> str:
    """Per rank, the median over its steps of each figure of the step's period (us)."""
    names = ("duration_us", "comm_us", "transfer_us", "wait_us", "exposed_comm_us", "exposed_transfer_us",
             "exposed_wait_us", "compute_us", "gpu_idle_us", "host_wait_us")
    head = ("rank", "steps", "period", "communication", "transfer", "wait", "exposed", "exposed transfer",
            "exposed wait", "compute", "GPU idle", "host wait")
    rows = []
    for rank in sorted({s.rank for s in report.steps}):
        mine = [s for s in report.steps if s.rank == rank]
        rows.append((str(rank), str(len(mine)), *(_median([getattr(s, n) for s in mine]) for n in names)))
    return _html_table(head, rows, "step") + ("<p>median per step, us; unknown: the trace does not say (one rank "
                                              "traced: no transfer time; a CPU trace or no kernel list: no GPU "
                                              "idle)</p>")


def _late(report: TraceReport) -> str:
    rows = [(str(r["rank"]), str(r["last_count"]), str(r["matched_calls"]), num_text(r["others_waited_us"]))
            for r in report.late_ranks[:10]]
    why = next((r for r in report.late_ranks if r.get("evidence")), None)
    text = (f"<p class='why'>Why rank {why['rank']} ({html.escape(str(why['cause']))}): "
            f"{html.escape(str(why['evidence']))}</p>" if why else "")
    return _html_table(("rank", "last at", "of matched calls", "others waited (us)"), rows, "late") + text


def _apart(report: TraceReport) -> str:
    items = []
    what_if = report.what_if
    if what_if:
        items.append(f"a network at the {what_if.get('reference') or 'sweep or model'}'s busbw would save "
                     f"{num_text(what_if.get('network_us_per_step'))} us per step (exposed transfer only; "
                     f"{what_if.get('calls_without_reference', 0)} calls without a figure to compare with); "
                     f"ranks arriving together {num_text(what_if.get('waiting_us_per_step'))} us per step")
    solo = report.no_communication
    if solo.get("calls"):
        items.append(f"no communication: {solo['calls']} calls in groups of 1 rank ("
                     + ", ".join(f"{op} x{n}" for op, n in solo["ops"].items()) + "), left out of every figure")
    out = report.outside_window
    if out.get("kernels"):
        items.append(f"outside the profiled window: {out['kernels']} kernels launched before it opened "
                     f"({num_text(out['comm_us'])} us of communication), in no step")
    return "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"


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
        f"<h1>collscope trace report</h1><p class='verdict'><b>Verdict:</b> {html.escape(report.headline)}</p>"
        f"<p>{len(report.ranks)} rank trace(s), backend "
        f"{html.escape(report.backend)}, {len(report.collectives)} collective calls; sources: "
        f"{html.escape(', '.join(report.sources))}</p>"
        f"<h2>Geometry</h2>{_geometry(report)}"
        f"<h2>Per (op, size)</h2>{_table(report)}"
        f"<h2>Where the step went</h2>{_time_went(report)}"
        f"<h2>Late ranks</h2>{_late(report)}"
        f"<h2>What a faster collective would save</h2>{_apart(report)}"
        f"<h2>Per step</h2><img src='{png_data_uri(timeline)}' alt='timeline'>"
        f"<h2>busbw per call</h2><img src='{png_data_uri(busbw)}' alt='busbw per call'>"
        + (f"<h2>Warnings</h2><ul>{warnings}</ul>" if warnings else "") + "</body></html>\n")
    return page
