"""Per (op, size) of a job's traces: the job's busbw next to a sweep's and a model's at that size, the goodput
ratio and the one-line verdict (:class:`SummaryRow`), and the warnings about the sweep it is held against.

:func:`~collscope.traces.report.analyze_traces` sums the calls into cells and asks :func:`summary_rows` for the
rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from statistics import median
from typing import Any

from collscope.geometry import Geometry, Known
from collscope.traces.compare import BenchCurves, ModelFigure, ModelFn
from collscope.traces.ran_pair import pick_figure, ran_pairs
from collscope.traces.verdict import verdict

__all__ = ["SummaryRow", "summary_rows", "bench_gaps", "above_bench", "ABOVE_BENCH_RATIO"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRow:
    op: str
    size_bytes: int
    nranks: int | None
    """Ranks in the calls' process group (None: the trace does not say)."""
    nnodes: int | None
    """Nodes that group spans (None: unknown; then no model figure)."""
    calls: int
    total_us: float
    busbw_gbps: float | None
    bench_busbw_gbps: float | None
    model_busbw_gbps: float | None
    goodput_ratio: float | None
    exposed_us_per_step: float | None
    calls_per_step: float | None
    verdict: str
    nnodes_evidence: tuple[str, ...] = ()
    wait_us: float | None = None
    """The calls' summed wait for a late peer (:mod:`collscope.traces.wait`); None when no call has a split."""
    exposed_transfer_us_per_step: float | None = None
    exposed_wait_us_per_step: float | None = None
    network_us_per_step: float | None = None
    """Step time saved at the sweep's (else the model's) busbw, exposed time only (:mod:`collscope.traces.whatif`)."""
    waiting_us_per_step: float | None = None
    """Step time saved had no rank arrived late to these calls."""
    model_published_spread: str | None = None
    """How far published systems fall from the model at this size and scope, in words (None: not known)."""
    model_near_ties: str | None = None
    """NCCL's model's near ties of the pair it chose, with their expected busbw (None: the choice leads by more)."""
    ran: str | None = None
    """The (algorithm, protocol) NCCL ran the calls with, as the trace says (``Ring/LL128``; mixed:
    ``NVLS/Simple x3, Ring/LL128 x1``); None when the trace does not say (:mod:`collscope.traces.ran_pair`)."""
    model_pair: str | None = None
    """The pair ``model_busbw_gbps`` is for: the model's choice, or the near tie NCCL ran (None: alpha-beta)."""
    model_note: str | None = None
    """How the pair NCCL ran relates to the model's choice, in words (None: the trace does not say)."""
    model_ceiling_gbps: float | None = None
    """Above ``model_busbw_gbps``, NVLS's own rate inside one NVLink domain, which NCCL's table caps lower (None:
    none, or the figure is another pair's): what analyze judges ``suspicious`` against."""

    def to_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__slots__}
        out["nnodes_evidence"] = list(self.nnodes_evidence)
        return out



