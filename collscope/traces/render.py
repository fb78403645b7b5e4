"""The text ``collscope trace`` prints: the one-line verdict, where the step's time went, the late ranks, what a
faster collective would save, the goodput table, the top exposed collectives, warnings."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from collscope.traces.exposure import StepStat
from collscope.traces.geometry import ranks_text
from collscope.traces.report import TraceReport
from collscope.traces.verdict import human_us
from collscope.units import format_size

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


def _median(steps: Sequence[StepStat], name: str) -> str:
    values = [getattr(s, name) for s in steps]
    known = [v for v in values if v is not None]
    if not known:
        return "unknown"
    return human_us(median(known)) + ("" if len(known) == len(values) else f" ({len(known)} of {len(values)})")


def _time_went(report: TraceReport) -> list[str]:
    """Median per step and rank of every figure of the step's period; 'unknown' / 'n/a' where the trace lacks it."""
    steps = report.steps
    if not steps:
        return []
    numbers = sorted({s.step for s in steps})
    dur = median(s.duration_us for s in steps)
    exp = median(s.exposed_comm_us for s in steps)
    lines = [f"steps {numbers[0]}..{numbers[-1]} ({len(numbers)}): median per step and rank {human_us(dur)}, "
             f"communication {_median(steps, 'comm_us')}, exposed {human_us(exp)}"
             + (f" ({exp / dur:.0%} of the step)" if dur > 0 else "")]
    lines.append(f"  communication: transfer {_median(steps, 'transfer_us')}, waiting for a late peer "
                 f"{_median(steps, 'wait_us')}; exposed: transfer {_median(steps, 'exposed_transfer_us')}, waiting "
                 f"{_median(steps, 'exposed_wait_us')}")
    if all(s.gpu_idle_us is None for s in steps):
        idle = "GPU idle: n/a (no GPU kernel list: a CPU trace, or a format without kernels)"
    else:
        idle = (f"GPU idle {_median(steps, 'gpu_idle_us')} (waiting on the host: {_median(steps, 'host_wait_us')})")
    lines.append(f"  compute {_median(steps, 'compute_us')}; {idle}")
    return lines


def _late(report: TraceReport) -> list[str]:
    rows = [r for r in report.late_ranks if r["others_waited_us"] > 0]
    if not rows:
        return []
    lines = ["late ranks (the others waited for them):"]
    for r in rows[:3]:
        lines.append(f"  rank {r['rank']}: last at {r['last_count']} of {r['matched_calls']} matched calls, the "
                     f"others waited {human_us(r['others_waited_us'])}")
    if len(rows) > 3:
        lines.append(f"  ... and {len(rows) - 3} more (--json lists them all)")
    if rows[0].get("evidence"):
        lines.append(f"  why rank {rows[0]['rank']} ({rows[0]['cause']}): {rows[0]['evidence']}")
    return lines


def _apart(report: TraceReport) -> list[str]:
    lines = []
    solo = report.no_communication
    if solo.get("calls"):
        ops = ", ".join(f"{op} x{n}" for op, n in solo["ops"].items())
        lines.append(f"no communication: {solo['calls']} calls in groups of 1 rank ({ops}): nothing leaves the "
                     "GPU, left out of every figure")
    out = report.outside_window
    if out.get("kernels"):
        lines.append(f"outside the profiled window: {out['kernels']} kernels launched before it opened "
                     f"({human_us(out['comm_us'])} of communication), in no step")
    return lines


def render_text(report: TraceReport) -> str:
    lines = [f"verdict: {report.headline}"] if report.headline else []
    lines.append(f"{len(report.ranks)} rank trace(s) of a {report.world_size or '?'}-rank job, backend "
                 f"{report.backend}: {len(report.collectives)} collective calls")
    lines += _geometry(report)
    lines += _time_went(report) + _late(report) + _apart(report)
    lines.append("")
    if not report.summary:
        lines.append("no collective carries a size: no bandwidth or goodput to compute (see the warnings)")
        lines += [""] + [f"warning: {w}" for w in report.warnings]
        return "\n".join(lines)
    head = f"{'op':<15}{'size':>10}{'ranks':>6}{'nodes':>6}{'calls':>7}{'busbw':>9}{'sweep':>9}{'model':>9}" \
           f"{'goodput':>9}{'wait':>6}{'exposed/step':>14}{'net saves':>11}"
    lines += [head, "-" * len(head)]
    for r in report.summary:
        lines.append(f"{r.op:<15}{format_size(r.size_bytes):>10}{_int(r.nranks):>6}{_int(r.nnodes):>6}{r.calls:>7}{_num(r.busbw_gbps):>9}"
                     f"{_num(r.bench_busbw_gbps):>9}{_num(r.model_busbw_gbps):>9}"
                     f"{'-' if r.goodput_ratio is None else format(r.goodput_ratio, '.0%'):>9}"
                     f"{'-' if r.wait_us is None or not r.total_us else format(r.wait_us / r.total_us, '.0%'):>6}"
                     f"{'-' if r.exposed_us_per_step is None else human_us(r.exposed_us_per_step):>14}"
                     f"{'-' if r.network_us_per_step is None else human_us(r.network_us_per_step):>11}")
    lines.append("(busbw in decimal GB/s, nccl-tests' factors for the call's group size, from the transfer time: "
                 "the minimum over ranks; nodes: those the group spans, '?' unknown: no model figure; wait: the "
                 "share of the calls' time spent waiting for the last peer; net saves: step time saved per step at "
                 "the sweep's (else the model's) busbw, exposed time only)")
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
