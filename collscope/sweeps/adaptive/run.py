"""Run an adaptive sweep: rounds of points chosen by :mod:`collscope.sweeps.adaptive.planner`, in the grid's layout.

Each round is an ordinary :class:`~collscope.sweeps.spec.Plan` run by :func:`~collscope.sweeps.runner.run_sweep`
into the same results directory, so ``analyze``, ``recommend`` and ``sweep status`` read it as they read a grid.
A point of round k measures one configuration at the sizes the planner asked for (``Point.sizes``, passed to
``collscope bench --sizes``); its id carries the round (``-k<round>``) and a hash of its sizes.

``sweep.json`` holds ``strategy: "adaptive"``, the strategy's options (also part of the sweep id, so a grid and
an adaptive sweep, or two different ``min_gain``, never share a directory), the cumulative plan (every point of
every round so far) and ``rounds``: per round its points and the planner's decisions (dropped configurations
with the reason, unsettled sizes, requests, best configuration per size range).

With persistent workers (``workers="persistent"``) one :class:`~collscope.sweeps.worker_jobs.WorkerPool` serves
every round: the worker job launched for round 1 stays alive while the next round is planned and is fed that
round's points, so the whole adaptive sweep costs one launch (per set of launch-only settings), like the grid.
Timeouts, failures and relaunches per point are the worker jobs' own; a job that ends badly is replaced for
the points after it and for later rounds.

Resuming: the decisions of a round depend only on the points done before it, which a rerun does not measure
again, so a rerun replays the same rounds, runs what is pending and goes on. Failed points are left failed
(unless ``retry_failed``); the planner works with what was measured.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from collscope.analysis.fit import aggregate, fit_alpha_beta
from collscope.atomic import write_text_atomic
from collscope.collectives.record import busbw_factor
from collscope.collectives.sizes import size_ladder
from collscope.collectives.spec import ELEM_SIZE
from collscope.errors import ConfigError
from collscope.results.store import ResultsDir
from collscope.sweeps.adaptive.planner import (
    DEFAULT_CONFIG,
    Cell,
    ConfigEvidence,
    Decision,
    GroupEvidence,
    LineBand,
    decide,
    first_round_sizes,
)
from collscope.sweeps.plan import plan_sweep
from collscope.sweeps.runner import RunOptions, SweepOutcome, run_sweep
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from collscope.sweeps.worker_jobs import WorkerPool
from collscope.topo.model import NodeTopology
from collscope.vocab.configs import config_of
from collscope.vocab.engines import engine_row

__all__ = ["AdaptiveOptions", "AdaptiveOutcome", "run_adaptive", "group_evidence"]

log = logging.getLogger(__name__)
LAUNCH_BOUND = 5.0
"""``refine="auto"`` fills when a point's duration exceeds this many times its time inside collectives."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AdaptiveOptions:
    min_gain: float = 0.02
    """A configuration must be able to beat the default (and be the best) by more than this to be kept, and a
    size is settled when nobody can beat its leader by more than this (0.02 = 2%)."""
    first_sizes: int = 5
    """Sizes per configuration in round 1 (log-spaced over the ladder, smallest and largest included)."""
    max_rounds: int = 8
    """Stop after this many rounds even if sizes are still unsettled."""
    noise_floor: float = 0.02
    """Smallest relative noise assumed for one measurement."""
    refine: Literal["auto", "bisect", "fill"] = "auto"
    """How a crossover interval is refined: its middle ladder size (``bisect``), every size in it (``fill``), or
    ``auto``: fill when round 1's launches took more than :data:`LAUNCH_BOUND` times the time spent inside
    collectives (launch-bound: extra sizes in a launch cost next to nothing, extra rounds cost a launch each)."""
    max_points: float = 1.0
    """Budget, as a fraction of the grid's point count: a round that would pass it is not started."""

    def __post_init__(self) -> None:
        if not 0 <= self.min_gain < 10 or math.isnan(self.min_gain):
            raise ConfigError(f"min gain {self.min_gain!r} is invalid; valid: a fraction >= 0 and < 10 (0.02 = 2%)")
        if self.first_sizes < 2:
            raise ConfigError(f"first_sizes={self.first_sizes} is invalid; valid: 2 or more (min and max)")
        if self.refine not in ("auto", "bisect", "fill"):
            raise ConfigError(f"refine={self.refine!r} is invalid; valid: auto, bisect, fill")
        if not self.max_points > 0:
            raise ConfigError(f"max_points={self.max_points!r} is invalid; valid: a fraction of the grid's points > 0")
        if self.max_rounds < 1:
            raise ConfigError(f"max_rounds={self.max_rounds} is invalid; valid: 1 or more")

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": "adaptive", "min_gain": self.min_gain, "first_sizes": self.first_sizes,
                "max_rounds": self.max_rounds, "noise_floor": self.noise_floor, "refine": self.refine,
                "max_points": self.max_points}


