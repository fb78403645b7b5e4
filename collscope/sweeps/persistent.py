"""Persistent workers (``--workers persistent``): ranks launched once per group of points, point after point.

A point launched on its own pays mpirun's start, Python and collscope's imports on every rank, MPI_Init and
teardown (about 1.6 s on a 2-core machine) for collectives that take milliseconds. Here the runner starts the
worker job (:mod:`collscope.collectives.harness.worker`) once per *group* and feeds it the group's points:

- **Groups** (:func:`plan_groups`): points share a launch when every setting that differs between them can be
  switched inside a running job (:data:`collscope.vocab.switches.SWITCHES`). Engine mpi: Open MPI's coll tuned
  algorithms are written through MPI_T and take effect on a new communicator, so the points of a sweep share
  one launch unless another knob (one read only at launch) differs. Engines torch and nccl-tests keep one
  launch per point (a persistent torch worker is not written yet; nccl-tests binaries run one configuration).
- **Running them**: :mod:`collscope.sweeps.worker_jobs` (jobs, the pool that keeps them between the rounds of
  an adaptive sweep, results, failures and relaunches). This module holds what is decided before anything
  runs: the groups, the worker's launch, the control lines and what ``--dry-run`` prints.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collscope.collectives.harness.mpit import ompi_cvar_name
from collscope.errors import ConfigError
from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import LaunchCommand
from collscope.sweeps.launchers import bench_argv, build_launch, rank_timeout_s
from collscope.sweeps.run_options import RunOptions, launch_options_for
from collscope.sweeps.spec import Plan, Point, SweepSpec
from collscope.vocab.engines import engine_row
from collscope.vocab.knobs import DYNAMIC_RULES
from collscope.vocab.switches import switch_of

__all__ = ["Group", "plan_groups", "worker_launch", "control_line", "dry_run_commands", "added_variables",
           "WORKER_MODULE"]

WORKER_MODULE = "collscope.collectives.harness.worker"


@dataclass(frozen=True, slots=True)
class Group:
    """Points that run in one launch (``persistent``), or one point that needs a launch of its own."""

    points: tuple[Point, ...]
    launch_settings: dict[str, str]
    """Variables the launch sets (beyond the spec's ``fixed_env``): the knobs read only at launch."""
    persistent: bool
    why: str
    """Why these points share a launch, or why this point has its own."""


def _launch_key(spec: SweepSpec, point: Point) -> dict[str, str]:
    """The point's settings that only a launch can set (dynamic rules ``1`` is what every worker launch has)."""
    out = {k: v for k, v in point.settings.items() if switch_of(k).kind != "mpi_t"}
    if out.get(DYNAMIC_RULES) == "1" and DYNAMIC_RULES not in spec.fixed_env:
        del out[DYNAMIC_RULES]
    return out


def plan_groups(spec: SweepSpec, points: tuple[Point, ...] | list[Point]) -> list[Group]:
    """Split ``points`` (in order) into launches: one per distinct set of launch-only settings for engine mpi,
    one per point otherwise."""
    row = engine_row(spec.engine, spec.backend)
    if not row.persistent:  # the engine table says why
        return [Group((p,), {}, False, row.persistent_note) for p in points]
    groups: dict[tuple[tuple[str, str], ...], list[Point]] = {}
    for point in points:
        groups.setdefault(tuple(sorted(_launch_key(spec, point).items())), []).append(point)
    out = []
    for key, members in groups.items():
        settings = dict(key)
        if DYNAMIC_RULES not in spec.fixed_env:
            settings.setdefault(DYNAMIC_RULES, "1")
        fixed = ", ".join(f"{k}={v}" for k, v in key) or "no launch-only setting"
        out.append(Group(tuple(members), settings, True, f"Open MPI algorithms switched through MPI_T; {fixed}"))
    return out


def added_variables(spec: SweepSpec, group: Group) -> list[str]:
    """Variables the worker launch sets beyond the spec's ``fixed_env``: the worker leaves them out of a point's
    environment unless the point sets them itself, so a point reads as its own launch would, whichever points
    the job serves (a pooled job also serves later rounds' points of the same launch settings)."""
    return sorted(k for k in group.launch_settings if k not in spec.fixed_env)


def worker_launch(spec: SweepSpec, group: Group, options: RunOptions, *, control: Path,
                  status: Path, idle_timeout_s: float | None = None) -> LaunchCommand:
    """The launch of a group's worker job: the per-point launcher's argv and environment, with the per-rank
    program ``collscope bench ...`` replaced by the worker (same mpirun/srun options, same ``-x`` forwarding).
    ``idle_timeout_s``: how long the worker waits for a control line (None: the worker's default)."""
    head = Point("persistent-worker", group.points[0].op, dict(group.launch_settings))
    timeout = rank_timeout_s(spec, options.launch)
    cmd = build_launch(options.launcher, spec, head, control.with_suffix(".unused"),
                       launch_options_for(spec, head, options))
    program = bench_argv(spec, head, control.with_suffix(".unused"), python=options.launch.python, timeout_s=timeout)
    n = len(program)
    if tuple(cmd.argv[-n:]) != tuple(program):
        raise ConfigError(f"launcher {options.launcher!r} with engine {spec.engine!r} does not end in the per-rank "
                          "program, so no persistent worker can replace it; use --workers per-point")
    worker = [options.launch.python, "-m", WORKER_MODULE, "--control", str(control), "--status", str(status),
              "--rank-timeout", f"{timeout:g}"]
    added = added_variables(spec, group)
    if added:
        worker += ["--added", ",".join(added)]
    if idle_timeout_s is not None:
        worker += ["--idle-timeout", f"{idle_timeout_s:g}"]
    return dataclasses.replace(cmd, argv=(*cmd.argv[:-n], *worker))


def control_line(spec: SweepSpec, point: Point, out: Path, added: list[str], *, timeout_s: float,
                 unset: tuple[str, ...] = ()) -> dict[str, Any]:
    """The worker's description of one point (see :mod:`collscope.collectives.harness.worker`); the user's value
    of an added variable comes back unless the sweep unsets it (``unset``, the inherited-environment audit)."""
    env = {**spec.fixed_env, **point.settings}
    env.update({k: os.environ[k] for k in added if k in os.environ and k not in env and k not in unset})
    cvars = {ompi_cvar_name(k): int(v) for k, v in point.settings.items() if switch_of(k).kind == "mpi_t"}
    bench = {"op": point.op, "min_bytes": spec.min_bytes, "max_bytes": spec.max_bytes, "factor": spec.factor,
             "sizes": None if point.sizes is None else list(point.sizes), "iters": spec.iters,
             "warmup": spec.warmup, "dtype": spec.dtype, "check": spec.check,
             "timeout_s": timeout_s}
    return {"point_id": point.point_id, "spec": bench, "cvars": cvars, "env": env, "out": str(out)}


def dry_run_commands(results: ResultsDir, plan: Plan, points: tuple[Point, ...], options: RunOptions) -> list[str]:
    """What ``--dry-run --workers persistent`` prints: per group its launch and its points."""
    out = []
    workers = results.root / "workers"
    for n, group in enumerate(plan_groups(plan.spec, points), 1):
        if not group.persistent:
            for point in group.points:
                per_point = dataclasses.replace(options, workers="per-point", dry_run=True)
                cmd = build_launch(options.launcher, plan.spec, point, results.partial_path(point.point_id),
                                   launch_options_for(plan.spec, point, per_point))
                out.append(f"# point {point.point_id} (own launch: {group.why})\n{cmd.display()}")
            continue
        cmd = worker_launch(plan.spec, group, options, control=workers / f"launch-{n}.control",
                            status=workers / f"launch-{n}.status")
        ids = "\n".join(f"#   {p.point_id}" for p in group.points)
        out.append(f"# persistent worker launch {n}: {len(group.points)} point(s) ({group.why})\n{ids}\n"
                   f"{cmd.display()}")
    out += [f"# skipped {s.op} {s.settings}: {s.reason}" for s in plan.skipped]
    return out
