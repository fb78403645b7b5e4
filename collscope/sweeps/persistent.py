"""Persistent workers (``--workers persistent``): ranks launched once per group of points, point after point.

A point launched on its own pays mpirun's start, Python and collscope's imports on every rank, MPI_Init and
teardown (about 1.6 s on a 2-core machine) for collectives that take milliseconds. Here the runner starts the
worker job (:mod:`collscope.collectives.harness.worker`) once per *group* and feeds it the group's points:

- **Groups** (:func:`plan_groups`): points share a launch when every setting that differs between them can be
  switched inside a running job (:data:`collscope.vocab.knobs.SWITCHES`). Engine mpi: Open MPI's coll tuned
  algorithms are written through MPI_T and take effect on a new communicator, so the points of a sweep share
  one launch unless another knob (one read only at launch) differs. Engines torch and nccl-tests keep one
  launch per point (a persistent torch worker is not written yet; nccl-tests binaries run one configuration).
- **Same results**: each point's records go to ``points/<id>.partial.jsonl`` and become ``points/<id>.jsonl``
  through :func:`collscope.sweeps.runner.conclude_attempt`, the same code as a per-point launch (temp file +
  rename, failures with the log tail, wrong values, resume). ``points/<id>.log`` gets the attempt header and
  the part of the worker job's output written while the point ran.
- **Failures**: a point running past ``timeout_s`` (counted from its start; the first point's includes the
  launch), or a worker job that exits or crashes mid-point (a rank killed with -9), ends the whole job
  (process group killed with :mod:`collscope.proc`); that point is recorded as failed and a new job is launched
  for the points after it. The ranks' own watchdog (90 % of ``timeout_s``) aborts a hung point first and says
  so (``expired``), which is recorded as a timeout.

Control and status files live in ``DIR/workers/`` while a job runs; a job's output file is kept there only
when the job ended badly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collscope import proc
from collscope.collectives.harness.mpit import ompi_cvar_name
from collscope.errors import CollscopeError, ConfigError
from collscope.results.points import move_aside
from collscope.results.store import ResultsDir
from collscope.sweeps.attempt import (
    PointOutcome,
    RunOptions,
    collect_records,
    conclude_attempt,
    launch_options_for,
    run_point,
)
from collscope.sweeps.launchers import LaunchCommand, bench_argv, build_launch, rank_timeout_s
from collscope.sweeps.spec import Plan, Point, SweepSpec
from collscope.vocab.knobs import DYNAMIC_RULES, switch_of

__all__ = ["Group", "plan_groups", "worker_launch", "control_line", "run_persistent", "dry_run_commands",
           "WORKER_MODULE"]

WORKER_MODULE = "collscope.collectives.harness.worker"
_POLL_S = 0.1
"""How often the runner looks at the status file. Seldom on purpose: the worker never waits for the runner (the
control file holds every point from the start), and a runner that wakes often takes CPU from ranks that poll."""
Report = Callable[[Point, PointOutcome, float], None]


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
    if spec.engine != "mpi":
        why = ("nccl-tests runs one configuration per launch" if spec.engine == "nccl-tests" else
               "engine torch: no persistent torch worker yet (NCCL_ALGO/NCCL_PROTO are per communicator, but "
               "the other NCCL variables are read once per process)")
        return [Group((p,), {}, False, why) for p in points]
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


def _added(spec: SweepSpec, group: Group) -> list[str]:
    """Variables the worker launch sets that a per-point launch of every member would not all set."""
    return sorted(k for k in group.launch_settings if k not in spec.fixed_env
                  and any(p.settings.get(k) != group.launch_settings[k] for p in group.points))


def worker_launch(spec: SweepSpec, group: Group, options: RunOptions, *, control: Path,
                  status: Path) -> LaunchCommand:
    """The launch of a group's worker job: the per-point launcher's argv and environment, with the per-rank
    program ``collscope bench ...`` replaced by the worker (same mpirun/srun options, same ``-x`` forwarding)."""
    head = Point("persistent-worker", group.points[0].op, dict(group.launch_settings))
    timeout = rank_timeout_s(spec, options.launch)
    cmd = build_launch(options.launcher, spec, head, control.with_suffix(".unused"), options.launch)
    program = bench_argv(spec, head, control.with_suffix(".unused"), python=options.launch.python, timeout_s=timeout)
    n = len(program)
    if tuple(cmd.argv[-n:]) != tuple(program):
        raise ConfigError(f"launcher {options.launcher!r} with engine {spec.engine!r} does not end in the per-rank "
                          "program, so no persistent worker can replace it; use --workers per-point")
    worker = [options.launch.python, "-m", WORKER_MODULE, "--control", str(control), "--status", str(status),
              "--rank-timeout", f"{timeout:g}"]
    added = _added(spec, group)
    if added:
        worker += ["--added", ",".join(added)]
    return dataclasses.replace(cmd, argv=(*cmd.argv[:-n], *worker))


def control_line(spec: SweepSpec, point: Point, out: Path, added: list[str], *, timeout_s: float) -> dict[str, Any]:
    """The worker's description of one point (see :mod:`collscope.collectives.harness.worker`)."""
    env = {**spec.fixed_env, **point.settings}
    env.update({k: os.environ[k] for k in added if k in os.environ and k not in env})
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


