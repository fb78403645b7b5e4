"""A training job's collectives from its traces: every call with its transfer time, wait and busbw, per step and
rank where the time went (transfer, waiting for a late peer, compute, GPU idle), the ranks the others wait for,
per (op, size) the job's busbw next to a sweep's and a model's, and what a faster collective would save.

:func:`analyze_traces` is what ``collscope trace`` runs; :meth:`TraceReport.to_dict` is ``trace --json``
(DESIGN.md), :meth:`TraceReport.workload` the workload file ``recommend --workload`` reads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from collscope.geometry import Geometry, Known
from collscope.traces.compare import BenchCurves, ModelFn
from collscope.traces.exposure import RankSpans, StepStat, rank_exposure, step_stats
from collscope.traces.geometry import group_nodes, job_geometry, rank_hosts
from collscope.traces.late import RankTiming, late_ranks
from collscope.traces.match import Matched, match_calls
from collscope.traces.ran_pair import LoggedPairs, call_pair
from collscope.traces.record import CollectiveCall, RankTrace
from collscope.traces.summary import SummaryRow, above_bench, bench_gaps, summary_rows
from collscope.traces.verdict import headline
from collscope.traces.wait import CallSplit, split_matched
from collscope.traces.whatif import Saving, call_saving, per_step
from collscope.units import algbw_gbps
from collscope.vocab.ops import busbw_factor

__all__ = ["TraceReport", "SummaryRow", "analyze_traces"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceReport:
    world_size: int | None
    backend: str
    ranks: tuple[int, ...]
    sources: tuple[str, ...]
    collectives: tuple[dict[str, Any], ...]
    steps: tuple[StepStat, ...]
    summary: tuple[SummaryRow, ...]
    warnings: tuple[str, ...]
    geometry: Geometry = Geometry()
    """The job's geometry with its evidence (:func:`collscope.traces.geometry.job_geometry`)."""
    process_groups: tuple[dict[str, Any], ...] = ()
    """Each process group the calls ran in: name, size, ranks, the evidence, the nodes it spans."""
    late_ranks: tuple[dict[str, Any], ...] = ()
    """Ranks by the time the others waited for them (:func:`collscope.traces.late.late_ranks`)."""
    what_if: dict[str, Any] = field(default_factory=dict)
    """``network_us_per_step``, ``waiting_us_per_step`` (:mod:`collscope.traces.whatif`), the reference used."""
    outside_window: dict[str, Any] = field(default_factory=lambda: {"kernels": 0, "comm_us": 0.0})
    """Kernels launched before the profiler window (no step holds them) and their communication time."""
    no_communication: dict[str, Any] = field(default_factory=lambda: {"calls": 0, "ops": {}})
    """Calls in groups of 1 rank: no data moves (NCCL launches nothing); never counted as collectives."""
    headline: str = ""
    """The one-line verdict (:func:`collscope.traces.verdict.headline`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "backend": self.backend, "ranks": list(self.ranks),
                "sources": list(self.sources), "verdict": self.headline, "geometry": self.geometry.to_json(),
                "process_groups": list(self.process_groups), "collectives": list(self.collectives),
                "steps": [s.to_dict() for s in self.steps], "summary": [r.to_dict() for r in self.summary],
                "late_ranks": list(self.late_ranks), "what_if": dict(self.what_if),
                "outside_window": dict(self.outside_window), "no_communication": dict(self.no_communication),
                "warnings": list(self.warnings)}

    def top_exposed(self, n: int = 5) -> list[SummaryRow]:
        rows = [r for r in self.summary if r.exposed_us_per_step]
        return sorted(rows, key=lambda r: -(r.exposed_us_per_step or 0.0))[:n]

    def workload(self) -> dict[str, Any]:
        """DESIGN.md "Workload file": calls per step of each (op, size), rounded, at least 1."""
        entries = [{"op": r.op, "size_bytes": r.size_bytes, "calls": max(1, round(r.calls_per_step or 0.0)),
                    "nranks": r.nranks} for r in self.summary if r.nranks and r.nranks > 1 and r.size_bytes > 0]
        return {"workload": entries}


def _busbw(call: CollectiveCall, time_us: float | None) -> tuple[float | None, float | None]:
    """algbw and busbw of a call, busbw with the factor of its group's size (never the world's)."""
    if call.size_bytes is None or time_us is None or time_us <= 0:
        return None, None
    alg = algbw_gbps(call.size_bytes, time_us)
    if call.group_size is None:
        return alg, None
    return alg, alg * busbw_factor(call.op, max(call.group_size, 1))


def analyze_traces(traces: Sequence[RankTrace], *, bench: BenchCurves | None = None,
                   model: ModelFn | None = None, overrides: Mapping[str, int | None] | None = None,
                   logged: LoggedPairs | None = None) -> TraceReport:
    """Match the ranks' calls, split them into wait and transfer, sum the steps, find the late ranks, compare per
    (op, size) of each group size, and say what a faster collective would save.

    ``overrides``: the user's ``nranks`` / ``nnodes`` / ``nvl_domain`` (``--nranks`` ...), which win over the
    traces' evidence; the model of a row gets the nodes its group spans, and no figure when that is unknown.
    Calls in groups of 1 rank are no communication: listed apart (``no_communication``), nowhere else.
    ``logged``: the job's NCCL logs (``--nccl-log``), which say the (algorithm, protocol) of calls whose trace
    does not (:mod:`collscope.traces.ran_pair`)."""
    geometry = job_geometry(traces, overrides, ", ".join(t.source for t in traces[:3])
                            + (", ..." if len(traces) > 3 else ""))
    hosts = rank_hosts(traces)
    warnings = [w for t in traces for w in t.warnings]
    solo = [c for t in traces for c in t.calls if c.group_size == 1]
    spans = [RankSpans.of(t) for t in traces]
    exposed = [replace(t, calls=tuple(rank_exposure(replace(t, calls=tuple(c for c in t.calls
                                                                           if c.group_size != 1)), sp)))
               for t, sp in zip(traces, spans, strict=True)]
    matched, match_warnings = match_calls(exposed)
    warnings.extend(match_warnings)
    splits, lates = split_matched(matched, {t.rank: sp.exposed for t, sp in zip(exposed, spans, strict=True)})
    steps: list[StepStat] = []
    timing: dict[int, RankTiming] = {}
    for t, sp in zip(exposed, spans, strict=True):
        stats = step_stats(t, t.calls, splits, sp)
        steps.extend(stats)
        timing[t.rank] = RankTiming(trace=t, calls=t.calls, steps=stats, spans=sp)
    rows: list[dict[str, Any]] = []
    per_size: dict[tuple[str, int, int | None], dict[str, Any]] = defaultdict(
        lambda: {"calls": 0, "total_us": 0.0, "busbw": [], "exposed_us": 0.0, "in_steps": 0, "nodes": None,
                 "wait_us": None, "exposed_transfer_us": 0.0, "exposed_wait_us": 0.0, "ran": []})
    groups: dict[tuple[str | None, int | None, tuple[int, ...] | None], dict[str, Any]] = {}
    shared: dict[tuple[int, ...] | None, list[int] | None] = {}  # one list per group, not one per call
    saved: list[tuple[CollectiveCall, CallSplit, float | None]] = []
    from_duration = 0
    for m in matched:
        time_us = m.transfer_us
        first = _sized(m.calls[0], m)
        _, m_bus = _busbw(first, time_us if time_us is not None else first.duration_us)
        for own in m.calls:
            call = _sized(own, m)
            t_us = time_us if time_us is not None else call.duration_us
            if time_us is None and call.duration_us is not None and call.size_bytes is not None:
                from_duration += 1
            alg, bus = _busbw(call, t_us)
            split = splits.get(id(own))
            ran = call_pair(call, logged)
            rows.append({"rank": call.rank, "op": call.op, "size_bytes": own.size_bytes,
                         "matched_size_bytes": m.size_bytes, "dtype": call.dtype,
                         "group_size": call.group_size,
                         "group_ranks": shared.setdefault(call.group_ranks, _listed(call.group_ranks)),
                         "process_group": call.process_group, "seq": call.seq,
                         "step": call.step, "start_us": call.start_us, "duration_us": call.duration_us,
                         "transfer_us": time_us, "skew_us": m.skew_us, "algbw_gbps": alg, "busbw_gbps": bus,
                         "exposed_us": call.exposed_us, "stream": call.stream, "algorithm": ran[0],
                         "protocol": ran[1], "pair_source": ran[2] if ran[0] is not None else None,
                         **_split_fields(split)})
            key = (call.process_group, call.group_size, call.group_ranks)
            if key not in groups:
                groups[key] = _group_row(call, geometry, hosts)
            if split is not None and call.step is not None:
                saved.append((call, split, m_bus))
            if call.size_bytes is None:
                continue
            cell = per_size[(call.op, call.size_bytes, call.group_size)]
            cell["nodes"] = _same_nodes(cell["nodes"], group_nodes(call, geometry, hosts))
            cell["calls"] += 1
            cell["ran"].append(ran)
            cell["total_us"] += call.duration_us or 0.0
            if split is not None:
                cell["wait_us"] = (cell["wait_us"] or 0.0) + split.wait_us
            if call.step is not None:
                cell["exposed_us"] += call.exposed_us or 0.0
                cell["in_steps"] += 1
                if split is not None:
                    cell["exposed_transfer_us"] += split.exposed_transfer_us
                    cell["exposed_wait_us"] += split.exposed_wait_us
        if m_bus is not None:
            per_size[(first.op, first.size_bytes or 0, first.group_size)]["busbw"].append(m_bus)
    if logged is not None:
        warnings.extend(logged.warnings())
    if from_duration:
        warnings.append(f"{from_duration} calls have no transfer time (one rank known, or ranks unmatched): their "
                        "bandwidth is computed from their own duration, which includes waiting for peers")
    rank_steps = sum(len(t.steps) for t in traces)
    if not rank_steps and per_size:
        warnings.append("no ProfilerStep#N spans: no per-step figures, and the workload counts each rank's calls "
                        "over the whole trace as one step")
    warnings.extend(_group_warnings(groups.values()))
    summary = summary_rows(per_size, rank_steps, bench, model, len({t.rank for t in traces}), geometry, warnings)
    n_steps = len({s.step for s in steps})
    summary, what_if = _what_if(summary, per_size, saved, rank_steps, n_steps)
    if bench is not None:
        warnings.extend(bench_gaps(summary, bench))
        warnings.extend(above_bench(summary, bench))
    table = late_ranks(lates, timing)
    backends: list[str] = sorted({t.backend for t in traces if t.backend != "unknown"}) or ["unknown"]
    outside = {"kernels": sum(t.outside_window_kernels for t in traces),
               "comm_us": sum(t.outside_window_comm_us for t in traces)}
    ops: dict[str, int] = defaultdict(int)
    for c in solo:
        ops[c.op] += 1
    return TraceReport(world_size=geometry.nranks.value, backend=",".join(backends),
                       ranks=tuple(sorted({t.rank for t in traces})), sources=tuple(t.source for t in traces),
                       collectives=tuple(rows), steps=tuple(steps), summary=tuple(summary),
                       warnings=tuple(dict.fromkeys(warnings)), geometry=geometry,
                       process_groups=tuple(g for g in groups.values()), late_ranks=tuple(table), what_if=what_if,
                       outside_window=outside, no_communication={"calls": len(solo), "ops": dict(sorted(ops.items()))},
                       headline=headline(steps, table, what_if))


def _sized(call: CollectiveCall, m: Matched) -> CollectiveCall:
    """The call with the size its busbw and its summary row take: the matched collective's (an alltoallv whose
    ranks send different amounts: the total over its ranks / their number, :attr:`Matched.size_bytes`), else its
    own."""
    if m.size_bytes is None or m.size_bytes == call.size_bytes or not m.consistent:
        return call
    return replace(call, size_bytes=m.size_bytes)


def _split_fields(split: CallSplit | None) -> dict[str, Any]:
    """A call row's wait / transfer split (:mod:`collscope.traces.wait`); None where the call has none."""
    if split is None:
        return {"wait_us": None, "late_rank": None, "late_by_us": None, "exposed_wait_us": None,
                "hidden_wait_us": None, "exposed_transfer_us": None, "hidden_transfer_us": None}
    return {"wait_us": split.wait_us, "late_rank": split.late_rank, "late_by_us": split.late_by_us,
            "exposed_wait_us": split.exposed_wait_us, "hidden_wait_us": split.hidden_wait_us,
            "exposed_transfer_us": split.exposed_transfer_us, "hidden_transfer_us": split.hidden_transfer_us}


