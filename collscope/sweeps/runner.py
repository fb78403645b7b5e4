"""Run a planned sweep: one launch per point, a timeout per point, failures recorded, resumable.

Every launch goes through :func:`collscope.proc.run` with ``kill_on_parent_death`` (a killed sweep leaves no
process behind) and its output appended to the point's log. A point is done only when its records are
written (temp file + rename); rerunning the same command skips done points and redoes the rest. A point whose
records file is damaged (empty, undecodable, not a regular file) is not done: the rerun moves the file aside
(``<id>.jsonl.damaged-<time>``, never deleted), says so, and measures the point again.

Before the first point, :func:`check_tools` makes sure the launcher and the engine's programs exist here (mpirun
or srun, the nccl-tests binary of every op, the Python of ``collscope bench``): a missing one stops the sweep with
the cause and the fix, and nothing is written down as a failure. A point whose last failure says nothing about it
(:func:`~collscope.sweeps.attempt.resumed_failure`: cancelled by SIGTERM, a launch error, a node lost under it) is
run again by a resume without ``--retry-failed``. When a point times out (no node lost), the configuration hangs:
its other repeats of this run are written down as skipped (reason ``configuration hung``, naming the repeat that
hung) instead of costing one timeout each; ``--retry-failed`` runs them (and skips nothing).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collscope.errors import ConfigError, ToolMissingError
from collscope.results.points import move_aside
from collscope.results.store import ResultsDir
from collscope.sweeps.attempt import PointOutcome, collect_records, conclude_attempt, resumed_failure, run_point
from collscope.sweeps.environment import MPIRUN_HINT
from collscope.sweeps.hung import HungConfigurations
from collscope.sweeps.launchers import build_launch
from collscope.sweeps.run_options import LauncherKind, RunOptions, Workers, launch_options_for, timed_launch
from collscope.sweeps.slurm_shape import step_misfit
from collscope.sweeps.spec import Plan, Point, SweepSpec
from collscope.sweeps.termination import SweepTerminated, on_sigterm
from collscope.sweeps.verification import SettingsCheck, verify_settings
from collscope.vocab.engines import engine_row

if TYPE_CHECKING:
    from collscope.sweeps.worker_jobs import WorkerPool

__all__ = ["RunOptions", "SweepOutcome", "PointOutcome", "SettingsCheck", "Workers", "LauncherKind", "run_sweep",
           "select_shard", "verify_settings", "conclude_attempt", "collect_records", "progress_line", "run_point",
           "check_tools"]

_TOOL_HINTS = {"mpirun": MPIRUN_HINT, "mpiexec": MPIRUN_HINT,
               "srun": "srun comes with Slurm: run the sweep on a node of the allocation (sbatch slurm/sweep.sh, "
                       "salloc) where Slurm's commands are on PATH"}


@dataclass
class SweepOutcome:
    sweep_id: str
    out_dir: Path
    outcomes: list[PointOutcome] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    """Dry run: the exact commands that would run."""

    @property
    def failed(self) -> list[PointOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


def select_shard(points: tuple[Point, ...], shard: tuple[int, int] | None) -> tuple[Point, ...]:
    """The points of shard ``(i, n)``: every configuration's repeats i, i+n, i+2n, ... (plan order kept).

    Shards split a plan by repeat, never by configuration: each shard measures every configuration, so shards
    placed on different nodes (the tasks of a job array) still compare every configuration with the others on
    the same nodes, and a slow node slows every configuration alike instead of one (an index modulo n put each
    configuration of a plan with as many configurations as shards on one shard). A plan with fewer repeats
    than shards is refused: some shards would have nothing to run, or a configuration would go missing from
    them."""
    if shard is None:
        return points
    index, count = shard
    if count < 1 or not 0 <= index < count:
        raise ConfigError(f"--shard {index}/{count}: expected I/N with 0 <= I < N")
    repeats = len({p.repeat for p in points})
    if points and count > repeats:
        raise ConfigError(f"--shard {index}/{count}: shards split a sweep by repeat (each shard measures every "
                          f"configuration), and this plan has {repeats} repeat(s); valid: at most {repeats} "
                          f"shard(s) (--array=0-{repeats - 1}), or --repeats {count} or more")
    return tuple(p for p in points if p.repeat % count == index)


def run_sweep(plan: Plan, out_dir: Path, options: RunOptions, *, meta: dict[str, Any] | None = None,
              echo: Callable[[str], None] = print, pool: WorkerPool | None = None) -> SweepOutcome:
    """Run (or with ``dry_run`` print) every pending point of ``plan`` into ``out_dir``.

    ``pool`` (``workers="persistent"`` only): worker jobs kept alive across calls, so that successive plans into
    the same directory (the rounds of an adaptive sweep) share a launch; its owner ends them."""
    results = ResultsDir(Path(out_dir))
    outcome = SweepOutcome(plan.sweep_id, results.root)
    points = select_shard(plan.points, options.shard)
    if options.dry_run and options.workers == "persistent":
        from collscope.sweeps.persistent import dry_run_commands

        outcome.commands.extend(dry_run_commands(results, plan, points, options))
        return outcome
    if options.dry_run:
        for point in points:
            spec, timed, unset = timed_launch(plan.spec, point, options)
            cmd = build_launch(options.launcher, spec, timed, results.partial_path(point.point_id),
                               launch_options_for(spec, timed, options, without=unset))
            gone = [n for n in unset if n in os.environ]
            without = f"# without the inherited {', '.join(gone)} (unset for this run)\n" if gone else ""
            outcome.commands.append(f"# point {point.point_id}\n{without}{cmd.display()}")
        for skipped in plan.skipped:
            outcome.commands.append(f"# skipped {skipped.op} {skipped.settings}: {skipped.reason}")
        return outcome
    with results.lock(options.shard):  # one writer per directory (shards of one split side by side)
        return _run_locked(plan, results, outcome, points, options, meta=meta, echo=echo, pool=pool)


def _run_locked(plan: Plan, results: ResultsDir, outcome: SweepOutcome, points: tuple[Point, ...],
                options: RunOptions, *, meta: dict[str, Any] | None, echo: Callable[[str], None],
                pool: WorkerPool | None) -> SweepOutcome:
    results.prepare(plan.sweep_id, plan.spec.recorded_dict(), plan.to_dict(), meta or {})
    failures = results.failures()
    files = {p.point_id: results.point_file(p.point_id) for p in points}
    states = {pid: f.state for pid, f in files.items()}
    for pid, found in files.items():
        if found.state == "damaged":  # measured again, after its file is moved aside (never deleted)
            echo(f"point {pid}: damaged ({found.problem}); moved aside to {results.move_aside(pid).name}, "
                 "running it again")
    todo = [p for p in points if states[p.point_id] != "done"
            and (options.retry_failed or p.point_id not in failures or states[p.point_id] == "damaged"
                 or resumed_failure(failures[p.point_id].reason, failures[p.point_id].detail or ""))]
    check_tools(plan, todo, options)
    for p in todo:
        log_path = results.log_path(p.point_id)
        if os.path.lexists(log_path) and not log_path.is_file():  # a FIFO would block the append below
            echo(f"point {p.point_id}: {log_path.name} is not a regular file; moved aside to "
                 f"{move_aside(log_path).name}, a new log is started")
    for p in points:
        if p not in todo:
            outcome.outcomes.append(PointOutcome(p.point_id, "skipped", "done" if states[p.point_id] == "done"
                                                 else "failed before (use --retry-failed)"))
    bar = _progress(len(points), len(points) - len(todo), plan.sweep_id, options.progress)
    started = time.monotonic()
    finished = 0

    def report(point: Point, result: PointOutcome, point_s: float) -> None:
        nonlocal finished
        finished += 1
        outcome.outcomes.append(result)
        if bar is not None:
            bar.set_postfix_str(f"{point.point_id[:32]} {result.status}", refresh=False)
            bar.update(1)
        else:  # no terminal (a Slurm .out file): one line per finished point
            echo(progress_line(finished, len(todo), point.point_id, result, point_s, time.monotonic() - started))

    hung = HungConfigurations(results, retry_failed=options.retry_failed)
    previous = on_sigterm()
    try:
        if options.workers == "persistent":
            from collscope.sweeps.worker_jobs import run_persistent

            run_persistent(results, plan, todo, options, report=report, echo=echo, pool=pool, hung=hung)
        else:
            for point in todo:
                skipped = hung.skip(point)
                if skipped is not None:
                    report(point, skipped, 0.0)
                    continue
                point_start = time.monotonic()
                try:
                    result = run_point(results, plan, point, options)
                except SweepTerminated as exc:
                    echo(f"point {point.point_id}: cancelled ({exc.detail})")
                    raise
                hung.saw(point, result)
                report(point, result, time.monotonic() - point_start)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if bar is not None:
            bar.close()
    return outcome


def check_tools(plan: Plan, points: Sequence[Point], options: RunOptions) -> None:
    """Before the first point: the launcher and the engine's programs of every op of ``points`` exist here (mpirun
    or srun, each op's nccl-tests binary, the Python that runs ``collscope bench``). ConfigError with the cause and
    the fix otherwise: a missing tool fails every point alike, so no point is written down as failed. Under srun
    inside an allocation, the allocation's shape must hold the sweep's steps
    (:func:`~collscope.sweeps.slurm_shape.step_misfit`): srun would refuse every point the same way."""
    if options.launcher == "srun" and points:
        _check_allocation(plan.spec, options)
    seen: set[str] = set()
    path = os.environ.get("PATH", os.defpath)
    for point in points:
        if point.op in seen:
            continue
        seen.add(point.op)
        spec, timed, unset = timed_launch(plan.spec, point, options)
        try:
            launch = launch_options_for(spec, timed, options, without=unset)
        except ToolMissingError as exc:
            raise ConfigError(f"{exc}; checked before the first point: nothing was run or recorded") from exc
        try:
            cmd = build_launch(options.launcher, spec, timed, "-", launch)
        except ConfigError:
            continue  # a combination that cannot run is that point's launch error, written down when it runs
        programs = [cmd.argv[0]] + ([launch.python] if engine_row(spec.engine).program == "bench" else [])
        for program in dict.fromkeys(programs):
            found = (os.path.isfile(program) and os.access(program, os.X_OK)) if os.sep in program \
                else shutil.which(program, path=path) is not None
            if not found:
                name = os.path.basename(program)
                hint = _TOOL_HINTS.get(name, "install it, or give its path" if os.sep not in program else
                                       "the path does not exist here (a shared file system on every node?)")
                where = "PATH" if os.sep not in program else program
                raise ConfigError(f"{name} not found ({where}), needed to launch point {point.point_id} "
                                  f"({options.launcher} launcher, engine {spec.engine}): {hint}; checked before the "
                                  "first point: nothing was run or recorded")


def _check_allocation(spec: SweepSpec, options: RunOptions) -> None:
    """ConfigError naming the allocation's shape and the fix when srun cannot start the sweep's steps in it."""
    launch = options.launch
    cpus_per_task = (launch.cpus_per_task or 1) if launch.gpus_per_node else 1
    overcommit = any(a in ("--overcommit", "-O") for a in launch.extra_args)
    misfit = step_misfit(spec.nranks, spec.nnodes, os.environ, cpus_per_task=cpus_per_task, overcommit=overcommit)
    if misfit is not None:
        raise ConfigError(f"{misfit}; checked before the first point: nothing was run or recorded")


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def progress_line(done: int, total: int, point_id: str, result: PointOutcome, point_s: float,
                  elapsed_s: float) -> str:
    """``[3/21] point all-reduce-...: ok in 1.6s; elapsed 5s, ETA 29s`` (ETA from the mean time per point)."""
    status = result.status if result.status != "failed" else f"FAILED {result.reason} ({result.detail})"
    eta = elapsed_s / done * (total - done) if done else 0.0
    return (f"[{done}/{total}] point {point_id}: {status} in {point_s:.1f}s; elapsed {_duration(elapsed_s)}, "
            f"ETA {_duration(eta)}")


def _progress(total: int, initial: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=desc[:24], unit="point", file=sys.stderr, dynamic_ncols=True)