@dataclass
class AdaptiveOutcome:
    sweep_id: str
    out_dir: Path
    rounds: list[dict[str, Any]] = field(default_factory=list)
    """Per round: ``round``, ``points`` (ids) and ``decisions`` (per op, :meth:`Decision.to_dict`)."""
    outcomes: list[SweepOutcome] = field(default_factory=list)
    decisions: dict[str, Decision] = field(default_factory=dict)
    """The last decision per op: survivors, dropped configurations, best configuration per size."""
    commands: list[str] = field(default_factory=list)
    launches: int | None = None
    """Worker jobs started for the whole sweep (persistent workers); None with one launch per point."""

    @property
    def failed(self) -> list[Any]:
        return [o for out in self.outcomes for o in out.failed]


def run_adaptive(spec: SweepSpec, out_dir: Path, options: RunOptions, adaptive: AdaptiveOptions | None = None, *,
                 meta: dict[str, Any] | None = None, topology: NodeTopology | None = None,
                 echo: Callable[[str], None] = print) -> AdaptiveOutcome:
    """Plan round 1, run it, decide, run the next round, ... until the planner asks for nothing more."""
    adaptive = adaptive or AdaptiveOptions()
    if engine_row(spec.engine, spec.backend).program != "bench":
        raise ConfigError(f"the adaptive strategy needs engine mpi or torch (points measure chosen sizes with "
                          f"collscope bench --sizes); engine {spec.engine!r} takes a ladder: use --strategy grid")
    if options.shard is not None:
        raise ConfigError("--shard splits a fixed plan; an adaptive sweep decides each round from the last: "
                          "use --strategy grid for job arrays")
    grid = plan_sweep(spec, topology=topology)
    configs = {op: [p.settings for p in grid.points if p.op == op and p.repeat == 0] for op in spec.ops}
    ladders = {op: tuple(size_ladder(spec.min_bytes, spec.max_bytes, spec.factor, elem_size=ELEM_SIZE[spec.dtype],
                                     op=op, nranks=spec.nranks)) for op in spec.ops}
    strategy = adaptive.to_dict()
    first = [_point(spec, op, s, first_round_sizes(ladders[op], adaptive.first_sizes), 0, 1)
             for op in spec.ops for s in configs[op]]
    outcome = AdaptiveOutcome(Plan(spec, (), grid.skipped, strategy).sweep_id, Path(out_dir))
    if options.dry_run:
        dry = run_sweep(Plan(spec, tuple(first), grid.skipped, strategy), out_dir, options, meta=meta, echo=echo)
        outcome.commands = [*dry.commands, "# later rounds are chosen from round 1's measurements"]
        return outcome
    results = ResultsDir(Path(out_dir))
    settings_of = {config_of(s): s for op in spec.ops for s in configs[op]}
    points: list[Point] = []
    dropped: dict[str, set[str]] = {op: set() for op in spec.ops}
    round_points = first
    budget = adaptive.max_points * len(grid.points)
    fill = adaptive.refine == "fill"
    earlier = _recorded_refine(results) if results.sweep_json.exists() else None  # a resumed sweep replays it
    pool = WorkerPool() if options.workers == "persistent" else None
    lock = results.lock()  # held across the rounds (run_sweep's own is re-entrant)
    lock.__enter__()
    try:
        for k in range(1, adaptive.max_rounds + 1):
            if k > 1 and len(points) + len(round_points) > budget:
                echo(f"adaptive: round {k} ({len(round_points)} points) would pass the budget of {budget:g} points")
                break
            points += [p for p in round_points if p not in points]
            cumulative = Plan(spec, tuple(points), grid.skipped, strategy)
            results.prepare(cumulative.sweep_id, cumulative.spec.recorded_dict(), cumulative.to_dict(),
                            {**(meta or {}), "strategy": "adaptive"})
            pending = {"round": k, "points": [p.point_id for p in round_points]}
            _write_rounds(results, cumulative, [*outcome.rounds, pending])
            echo(f"adaptive round {k}: {len(round_points)} point(s)")
            outcome.outcomes.append(run_sweep(Plan(spec, tuple(round_points), grid.skipped, strategy), out_dir,
                                              options, meta=meta, echo=echo, pool=pool))
            evidence = group_evidence(results, points, spec, ladders)
            if k == 1 and adaptive.refine == "auto":
                fill = earlier == "fill" if earlier else _launch_bound(results, outcome.outcomes[-1], spec)
                log.info("adaptive: refine by %s", "fill (launch-bound)" if fill else "bisection")
            decisions = {}
            for op in spec.ops:
                if op not in evidence:
                    continue
                decision = decide(evidence[op], min_gain=adaptive.min_gain, max_repeats=max(spec.repeats, 1),
                                  dropped_before=dropped[op], noise_floor=adaptive.noise_floor, fill=fill)
                dropped[op] |= set(decision.dropped)
                decisions[op] = decision
                for name, why in decision.dropped.items():
                    log.info("%s: dropped %s: %s", op, name, why)
            outcome.decisions.update(decisions)
            outcome.rounds.append({"round": k, "points": [p.point_id for p in round_points],
                                   "refine": "fill" if fill else "bisect",
                                   "decisions": {op: d.to_dict() for op, d in decisions.items()}})
            _write_rounds(results, cumulative, outcome.rounds)
            round_points = _next_points(spec, decisions, settings_of, evidence, k + 1)
            if not round_points:
                break
    finally:
        lock.__exit__(None, None, None)
        if pool is not None:
            pool.close()
            outcome.launches = pool.launches
    return outcome