def summary_rows(per_size: dict[tuple[str, int, int | None], dict[str, Any]], rank_steps: int,
             bench: BenchCurves | None, model: ModelFn | None, nranks_traced: int, geometry: Geometry,
             warnings: list[str]) -> list[SummaryRow]:
    """One row per (op, size, group size) cell of ``per_size`` (what :func:`~.report.analyze_traces` sums per
    call), the largest total time first: the job's busbw, the sweep's and the model's at that size (the figure of
    the pair NCCL ran, :mod:`.ran_pair`), the goodput ratio and the verdict. Why a row has no model figure goes
    to ``warnings``."""
    model_bw: dict[tuple[str, int, int | None], ModelFigure] = {}
    if model is not None:
        by_group: dict[tuple[str, int, int], list[int]] = defaultdict(list)
        no_nodes: set[tuple[str, int]] = set()
        for (op, size, n), cell in per_size.items():
            spans = cell["nodes"].value if cell["nodes"] is not None else None
            if n is not None and n > 1 and spans is not None:
                by_group[(op, n, spans)].append(size)
            elif n is not None and n > 1:
                no_nodes.add((op, n))
        for (op, n, spans), sizes in by_group.items():
            for size, bw in model(op, n, spans, sorted(set(sizes))).items():
                model_bw[(op, size, n)] = bw
        if no_nodes:
            warnings.append("no model figure for " + ", ".join(f"{op} on {n} ranks" for op, n in sorted(no_nodes))
                            + ": the nodes their group spans are unknown (the models never assume one node; "
                            f"nnodes: {geometry.nnodes.describe()}; pass --nnodes N, which places the ranks of "
                            "each group the trace lists in blocks of nranks / nnodes per node)")
    out = []
    for (op, size, n), cell in sorted(per_size.items(), key=lambda kv: -kv[1]["total_us"]):
        busbw = median(cell["busbw"]) if cell["busbw"] else None
        bench_bw = bench.busbw_at(op, n, size) if bench is not None and n is not None else None
        figure = model_bw.get((op, size, n))
        ran = ran_pairs(cell["ran"])
        pick = pick_figure(figure, ran) if figure is not None else None
        model_b = pick.busbw_gbps if pick is not None else None
        ref = bench_bw if bench_bw else model_b
        ratio = busbw / ref if busbw is not None and ref else None
        exposed = cell["exposed_us"] / rank_steps if rank_steps else None
        per_step = cell["in_steps"] / rank_steps if rank_steps else cell["calls"] / max(nranks_traced, 1)
        nodes: Known = cell["nodes"] if cell["nodes"] is not None else Known(None)
        row = SummaryRow(op=op, size_bytes=size, nranks=n, nnodes=nodes.value, calls=cell["calls"],
                         total_us=cell["total_us"], busbw_gbps=busbw, bench_busbw_gbps=bench_bw,
                         model_busbw_gbps=model_b, goodput_ratio=ratio, exposed_us_per_step=exposed,
                         calls_per_step=per_step, verdict="", nnodes_evidence=nodes.evidence,
                         model_published_spread=figure.published_spread if figure is not None else None,
                         model_near_ties=figure.near_ties if figure is not None else None,
                         ran=ran.describe(), model_pair=pick.pair if pick is not None else None,
                         model_note=pick.note if pick is not None else None,
                         model_ceiling_gbps=figure.ceiling_gbps if figure is not None and pick is not None
                         and pick.pair == figure.choice and figure.ceiling_gbps > figure.busbw_gbps else None)
        out.append(_with_verdict(row, rank_steps > 0))
    return out


def bench_gaps(summary: list[SummaryRow], bench: BenchCurves) -> list[str]:
    """Which rows have no sweep figure, and why: the op / rank count is not in the sweep, or the size is outside."""
    missing = sorted({(r.op, r.nranks) for r in summary
                      if r.nranks is not None and (r.op, r.nranks) not in bench.curves and r.nranks > 1})
    outside = sorted({(r.op, r.nranks or 0) for r in summary
                      if (r.op, r.nranks) in bench.curves and r.bench_busbw_gbps is None})
    out = []
    if missing:
        out.append(f"the sweep ({bench.source}) has no " + ", ".join(f"{op} on {n} ranks" for op, n in missing)
                   + ": no benchmark figure for them")
    if outside:
        out.append(f"some sizes of {', '.join(op for op, _ in outside)} are outside the sweep's measured range "
                   f"({bench.source}): no benchmark figure there")
    return out


ABOVE_BENCH_RATIO = 1.25
"""A job's busbw this far above the sweep's at its size is no longer sweep noise: the sweep is not its bound."""


def above_bench(summary: list[SummaryRow], bench: BenchCurves) -> list[str]:
    """A warning when the job beats the sweep: then the goodput figures do not mean "share of the fabric"."""
    above = [r for r in summary if r.goodput_ratio is not None and r.goodput_ratio > ABOVE_BENCH_RATIO]
    if not above:
        return []
    worst = max(above, key=lambda r: r.goodput_ratio or 0.0)
    return [f"the job's busbw is above the sweep's ({bench.source}) by more than {ABOVE_BENCH_RATIO - 1:.0%} at "
            f"{len(above)} of {sum(r.goodput_ratio is not None for r in summary)} op/size rows (up to "
            f"{worst.goodput_ratio:.1f}x, {worst.op} {worst.size_bytes} B): that sweep is not a bound for this job, "
            "so its goodput figures are not shares of what the fabric gives. Likely causes: a noisy sweep (few "
            "iterations or repeats, a loaded machine: rerun it with more), a sweep of other nodes, rank layout or "
            "settings than the job's, or the job's transfer time taken as the minimum over ranks, which leaves "
            "out the wait of the rank that arrived last"]


def _with_verdict(row: SummaryRow, has_steps: bool) -> SummaryRow:
    return replace(row, verdict=verdict(row.op, row.size_bytes, row.calls_per_step, row.busbw_gbps,
                                        row.bench_busbw_gbps, row.model_busbw_gbps, row.exposed_us_per_step,
                                        has_steps=has_steps, model_spread=row.model_published_spread,
                                        model_near_ties=row.model_near_ties, model_note=row.model_note,
                                        model_ceiling=row.model_ceiling_gbps))
