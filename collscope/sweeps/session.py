"""One sweep, start to end: spec (file or preset) + overrides -> plan -> launch settings -> grid or adaptive run.

:func:`run_session` is what ``collscope sweep run`` calls: it loads the spec and applies the command line's
overrides, loads the topology (for hardware constraints), audits what the inherited environment and NCCL's conf
files would change in the timed runs (:mod:`collscope.sweeps.inherited_env`: unset, or refused, unless
``keep_env``), checks the launcher against this machine (:mod:`collscope.sweeps.environment`), records the
machine and the audit in ``sweep.json`` and runs the points with the grid runner or the adaptive strategy.
The result is a :class:`SessionOutcome` for the caller to render.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from collscope.errors import ConfigError
from collscope.files import check_output_dir
from collscope.sweeps.environment import check_launcher, launch_options
from collscope.sweeps.inherited_env import (
    EnvAudit,
    audit_inherited_env,
    check_refused,
    check_resume,
    read_conf_texts,
)
from collscope.sweeps.launch_options import LauncherKind, MpiFlavour, SrunMpi
from collscope.sweeps.runner import PointOutcome, RunOptions, SweepOutcome, Workers, run_sweep
from collscope.sweeps.spec import Plan, SweepSpec
from collscope.vocab.secrets import redact_env

if TYPE_CHECKING:
    from collscope.sweeps.adaptive.run import AdaptiveOutcome
    from collscope.topo.model import NodeTopology

__all__ = ["SweepRequest", "SessionOutcome", "Strategy", "load_request_spec", "run_session", "audit_sweep_env",
           "audit_lines"]

Strategy = Literal["grid", "adaptive"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepRequest:
    """Everything ``collscope sweep run`` was asked to do."""

    out_dir: Path
    """Results directory; rerunning the same request resumes there."""
    spec_file: Path | None = None
    """A YAML spec; exactly one of ``spec_file`` and ``preset``."""
    preset: str | None = None
    """A named preset (``mpi-algos``, ``nccl-algo-proto``, ...)."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """Spec fields set on the command line (``nranks``, ``engine``, ``min_bytes`` ...); they win over the spec."""
    launcher: LauncherKind = "local"
    """How each point starts: ``local``, ``mpirun`` or ``srun`` (inside an allocation)."""
    mpi_flavour: MpiFlavour = "openmpi"
    """mpirun's dialect."""
    hostfile: str | None = None
    """mpirun hostfile."""
    srun_mpi: SrunMpi | None = None
    """srun ``--mpi=``; ``None``: pmix for the mpi engine, Slurm's default otherwise."""
    oversubscribe: bool = False
    """mpirun: allow more ranks than cores."""
    gpus_per_node: int | None = None
    """srun: GPUs of each node (None: from the allocation's SLURM_GPUS_*; 0: CPU nodes), see
    :mod:`collscope.sweeps.slurm_gpu`."""
    one_gpu_per_task: bool = False
    """srun on GPU nodes: the site gives each task one GPU whatever srun asks (nccl-tests gets NCCL_TESTS_DEVICE=0)."""
    topo_paths: tuple[str, ...] = ()
    """Topology of the node the sweep runs on (captures or ``topo show --json``), for constraints and sweep.json."""
    rails: tuple[str, ...] = ()
    """Rail presets (``mpi-rails``, ``gloo-rails``, ``nccl-pxn-rails``): the rails by name (interfaces or HCAs);
    empty: from the topology of ``topo_paths`` when given, else the preset's default."""
    shard: tuple[int, int] | None = None
    """``(i, n)``: run only every n-th point starting at i (grid only)."""
    retry_failed: bool = False
    """Run points whose last attempt failed again."""
    dry_run: bool = False
    """Print every command and environment; run nothing, write nothing."""
    strategy: Strategy = "grid"
    """``grid``: every point; ``adaptive``: a few sizes first, then only contenders near crossovers."""
    min_gain: float = 0.02
    """Adaptive: drop configurations that cannot beat the default by more than this fraction."""
    max_rounds: int = 8
    """Adaptive: most rounds."""
    progress: bool = False
    """Show a progress bar."""
    workers: Workers = "per-point"
    """``per-point``: one launch per point; ``persistent``: ranks launched once per group of points that can
    share a launch (:mod:`collscope.sweeps.persistent`)."""
    keep_env: bool = False
    """``--keep-env``: time every point in the inherited environment (selection variables, swept knobs, NCCL conf
    files, ``NCCL_DEBUG*``) instead of unsetting them or refusing; the audit in sweep.json says what shaped it."""

    def __post_init__(self) -> None:
        if (self.spec_file is None) == (self.preset is None):
            raise ConfigError("give either SPEC.yaml or --preset NAME")
        if self.strategy not in ("grid", "adaptive"):
            raise ConfigError(f"strategy={self.strategy!r} is invalid; valid: grid, adaptive")


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOutcome:
    """What a sweep session did: the plan, and the grid or adaptive outcome."""

    strategy: Strategy
    out_dir: Path
    plan: Plan
    """The full grid plan (points and the points constraints skipped)."""
    grid: SweepOutcome | None = None
    """Strategy grid: every point's outcome."""
    adaptive: AdaptiveOutcome | None = None
    """Strategy adaptive: rounds, decisions and the outcome of every round."""

    @property
    def commands(self) -> list[str]:
        """Dry run: the exact commands that would run."""
        run = self.grid if self.grid is not None else self.adaptive
        return list(run.commands) if run is not None else []

    @property
    def failed(self) -> list[PointOutcome]:
        run = self.grid if self.grid is not None else self.adaptive
        return list(run.failed) if run is not None else []


