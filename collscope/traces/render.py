"""The text ``collscope trace`` prints: the goodput table, the steps, the top exposed collectives, warnings."""

from __future__ import annotations

from statistics import median

from collscope.traces.geometry import ranks_text
from collscope.traces.report import TraceReport
from collscope.traces.verdict import human_bytes, human_us

__all__ = ["render_text"]


def _int(value: int | None) -> str:
    return "?" if value is None else str(value)


def _num(value: float | None, fmt: str = ".3g") -> str:
    return "-" if value is None else format(value, fmt)


def _geometry(report: TraceReport) -> list[str]:
    """The job's geometry with its evidence, then each process group: size, ranks, evidence, nodes."""
    lines = ["geometry:"] + [f"  {line}" for line in report.geometry.lines(
        ("nranks", "nnodes", "ranks_per_node", "nvl_domain"))]
    if report.process_groups:
        lines.append("process groups of the calls:")
    for g in report.process_groups:
        name = "unnamed" if g["process_group"] is None else f"'{g['process_group']}'"
        size = "unknown size" if g["group_size"] is None else f"{g['group_size']} ranks"
        ranks = g["group_ranks"]
        where = f" [{ranks_text(ranks)}]" if ranks else ""
        why = "; ".join(g["evidence"]) or "no evidence in the trace"
        nodes = g["nnodes"]
        on = (f"{nodes['value']} node(s)" if nodes["value"] is not None else "nodes unknown") + \
            (f" ({'; '.join(nodes['evidence'])})" if nodes["evidence"] else "")
        lines.append(f"  {name}: {size}{where} ({why}); {on}")
    return lines


def render_text(report: TraceReport) -> str:
    lines = [f"{len(report.ranks)} rank trace(s) of a {report.world_size or '?'}-rank job, backend "
             f"{report.backend}: {len(report.collectives)} collective calls"]
    lines += _geometry(report)
    if report.steps:
        steps = sorted({s.step for s in report.steps})
        dur = median(s.duration_us for s in report.steps)
        comm = median(s.comm_us for s in report.steps)
        exp = median(s.exposed_comm_us for s in report.steps)
        lines.append(f"steps {steps[0]}..{steps[-1]} ({len(steps)}): median per step and rank {human_us(dur)}, "
                     f"communication {human_us(comm)}, exposed {human_us(exp)} ({exp / dur:.0%} of the step)"
                     if dur > 0 else f"steps: {len(steps)}")
    lines.append("")
    if not report.summary:
        lines.append("no collective carries a size: no bandwidth or goodput to compute (see the warnings)")
        lines += [""] + [f"warning: {w}" for w in report.warnings]
        return "\n".join(lines)
    head = f"{'op':<15}{'size':>10}{'ranks':>6}{'nodes':>6}{'calls':>7}{'busbw':>9}{'sweep':>9}{'model':>9}" \
           f"{'goodput':>9}{'exposed/step':>14}"
    lines += [head, "-" * len(head)]
    for r in report.summary:
        lines.append(f"{r.op:<15}{human_bytes(r.size_bytes):>10}{_int(r.nranks):>6}{_int(r.nnodes):>6}{r.calls:>7}{_num(r.busbw_gbps):>9}"
                     f"{_num(r.bench_busbw_gbps):>9}{_num(r.model_busbw_gbps):>9}"
                     f"{'-' if r.goodput_ratio is None else format(r.goodput_ratio, '.0%'):>9}"
                     f"{'-' if r.exposed_us_per_step is None else human_us(r.exposed_us_per_step):>14}")
    lines.append("(busbw in decimal GB/s, nccl-tests' factors for the call's group size, from the transfer time: "
                 "the minimum over ranks; nodes: those the group spans, '?' unknown: no model figure)")
    top = report.top_exposed()
    if top:
        lines += ["", "top collectives by exposed time:"]
        lines += [f"  {r.verdict}" for r in top]
    rest = [r for r in report.summary if r not in top]
    if rest:
        lines += ["", "other collectives:"] + [f"  {r.verdict}" for r in rest[:10]]
        if len(rest) > 10:
            lines.append(f"  ... and {len(rest) - 10} more sizes (--json lists them all)")
    if report.warnings:
        lines += [""] + [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)
