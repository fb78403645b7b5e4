"""Run a canary: both sides interleaved in ABBA blocks through the sweep runner, then the verdict.

:func:`run_canary` plans the blocks (:mod:`.plan`), runs them with :func:`collscope.sweeps.runner.run_sweep` into
one results directory (resumable: the same request again skips finished points), and keeps ``canary.json``
(:mod:`.layout`) current. With a budget, block 0 runs first and its wall clock sets how many blocks fit
(:func:`~collscope.canary.plan.blocks_for_budget`); the decision is written down at once, so a resume completes
the same plan. :func:`~collscope.canary.run_judge.judge_canary` then judges the directory.

Environment: the canary times both sides in the environment it inherits (that is A, today's configuration);
each side's settings are added over it for that side's points only, and reach every rank (mpirun ``-x``, srun
``--export=ALL``). Unlike ``sweep run`` nothing inherited is unset: the audit of what shaped both sides is kept in
``sweep.json`` (``inherited_env``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collscope.atomic import write_text_atomic
from collscope.canary.layout import CANARY_FILE, CanaryMeta, SideConfig, read_canary, write_canary
from collscope.canary.plan import DEFAULT_MAX_BLOCKS, MIN_BLOCKS, blocks_for_budget, plan_canary, planned_points
from collscope.canary.run_judge import load_workload
from collscope.errors import ConfigError
from collscope.sweeps.launch_options import LauncherKind, MpiFlavour, SrunMpi
from collscope.sweeps.spec import Plan, SweepSpec
from collscope.vocab.engines import engine_row

if TYPE_CHECKING:
    from collscope.analysis.recommend.workload import Workload
    from collscope.sweeps.runner import PointOutcome, RunOptions

__all__ = ["CanaryRequest", "CanaryRun", "canary_spec", "run_canary", "timed_run_notes"]


@dataclass(frozen=True, kw_only=True)
class CanaryRequest:
    """Everything ``collscope canary`` was asked to run."""

    out_dir: Path
    """Results directory (a sweep results directory plus canary.json); the same request again resumes there."""
    a: SideConfig
    b: SideConfig
    launcher: LauncherKind = "local"
    engine: str = "mpi"
    backend: str | None = None
    ops: tuple[str, ...] = ()
    """Ops to measure; empty: the workload's ops, else all_reduce."""
    nranks: int = 2
    nnodes: int = 1
    min_bytes: int | None = None
    max_bytes: int | None = None
    iters: int | None = None
    warmup: int | None = None
    timeout_s: float | None = None
    nccl_tests_dir: str | None = None
    workload: Path | None = None
    """A workload file (``trace --workload-out``): its sizes are measured, its calls weight the verdict."""
    budget_s: float | None = None
    """Wall-clock budget; None with ``blocks``."""
    blocks: int | None = None
    """A fixed number of blocks instead of a budget."""
    max_blocks: int = DEFAULT_MAX_BLOCKS
    max_loss: float = 0.01
    hostfile: str | None = None
    mpi_flavour: MpiFlavour = "openmpi"
    srun_mpi: SrunMpi | None = None
    oversubscribe: bool = False
    gpus_per_node: int | None = None
    dry_run: bool = False
    retry_failed: bool = False
    """Measure points whose last attempt failed again (as ``sweep run --retry-failed``)."""
    progress: bool = False

    def __post_init__(self) -> None:
        if (self.budget_s is None) == (self.blocks is None):
            raise ConfigError("give either --budget DURATION or --blocks N")
        if self.blocks is not None and (isinstance(self.blocks, bool) or self.blocks < MIN_BLOCKS):
            raise ConfigError(f"--blocks {self.blocks} is invalid; valid: {MIN_BLOCKS} or more (the interval "
                              "needs the spread between blocks)")
        if self.max_blocks < MIN_BLOCKS:
            raise ConfigError(f"--max-blocks {self.max_blocks} is invalid; valid: {MIN_BLOCKS} or more")
        if not 0 <= self.max_loss < 1:
            raise ConfigError(f"--max-loss {self.max_loss} is invalid; valid: a fraction in [0, 1), e.g. 0.01")