def load_request_spec(request: SweepRequest, topology: NodeTopology | None = None) -> SweepSpec:
    """The request's spec (file or preset) with its overrides applied; a rail preset gets ``request.rails``, else
    ``topology`` (its rails)."""
    from collscope.sweeps.plan import load_spec
    from collscope.sweeps.plan import preset as make_preset
    from collscope.sweeps.presets import RAIL_PRESETS

    if request.rails and request.preset not in RAIL_PRESETS:
        raise ConfigError(f"--rails applies to the presets {', '.join(RAIL_PRESETS)}, not "
                          f"{request.preset or str(request.spec_file)!r}")
    if request.spec_file is not None:
        spec = load_spec(request.spec_file)
    elif request.preset in RAIL_PRESETS and (request.rails or topology is not None):
        spec = make_preset(str(request.preset), rails=request.rails or topology)
    else:
        spec = make_preset(str(request.preset))
    overrides = {k: v for k, v in request.overrides.items() if v is not None}
    return dataclasses.replace(spec, **overrides) if overrides else spec


def _topology(paths: tuple[str, ...]) -> NodeTopology | None:
    from collscope.topo.load import load_one_node

    return load_one_node(paths) if paths else None


def run_session(request: SweepRequest, *, echo: Callable[[str], None] = print) -> SessionOutcome:
    """Plan and run the sweep of ``request``; ``echo`` gets progress lines (the plan, skipped points, rounds).

    Raises ConfigError before anything runs for a bad spec, override, topology or launcher choice.
    """
    from collscope.sweeps.meta import sweep_meta
    from collscope.sweeps.plan import plan_sweep

    topology = _topology(request.topo_paths)
    spec = load_request_spec(request, topology)
    plan = plan_sweep(spec, topology=topology)
    audit = audit_sweep_env(spec, plan, keep_env=request.keep_env)
    check_refused(audit)
    _check_resumed_env(request.out_dir, spec, audit)
    check_launcher(request.launcher, oversubscribe=request.oversubscribe, dry_run=request.dry_run,
                   gpus_per_node=request.gpus_per_node)
    if not request.dry_run:  # after the spec and the launcher are known good: a bad spec leaves no directory
        check_output_dir(request.out_dir, "--out")
    launch = launch_options(request.launcher, spec.engine, flavour=request.mpi_flavour, hostfile=request.hostfile,
                            srun_mpi=request.srun_mpi, oversubscribe=request.oversubscribe,
                            gpus_per_node=request.gpus_per_node, one_gpu_per_task=request.one_gpu_per_task)
    options = RunOptions(launcher=request.launcher, launch=launch, dry_run=request.dry_run,
                         retry_failed=request.retry_failed, shard=request.shard, progress=request.progress,
                         workers=request.workers, keep_env=request.keep_env, unset_env=audit.unset)
    topo_paths = list(request.topo_paths) or None
    meta = {} if request.dry_run else sweep_meta(engine=spec.engine, topo_paths=topo_paths,
                                                 inherited_env=audit.to_dict()).to_dict()
    if request.strategy == "adaptive":
        from collscope.sweeps.adaptive.run import AdaptiveOptions, run_adaptive

        for line in audit_lines(audit):
            echo(line)
        adaptive = run_adaptive(spec, request.out_dir, options,
                                AdaptiveOptions(min_gain=request.min_gain, max_rounds=request.max_rounds),
                                meta=meta, topology=topology, echo=echo)
        return SessionOutcome(strategy="adaptive", out_dir=request.out_dir, plan=plan, adaptive=adaptive)
    meta["strategy"] = "grid"
    echo(f"sweep {plan.sweep_id}: {len(plan.points)} point(s), {len(plan.skipped)} skipped by constraints")
    for skipped in plan.skipped:
        echo(f"  skipped {skipped.op} {_fmt_settings(skipped.settings)}: {skipped.reason}")
    for line in audit_lines(audit):
        echo(line)
    grid = run_sweep(plan, request.out_dir, options, meta=meta, echo=echo)
    return SessionOutcome(strategy="grid", out_dir=request.out_dir, plan=plan, grid=grid)