def _recorded_refine(results: ResultsDir) -> str | None:
    rounds = results.read_sweep_json().get("rounds") or []
    refine = rounds[0].get("refine") if rounds and isinstance(rounds[0], dict) else None
    return refine if refine in ("fill", "bisect") else None


def _launch_bound(results: ResultsDir, outcome: SweepOutcome, spec: SweepSpec) -> bool:
    """Whether round 1's points took more than LAUNCH_BOUND x their time inside collectives."""
    launch_s = collective_s = 0.0
    for o in outcome.outcomes:
        if o.status != "done" or o.duration_s <= 0:
            continue
        launch_s += o.duration_s
        collective_s += sum(r.time_us * (spec.iters + spec.warmup + 1) for r in results.read_point(o.point_id)) * 1e-6
    return launch_s > LAUNCH_BOUND * collective_s if launch_s > 0 else False


def _point(spec: SweepSpec, op: str, settings: dict[str, str], sizes: tuple[int, ...], repeat: int,
           round_index: int) -> Point:
    pid = point_id_for(spec, op, settings, repeat, sizes=sizes, round_index=round_index)
    return Point(pid, op, dict(settings), repeat, sizes)


def _next_points(spec: SweepSpec, decisions: dict[str, Decision], settings_of: dict[str, dict[str, str]],
                 evidence: dict[str, GroupEvidence], round_index: int) -> list[Point]:
    """One point per (op, configuration) with requests; ``repeat`` is the lowest repeat index among its sizes."""
    out = []
    for op, decision in decisions.items():
        cells = {c.config: c.cells for c in evidence[op].configs}
        for name, sizes in decision.requests.items():
            have = cells.get(name, {})
            repeat = min((have[s].n if s in have else 0) for s in sizes)
            out.append(_point(spec, op, settings_of[name], sizes, repeat, round_index))
    return out


def group_evidence(results: ResultsDir, points: list[Point], spec: SweepSpec,
                   ladders: dict[str, tuple[int, ...]]) -> dict[str, GroupEvidence]:
    """Per op, the measured cells and the alpha-beta fit of every configuration, from the done points.

    Records are attributed to their point's configuration (not the environment they captured), and points that
    ended as failures are left out.
    """
    failures = results.failures()
    rows = []
    for point in points:
        if not results.is_done(point.point_id) or point.point_id in failures:
            continue
        config = config_of(point.settings)
        for r in results.read_point(point.point_id):
            rows.append({"backend": r.backend, "op": point.op, "config": config, "nranks": r.nranks,
                         "nnodes": r.nnodes or 1, "in_place": r.in_place, "size_bytes": r.size_bytes,
                         "time_us": r.time_us, "busbw_gbps": r.busbw_gbps, "algbw_gbps": r.algbw_gbps, "ok": r.ok})
    if not rows:
        return {}
    agg = aggregate(pd.DataFrame(rows))
    fits = fit_alpha_beta(agg).set_index(["op", "config"])
    out = {}
    for op, by_op in agg.groupby("op", sort=True):
        configs = []
        for name, cell_rows in by_op.groupby("config", sort=True):
            cells = {int(r["size_bytes"]): Cell(median_gbps=float(r["busbw_gbps"]), n=int(r["n"]),
                                                min_gbps=float(r["busbw_min_gbps"]),
                                                max_gbps=float(r["busbw_max_gbps"]))
                     for r in cell_rows.to_dict("records") if int(r["n"]) > 0}
            f = fits.loc[(op, name)]
            f = f.iloc[0] if isinstance(f, pd.DataFrame) else f
            fit = LineBand(alpha_us=float(f.alpha_us), alpha_lo_us=float(f.alpha_lo_us),
                           alpha_hi_us=float(f.alpha_hi_us), beta_us_per_byte=float(f.beta_us_per_byte),
                           beta_lo=float(f.beta_lo), beta_hi=float(f.beta_hi), mad_rel=float(f.mad_rel))
            configs.append(ConfigEvidence(config=str(name), cells=cells, fit=fit))
        if DEFAULT_CONFIG not in {c.config for c in configs}:
            log.warning("%s: no usable measurement of the default; the planner stops for this op", op)
            continue
        out[str(op)] = GroupEvidence(op=str(op), busbw_factor=busbw_factor(str(op), spec.nranks),
                                     ladder=ladders[str(op)], configs=tuple(configs))
    return out


def _write_rounds(results: ResultsDir, plan: Plan, rounds: list[dict[str, Any]]) -> None:
    """sweep.json with the cumulative plan, the strategy and the rounds so far (temp file + rename)."""
    doc = results.read_sweep_json()
    doc.update(plan=plan.to_dict(), strategy="adaptive", adaptive=plan.strategy, rounds=rounds)
    write_text_atomic(results.sweep_json, json.dumps(doc, indent=2, sort_keys=True) + "\n")