def run_persistent(results: ResultsDir, plan: Plan, todo: list[Point], options: RunOptions, *, report: Report,
                   echo: Callable[[str], None] = print) -> None:
    """Run ``todo`` with persistent workers; ``report`` is told each point's outcome as it ends."""
    for group in plan_groups(plan.spec, todo):
        if not group.persistent:
            for point in group.points:
                start = time.monotonic()
                report(point, run_point(results, plan, point, options), time.monotonic() - start)
            continue
        remaining = list(group.points)
        while remaining:
            remaining = _Launch(results, plan, group, remaining, options, report, echo).run()


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%S")


class _Launch:
    """One worker job over ``points``; :meth:`run` returns the points it did not get to."""

    def __init__(self, results: ResultsDir, plan: Plan, group: Group, points: list[Point], options: RunOptions,
                 report: Report, echo: Callable[[str], None]) -> None:
        self.results, self.plan, self.group, self.points = results, plan, group, points
        self.options, self.report, self.echo = options, report, echo
        self.spec = plan.spec
        workers = results.root / "workers"
        workers.mkdir(exist_ok=True)
        stem = f"launch-{_stamp()}-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
        self.control, self.status = workers / f"{stem}.control", workers / f"{stem}.status"
        self.output = workers / f"{stem}.log"

    def run(self) -> list[Point]:
        spec = self.spec
        added = _added(spec, self.group)
        lines = []
        for point in self.points:
            partial = self.results.partial_path(point.point_id)
            if os.path.lexists(partial):  # an earlier attempt's records are kept, never counted
                move_aside(partial, "attempt")
            lines.append(json.dumps(control_line(spec, point, partial.resolve(), added,
                                                   timeout_s=rank_timeout_s(spec, self.options.launch))))
        lines.append(json.dumps({"end": True}))
        self.control.write_text("\n".join(lines) + "\n")
        self.status.touch()
        first = self.points[0]
        try:
            cmd = worker_launch(spec, self.group, self.options, control=self.control.resolve(),
                                status=self.status.resolve())
            job = proc.start(list(cmd.argv), output_path=self.output, extra_env=cmd.env)
        except CollscopeError as exc:
            self.results.record_failure(first.point_id, "launch error", str(exc))
            self.report(first, PointOutcome(first.point_id, "failed", "launch error", str(exc)), 0.0)
            self._cleanup(keep_output=True)
            return self.points[1:]
        self.display = cmd.display()
        try:
            return self._watch(job)
        finally:
            if job.poll() is None:
                job.kill_group()

    def _header(self, point: Point, index: int) -> int:
        log_path = self.results.log_path(point.point_id)
        with log_path.open("a") as fh:
            fh.write(f"\n=== collscope attempt {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n{self.display}\n"
                     f"# persistent worker job {self.output.name}, point {index + 1} of {len(self.points)}\n===\n")
        return self._output_size()

    def _output_size(self) -> int:
        try:
            return self.output.stat().st_size
        except FileNotFoundError:
            return 0

    def _segment(self, start: int) -> str:
        with self.output.open("rb") as fh:
            fh.seek(start)
            return fh.read().decode("utf-8", "replace")

    def _watch(self, job: proc.Started) -> list[Point]:
        spec = self.spec
        index = 0
        point_start = job.started_at
        offset = self._header(self.points[0], 0)
        expired = drained = False
        status_fh = self.status.open("rb")
        pending = b""
        try:
            while index < len(self.points):
                point = self.points[index]
                chunk = status_fh.read()
                if chunk:
                    pending += chunk
                    *whole, pending = pending.split(b"\n")
                    for raw in whole:
                        event = json.loads(raw)
                        kind, pid = event.get("event"), event.get("point_id")
                        if kind in ("start", "ready", "end") or pid != point.point_id:
                            if kind == "start" and pid == point.point_id and index > 0:
                                point_start = time.monotonic()
                            continue
                        if kind == "expired":
                            expired = True
                            continue
                        text = self._segment(offset)
                        self._append_log(point, text)
                        duration = time.monotonic() - point_start
                        if kind == "error":
                            message = str(event.get("message"))
                            self._append_log(point, f"error: {message}\n")
                            result = conclude_attempt(self.results, self.plan, point, [], None,
                                                      ("exit code", f"the worker refused the point: {message}"),
                                                      text, duration)
                        else:
                            records, problem = collect_records(spec, point, self.results.partial_path(
                                point.point_id), text, self.results.log_path(point.point_id))
                            result = conclude_attempt(self.results, self.plan, point, records, problem, None, text,
                                                      duration)
                        self.report(point, result, duration)
                        index += 1
                        if index < len(self.points):
                            point = self.points[index]
                            offset = self._header(point, index)
                            point_start = time.monotonic()
                    continue
                code = job.poll()
                if code is not None and not drained:  # read the status file once more: its last events
                    drained = True
                    continue
                timed_out = time.monotonic() - point_start > spec.timeout_s
                if code is None and not timed_out:
                    time.sleep(_POLL_S)
                    continue
                if code is None:
                    code = job.kill_group()
                else:
                    job.wait(5)
                self._fail(point, code, timed_out or expired, offset, time.monotonic() - point_start, expired)
                self._cleanup(keep_output=True)
                return self.points[index + 1:]
        finally:
            status_fh.close()
        code = job.wait(max(10.0, spec.timeout_s))
        if code is None:
            job.kill_group()
        self._cleanup(keep_output=code != 0)
        return []

    def _append_log(self, point: Point, text: str) -> None:
        with self.results.log_path(point.point_id).open("a") as fh:
            fh.write(text)

    def _fail(self, point: Point, code: int | None, timed_out: bool, offset: int, duration: float,
              by_ranks: bool) -> None:
        spec = self.spec
        text = self._segment(offset)
        self._append_log(point, text)
        if timed_out:
            who = f"the ranks' watchdog after {rank_timeout_s(spec, self.options.launch):g} s" if by_ranks else \
                "the worker job was killed"
            failure = ("timeout", f"timeout after {spec.timeout_s:g} s ({who}; persistent worker)")
        else:
            failure = ("exit code", f"exit code {code} (persistent worker job ended during this point)")
        records, _ = collect_records(spec, point, self.results.partial_path(point.point_id), text,
                                     self.results.log_path(point.point_id))
        result = conclude_attempt(self.results, self.plan, point, records, None, failure, text, duration)
        self.report(point, result, duration)
        left = len(self.points) - self.points.index(point) - 1
        if left:
            self.echo(f"persistent worker job ended ({failure[1]}); launching a new one for {left} point(s)")

    def _cleanup(self, *, keep_output: bool) -> None:
        for path in (self.control, self.status):
            path.unlink(missing_ok=True)
        if not keep_output:
            self.output.unlink(missing_ok=True)
            try:  # leave no empty workers/ directory behind
                self.output.parent.rmdir()
            except OSError:
                pass