def audit_sweep_env(spec: SweepSpec, plan: Plan, *, keep_env: bool,
                    env: Mapping[str, str] | None = None) -> EnvAudit:
    """The inherited-environment audit of ``plan`` (:mod:`collscope.sweeps.inherited_env`): this process's
    environment (or ``env``) and the NCCL conf files it points to, read here."""
    env = os.environ if env is None else env
    swept = frozenset(k for p in plan.points for k in p.settings)
    return audit_inherited_env(env, read_conf_texts(env), engine=spec.engine, backend=spec.backend, swept=swept,
                               fixed_env=spec.fixed_env, keep_env=keep_env)


def audit_lines(audit: EnvAudit) -> list[str]:
    """What the sweep says about the audit before it runs: one line per variable it unsets or keeps although it
    shapes the baseline."""
    out = []
    for s in audit.settings:
        if s.action == "unset":
            out.append(f"inherited {s.name}={s.value} ({s.where}): unset for every launch ({s.why}; --keep-env "
                       "keeps it)")
        elif s.action == "kept" and (s.role == "selection" or s.swept):
            out.append(f"inherited {s.name}={s.value} ({s.where}) kept by --keep-env: the default baseline is "
                       "shaped by it (sweep.json inherited_env)")
    return out


def _check_resumed_env(out_dir: Path, spec: SweepSpec, audit: EnvAudit) -> None:
    """A resume (``out_dir`` holds this spec's sweep) is refused when the inherited tuning differs from the one
    recorded in its sweep.json (:func:`~collscope.sweeps.inherited_env.check_resume`)."""
    import json

    from collscope.results.store import ResultsDir

    if not (out_dir / "sweep.json").is_file():
        return
    doc = ResultsDir(out_dir).read_sweep()
    if doc.spec == json.loads(json.dumps(spec.recorded_dict())):  # another spec: ResultsDir.prepare says so
        check_resume(doc.inherited_env, audit, str(out_dir))


def _fmt_settings(settings: Mapping[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(redact_env(settings).items())) or "(default)"