@dataclass
class CanaryRun:
    """What :func:`run_canary` did."""

    out_dir: Path
    meta: CanaryMeta | None
    """canary.json as written (None on a dry run)."""
    outcomes: list[PointOutcome] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    """Dry run: the commands of the planned points."""

    @property
    def failed(self) -> list[PointOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


def canary_spec(request: CanaryRequest,
                workload: Workload | None) -> tuple[SweepSpec, dict[str, tuple[int, ...]] | None]:
    """The measurement both sides share, and explicit sizes per op when a workload names them.

    A workload's ops (unless ``ops`` is given) and sizes within ``min_bytes``..``max_bytes`` are measured exactly
    (engines mpi and torch); engine nccl-tests measures a ladder over the workload's smallest to largest size."""
    ops = tuple(request.ops)
    sizes: dict[str, tuple[int, ...]] | None = None
    fields: dict[str, Any] = {"min_bytes": request.min_bytes, "max_bytes": request.max_bytes}
    if workload is not None:
        in_range = [e for e in workload.entries
                    if (request.min_bytes is None or e.size_bytes >= request.min_bytes)
                    and (request.max_bytes is None or e.size_bytes <= request.max_bytes)]
        if not ops:
            ops = tuple(dict.fromkeys(e.op for e in in_range))
        chosen = [e for e in in_range if e.op in ops]
        if not chosen:
            raise ConfigError(f"workload {workload.source}: no entry of op(s) {', '.join(ops) or '(any)'} within "
                              "--min-bytes/--max-bytes; widen the range or pick another --op")
        fields = {"min_bytes": min(e.size_bytes for e in chosen), "max_bytes": max(e.size_bytes for e in chosen)}
        if engine_row(request.engine, request.backend).program == "bench":  # explicit sizes: collscope bench only
            sizes = {op: tuple(sorted({e.size_bytes for e in chosen if e.op == op})) for op in ops}
    overrides = {k: v for k, v in {**fields, "iters": request.iters, "warmup": request.warmup,
                                   "timeout_s": request.timeout_s}.items() if v is not None}
    spec = SweepSpec(name="canary", engine=request.engine, backend=request.backend,  # type: ignore[arg-type]
                     ops=ops or ("all_reduce",), nranks=request.nranks, nnodes=request.nnodes, repeats=1,
                     nccl_tests_dir=request.nccl_tests_dir, **overrides)
    if any(s.cmd_prefix for s in (request.a, request.b)) and engine_row(spec.engine, spec.backend).program != "bench":
        raise ConfigError("--a-cmd-prefix/--b-cmd-prefix wrap collscope bench (engines mpi and torch); for "
                          "nccl-tests use the same binary path inside the container, or engine torch")
    return spec, sizes


def _run_options(request: CanaryRequest, spec: SweepSpec, wrapper: str | None) -> RunOptions:
    from collscope.sweeps.environment import check_launcher, launch_options
    from collscope.sweeps.runner import RunOptions

    check_launcher(request.launcher, oversubscribe=request.oversubscribe, dry_run=request.dry_run,
                   gpus_per_node=request.gpus_per_node)
    launch = launch_options(request.launcher, spec.engine, flavour=request.mpi_flavour, hostfile=request.hostfile,
                            srun_mpi=request.srun_mpi, oversubscribe=request.oversubscribe,
                            gpus_per_node=request.gpus_per_node)
    if wrapper is not None:
        launch = replace(launch, python=wrapper)
    return RunOptions(launcher=request.launcher, launch=launch, dry_run=request.dry_run, progress=request.progress,
                      retry_failed=request.retry_failed,
                      workers="per-point", keep_env=False, unset_env=(), evidence_runs=True)


def run_canary(request: CanaryRequest, *, echo: Callable[[str], None] = print) -> CanaryRun:
    """Plan and run the canary of ``request`` (or print its commands with ``dry_run``); ConfigError before anything
    runs for a bad request, a launcher that cannot run here, or ``out_dir`` holding another canary."""
    from collscope.files import check_output_dir
    from collscope.sweeps.runner import run_sweep

    workload = load_workload(request.workload)
    spec, sizes = canary_spec(request, workload)
    for line in timed_run_notes(spec, request.a, request.b):
        echo(line)
    ld_path = os.environ.get("LD_LIBRARY_PATH")

    def plan_of(blocks: int) -> Plan:
        return plan_canary(spec, request.a, request.b, blocks=blocks, sizes=sizes, inherited_ld_path=ld_path)

    prefixed = any(s.cmd_prefix for s in (request.a, request.b))
    out = Path(request.out_dir)
    if request.dry_run:
        from collscope.canary.run_prefix import WRAPPER_NAME

        options = _run_options(request, spec, str(out.absolute() / WRAPPER_NAME) if prefixed else None)
        blocks = request.blocks or MIN_BLOCKS
        dry = run_sweep(plan_of(blocks), out, options, echo=echo)
        note = [] if request.blocks else [f"# a budget runs block 0 first; its wall clock sets how many blocks fit "
                                          f"({MIN_BLOCKS}..{request.max_blocks})"]
        return CanaryRun(out, None, commands=[*dry.commands, *note])
    out = check_output_dir(out, "--out")
    previous = read_canary(out) if (out / CANARY_FILE).exists() else None
    first = plan_of(1)
    if previous is not None and previous.sweep_id != first.sweep_id:
        raise ConfigError(f"{out} holds canary {previous.sweep_id!r}, not {first.sweep_id!r} (the sides or the "
                          "measurement differ); use another --out, or the same command to resume")
    wrapper = None
    if prefixed:
        from collscope.canary.run_prefix import write_wrapper
        from collscope.sweeps.environment import launch_options

        wrapper = str(write_wrapper(out, launch_options(request.launcher, spec.engine).python))
    options = _run_options(request, spec, wrapper)
    meta = _sweep_meta(spec, first)
    canary = CanaryMeta(sweep_id=first.sweep_id, a=request.a, b=request.b, blocks_planned=request.blocks,
                        max_blocks=request.max_blocks, budget_s=request.budget_s,
                        block_s=None if previous is None else previous.block_s, max_loss=request.max_loss,
                        workload=None if request.workload is None else str(request.workload))
    if request.blocks is None and previous is not None and previous.blocks_planned is not None:
        canary = replace(canary, blocks_planned=previous.blocks_planned)
    run = CanaryRun(out, None)
    from collscope.results.store import ResultsDir

    results = ResultsDir(out)
    with results.lock():  # one writer across the blocks (run_sweep's own lock is re-entrant)
        if canary.blocks_planned is None:  # a budget: block 0 calibrates
            started = time.monotonic()
            _record_plan(results, first, meta, canary)
            calibration = run_sweep(first, out, options, meta=meta, echo=echo)
            run.outcomes += calibration.outcomes
            ran = [o for o in calibration.outcomes if o.status != "skipped"]
            block_s = _block_seconds(ran, len(first.points), time.monotonic() - started)
            assert request.budget_s is not None
            blocks = (blocks_for_budget(request.budget_s, block_s, max_blocks=request.max_blocks)
                      if block_s is not None else MIN_BLOCKS)
            echo(f"canary: block 0 took {block_s or 0:.1f} s; {blocks} block(s) fit the budget of "
                 f"{request.budget_s:g} s" if block_s is not None else
                 f"canary: block 0 was measured before; planning {blocks} block(s)")
            canary = replace(canary, blocks_planned=blocks, block_s=block_s)
        assert canary.blocks_planned is not None
        plan = plan_of(canary.blocks_planned)
        canary = _record_plan(results, plan, meta, canary)
        echo(f"canary {plan.sweep_id}: {canary.blocks_planned} ABBA block(s), {len(plan.points)} point(s) "
             f"({', '.join(spec.ops)}, {request.a.label} vs {request.b.label})")
        outcome = run_sweep(plan, out, options, meta=meta, echo=echo)
        done_before = {o.point_id for o in run.outcomes}
        run.outcomes += [o for o in outcome.outcomes if o.point_id not in done_before or o.status != "skipped"]
    run.meta = canary
    return run


def timed_run_notes(spec: SweepSpec, *sides: SideConfig) -> list[str]:
    """What the timed runs do to a side's variables: engines that run NCCL time at ``NCCL_DEBUG=WARN`` without
    ``NCCL_DEBUG_SUBSYS``/``NCCL_DEBUG_FILE`` (:func:`~collscope.sweeps.run_options.timed_launch`), so a side's
    own values of these never reach a timed run; one line per such variable."""
    from collscope.sweeps.run_options import TIMED_DEBUG, TIMED_UNSET

    if not engine_row(spec.engine, spec.backend).honours("nccl"):
        return []
    return [f"side {side.name}: {name}={value} is not used by the timed runs (they log at NCCL_DEBUG=WARN, "
            "without a debug file, on both sides)"
            for side in sides for name, value in sorted(side.env.items()) if name in (*TIMED_DEBUG, *TIMED_UNSET)]


def _block_seconds(ran: list[PointOutcome], points: int, elapsed_s: float) -> float | None:
    """One block's wall clock: the elapsed time when block 0 ran whole, else scaled from the points that ran;
    None when none ran (block 0 was measured by an earlier run that stopped before planning)."""
    if not ran:
        return None
    return elapsed_s if len(ran) == points else elapsed_s / len(ran) * points


def _sweep_meta(spec: SweepSpec, plan: Plan) -> dict[str, Any]:
    from collscope.sweeps.meta import sweep_meta
    from collscope.sweeps.session import audit_sweep_env

    audit = audit_sweep_env(spec, plan, keep_env=True)  # nothing unset: A is the inherited configuration
    # sweep.json's strategy is "grid" (its schema knows grid and adaptive); the plan's strategy says "canary"
    return {**sweep_meta(engine=spec.engine, inherited_env=audit.to_dict()).to_dict(), "strategy": "grid"}


def _record_plan(results: Any, plan: Plan, meta: Mapping[str, Any], canary: CanaryMeta) -> CanaryMeta:
    """sweep.json with ``plan`` (created, or its plan replaced: a budget adds blocks) and canary.json with its
    points; the canary meta written."""
    results.prepare(plan.sweep_id, plan.spec.recorded_dict(), plan.to_dict(), dict(meta))
    doc = results.read_sweep_json()
    doc["plan"] = plan.to_dict()
    write_text_atomic(results.sweep_json, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    canary = replace(canary, points=planned_points(plan))
    write_canary(results.root, canary)
    return canary