def _what_if(summary: list[SummaryRow], per_size: Mapping[tuple[str, int, int | None], Mapping[str, Any]],
             saved: Sequence[tuple[CollectiveCall, CallSplit, float | None]], rank_steps: int,
             n_steps: int) -> tuple[list[SummaryRow], dict[str, Any]]:
    """Each row's and the job's savings per step (:mod:`collscope.traces.whatif`), at the row's sweep busbw,
    else its model's."""
    refs: dict[tuple[str, int | None, int | None], float | None] = {
        (r.op, r.size_bytes, r.nranks): (r.bench_busbw_gbps or r.model_busbw_gbps) for r in summary}
    kinds = {("sweep" if r.bench_busbw_gbps else "model") for r in summary
             if r.bench_busbw_gbps or r.model_busbw_gbps}
    savings: list[Saving] = []
    for call, split, bus in saved:
        key = (call.op, call.size_bytes, call.group_size)
        savings.append(call_saving(call.rank, call.step or 0, key, split, bus, refs.get(key)))
    by_key: dict[object, list[Saving]] = defaultdict(list)
    for s in savings:
        by_key[s.key].append(s)
    out = []
    for r in summary:
        key = (r.op, r.size_bytes, r.nranks)
        cell = per_size[key]
        net, wait = per_step(by_key.get(key, []), n_steps)
        has = cell["wait_us"] is not None and rank_steps > 0
        out.append(replace(r, wait_us=cell["wait_us"], network_us_per_step=net, waiting_us_per_step=wait,
                           exposed_transfer_us_per_step=cell["exposed_transfer_us"] / rank_steps if has else None,
                           exposed_wait_us_per_step=cell["exposed_wait_us"] / rank_steps if has else None))
    net, wait = per_step(savings, n_steps)
    missing = sum(1 for s in savings if s.network_us is None)
    return out, {"network_us_per_step": net, "waiting_us_per_step": wait,
                 "reference": " or ".join(sorted(kinds, reverse=True)) or None,
                 "calls_without_reference": missing, "steps": n_steps}


def _listed(ranks: tuple[int, ...] | None) -> list[int] | None:
    return None if ranks is None else list(ranks)


def _group_row(call: CollectiveCall, geometry: Geometry, hosts: Mapping[int, str]) -> dict[str, Any]:
    nodes = group_nodes(call, geometry, hosts)
    evidence = list(call.group_evidence)
    if not evidence and call.group_size is not None:
        evidence = [f"{call.group_size} ranks in the call's communicator ({call.size_source} record)"
                    if call.group_ranks is None else f"the trace lists the group's {len(call.group_ranks)} ranks"]
    return {"process_group": call.process_group, "group_size": call.group_size,
            "group_ranks": None if call.group_ranks is None else list(call.group_ranks),
            "evidence": evidence, "nnodes": nodes.to_json()}


def _same_nodes(seen: Known | None, new: Known) -> Known:
    """The nodes of the groups of one summary row: one value when they agree, else unknown."""
    if seen is None:
        return new
    if seen.value == new.value or seen.evidence and seen.evidence[0].startswith(_DIFFERENT):
        return seen
    return Known(None, (f"{_DIFFERENT} ({seen.describe()}; {new.describe()})",))


_DIFFERENT = "groups of this size span different numbers of nodes"


def _group_warnings(groups: Any) -> list[str]:
    out = []
    unknown = [g for g in groups if g["group_size"] is None]
    if unknown:
        names = ", ".join(sorted({str(g["process_group"]) for g in unknown}))
        out.append(f"the size of process group(s) {names} is unknown (the calls name a group the trace does not "
                   "describe): their busbw is unknown")
    assumed = [g for g in groups if any("assumed" in e for e in g["evidence"])]
    if assumed:
        out.append(f"calls name no process group and the trace declares none: their group is taken to be the "
                   f"whole job ({assumed[0]['group_size']} ranks, distributedInfo.world_size); a sub-group's "
                   "busbw would then be wrong")
    return out
