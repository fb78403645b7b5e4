"""Persistent worker jobs at run time: start one, feed it points, watch them end, end it (``--workers persistent``).

:func:`run_persistent` runs a sweep's pending points group by group (:func:`~collscope.sweeps.persistent.
plan_groups`). A :class:`WorkerJob` is one launch of the worker (:mod:`collscope.collectives.harness.worker`):
:meth:`WorkerJob.feed` appends points to its control file and watches the status file until each has ended;
the job stays alive for the next feed until :meth:`WorkerJob.finish` appends the ``end`` line. A
:class:`WorkerPool` keeps the live jobs between calls, one per set of launch settings, so that the rounds of an
adaptive sweep (:mod:`collscope.sweeps.adaptive.run`) share one launch instead of paying one each; without a
pool every call ends its jobs before it returns.

- **Same results**: each point's records go to ``points/<id>.partial.jsonl`` and become ``points/<id>.jsonl``
  through :func:`~collscope.sweeps.attempt.conclude_attempt`, the same code as a per-point launch (temp file +
  rename, failures with the log tail, wrong values, resume). ``points/<id>.log`` gets the attempt header and
  the part of the job's output written while the point ran.
- **Failures**: a point running past ``timeout_s`` (counted from the moment it was fed, or from the launch for a
  job's first point), or a job that exits or crashes mid-point (a rank killed with -9), ends the whole job
  (process group killed with :mod:`collscope.proc`); that point is recorded as failed and a new job is launched
  for the points after it (and kept in the pool for later feeds). The ranks' own watchdog (90 % of
  ``timeout_s``) aborts a hung point first and says so (``expired``), which is recorded as a timeout. A pooled
  job found dead before a feed (it waited longer than its idle timeout, or died between rounds) is ended and
  replaced; no point was running, so none fails. A job that dies of a launcher error
  (:func:`~collscope.sweeps.diagnose.launcher_failure`) within seconds of its start, before its first point
  measured anything, is started once more before that point counts (as a per-point launch is); after a point
  timed out, the other repeats of its configuration are written down as skipped (:mod:`collscope.sweeps.hung`).

Control and status files live in ``DIR/workers/`` while a job runs; a job's output file is kept there only
when the job ended badly.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from types import TracebackType

from collscope import proc
from collscope.errors import CollscopeError
from collscope.results.points import move_aside
from collscope.results.store import ResultsDir
from collscope.sweeps import attempt
from collscope.sweeps.attempt import PointOutcome, collect_records, conclude_attempt, record_cancelled, run_point
from collscope.sweeps.diagnose import launch_diagnosis, launcher_failure
from collscope.sweeps.hung import HungConfigurations
from collscope.sweeps.launchers import rank_timeout_s
from collscope.sweeps.persistent import Group, added_variables, control_line, plan_groups, worker_launch
from collscope.sweeps.run_options import RunOptions, launch_environment
from collscope.sweeps.spec import Plan, Point, SweepSpec
from collscope.sweeps.termination import SweepTerminated
from collscope.sweeps.worker_files import WorkerFiles

__all__ = ["WorkerJob", "WorkerPool", "run_persistent", "POOLED_IDLE_TIMEOUT_S"]

_POLL_S = 0.1
"""How often the runner looks at the status file. Seldom on purpose: the worker never waits for the runner (the
control file holds every point of a feed from the start), and a runner that wakes often takes CPU from ranks
that poll."""
POOLED_IDLE_TIMEOUT_S = 600.0
"""How long a pooled job's rank 0 waits for the next control line (the runner plans the next round meanwhile);
a job whose runner is killed is ended by :mod:`collscope._reaper` long before."""
Report = Callable[[Point, PointOutcome, float], None]


def run_persistent(results: ResultsDir, plan: Plan, todo: list[Point], options: RunOptions, *, report: Report,
                   echo: Callable[[str], None] = print, pool: WorkerPool | None = None,
                   hung: HungConfigurations | None = None) -> None:
    """Run ``todo`` with persistent workers; ``report`` is told each point's outcome as it ends. With ``pool``
    the jobs stay alive for the pool's next call (the pool's owner ends them); without, they end here. ``hung``:
    the run's configurations that timed out, whose other repeats are skipped (one made here without)."""
    own = pool is None
    pool = WorkerPool(keep_alive=False) if pool is None else pool
    hung = HungConfigurations(results, retry_failed=options.retry_failed) if hung is None else hung

    def seen(point: Point, result: PointOutcome, point_s: float) -> None:
        hung.saw(point, result)
        report(point, result, point_s)

    try:
        for group in plan_groups(plan.spec, todo):
            if not group.persistent:
                for point in group.points:
                    skipped = hung.skip(point)
                    if skipped is not None:
                        report(point, skipped, 0.0)
                        continue
                    start = time.monotonic()
                    seen(point, run_point(results, plan, point, options), time.monotonic() - start)
                continue
            pool.run(results, plan, group, list(group.points), options, seen, echo, hung=hung)
    finally:
        if own:
            pool.close()


def _key(spec: SweepSpec, group: Group, options: RunOptions, results: ResultsDir) -> str:
    """What a job's launch depends on: a job serves a later feed only when all of it is the same."""
    return json.dumps([str(results.root.resolve()), spec.to_dict(), sorted(group.launch_settings.items()),
                       repr(options.launch), options.launcher], sort_keys=True, default=str)


class WorkerPool:
    """Live worker jobs between calls of :func:`run_persistent`, one per launch key; :meth:`close` ends them.

    ``keep_alive=False`` (what :func:`run_persistent` makes for itself): every job gets its ``end`` line with
    its points and ends after the last. Use as a context manager (``with WorkerPool() as pool: ...``) so that
    the jobs end whatever happens."""

    def __init__(self, *, keep_alive: bool = True) -> None:
        self.keep_alive = keep_alive
        self._jobs: dict[str, WorkerJob] = {}
        self.launches = 0
        """Jobs started through this pool (a relaunch after a failure counts)."""

    def run(self, results: ResultsDir, plan: Plan, group: Group, points: list[Point], options: RunOptions,
            report: Report, echo: Callable[[str], None], *, hung: HungConfigurations | None = None) -> None:
        """Run ``points`` (one group) on the group's live job, launching one when there is none or it died.
        ``hung``: the points of a configuration that timed out are written down as skipped, not fed again; a job
        that died of a launcher error within seconds of its start is started once more before its point counts."""
        key = _key(plan.spec, group, options, results)
        remaining = points
        after_quick: str | None = None
        while remaining:
            if hung is not None:
                remaining = hung.unhung(remaining, report)
                if not remaining:
                    break
            job = self._jobs.get(key)
            if job is not None and not job.alive():
                job.finish()
                job = None
            if job is None:
                job = WorkerJob(results, plan.spec, group, options, echo,
                                idle_timeout_s=POOLED_IDLE_TIMEOUT_S if self.keep_alive else None,
                                after_quick_failure=after_quick)
                self._jobs[key] = job
                self.launches += 1
            remaining = job.feed(plan, remaining, report)
            after_quick = job.quick_failure
            if not job.alive():
                del self._jobs[key]
                job.finish()

    def close(self) -> None:
        """End every live job (an ``end`` line, then the wait for its exit)."""
        jobs, self._jobs = list(self._jobs.values()), {}
        for job in jobs:
            job.finish()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class WorkerJob:
    """One launch of the worker job; :meth:`feed` runs points on it, :meth:`finish` ends it."""

    def __init__(self, results: ResultsDir, spec: SweepSpec, group: Group, options: RunOptions,
                 echo: Callable[[str], None], *, idle_timeout_s: float | None = None,
                 after_quick_failure: str | None = None) -> None:
        self.results, self.spec, self.group, self.options, self.echo = results, spec, group, options, echo
        self.idle_timeout_s = idle_timeout_s
        self.after_quick_failure = after_quick_failure
        """This job is the second start after a launcher error (these words) within seconds: no third start."""
        self.quick_failure: str | None = None
        """The launcher error this job died of within seconds of its start, before any point was measured: its
        point is not written down, and the next job (the only other start) runs it."""
        self.files = WorkerFiles(results.root / "workers")
        self.control, self.status, self.output = self.files.control, self.files.status, self.files.output
        self.job: proc.Started | None = None
        self.failed = False
        """The job ended badly (a point failed with it, or it could not start): its output is kept."""
        self.fed = 0
        self.display = ""
        self._pending = b""
        self._expired = False
        self._watching: tuple[Point, int, float] | None = None
        """The point being watched, where its output starts in the job's log, and when it started."""

    def _record_cancelled(self, exc: SweepTerminated, point: Point, offset: int, started: float) -> None:
        text = self._segment(offset)
        self._append_log(point, text)
        record_cancelled(self.results, point.point_id, exc, text, self.options.launcher, time.monotonic() - started)
        self.echo(f"point {point.point_id}: cancelled ({exc.detail})")

    def alive(self) -> bool:
        return not self.failed and (self.job is None or self.job.poll() is None)

    def _append_control(self, lines: list[str]) -> None:
        self.files.append_control(lines)

    def _control_lines(self, points: list[Point]) -> list[str]:
        added = added_variables(self.spec, self.group)
        lines = []
        for point in points:
            partial = self.results.partial_path(point.point_id)
            if os.path.lexists(partial):  # an earlier attempt's records are kept, never counted
                move_aside(partial, "attempt")
            lines.append(json.dumps(control_line(self.spec, point, partial.resolve(), added,
                                                 timeout_s=rank_timeout_s(self.spec, self.options.launch),
                                                 unset=self.options.unset_env)))
        return lines

    def _start(self, plan: Plan, first: Point, report: Report) -> bool:
        try:
            cmd = worker_launch(self.spec, self.group, self.options, control=self.control.resolve(),
                                status=self.status.resolve(), idle_timeout_s=self.idle_timeout_s)
            self.job = proc.start(list(cmd.argv), output_path=self.files.log.output_path, extra_env=cmd.env,
                                  env=launch_environment(self.options.unset_env))
        except CollscopeError as exc:
            self.results.record_failure(first.point_id, "launch error", str(exc))
            report(first, PointOutcome(first.point_id, "failed", "launch error", str(exc)), 0.0)
            self.failed = True
            return False
        self.display = cmd.display()
        return True

    def feed(self, plan: Plan, points: list[Point], report: Report) -> list[Point]:
        """Run ``points`` on this job (starting it on the first feed); the points it did not get to when the job
        ended during one of them (that one is recorded as failed). Without a pool (``idle_timeout_s`` None) the
        ``end`` line goes with the points and the job ends after the last."""
        lines = self._control_lines(points)
        if self.idle_timeout_s is None:
            lines.append(json.dumps({"end": True}))
        self._append_control(lines)
        if self.job is None and not self._start(plan, points[0], report):
            return points[1:]
        assert self.job is not None
        try:
            left = self._watch(plan, points, report, first_of_job=self.fed == 0)
        except BaseException as exc:
            if isinstance(exc, SweepTerminated) and self._watching is not None:
                self._record_cancelled(exc, *self._watching)  # as one launch per point does
            self.job.kill_group()
            self.failed = True
            raise
        if left is not None:
            return left
        return []

    def finish(self) -> None:
        """End the job: the ``end`` line (if it was never sent), the wait for its exit, then the cleanup."""
        if self.job is not None and self.job.poll() is None:
            if self.idle_timeout_s is not None and not self.failed:
                self._append_control([json.dumps({"end": True})])
            code = self.job.wait(max(10.0, self.spec.timeout_s))
            if code is None:
                self.job.kill_group()
            self.failed = self.failed or code != 0
        elif self.job is not None:
            self.failed = self.failed or self.job.wait(5) != 0
        self.files.close(keep_output=self.failed)  # no empty workers/ directory is left behind

    # ---- watching one feed -------------------------------------------------------------------------
    def _header(self, point: Point) -> int:
        self.fed += 1
        self.results.append_log(point.point_id, f"\n=== collscope attempt {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n"
                                f"{self.display}\n# persistent worker job {self.output.name}, point {self.fed} of "
                                "the job\n===\n")
        return self.files.log.size()

    def _segment(self, start: int) -> str:
        return self.files.log.read_from(start)

    def _append_log(self, point: Point, text: str) -> None:
        self.results.append_log(point.point_id, text)

    def _events(self) -> list[dict[str, object]]:
        chunk = self.files.read_status()
        if not chunk:
            return []
        self._pending += chunk
        *whole, self._pending = self._pending.split(b"\n")
        return [json.loads(raw) for raw in whole if raw.strip()]

    def _watch(self, plan: Plan, points: list[Point], report: Report, *, first_of_job: bool) -> list[Point] | None:
        """Conclude each point of the feed as its status arrives; None when all ended, else the points left."""
        assert self.job is not None
        job, spec = self.job, self.spec
        index = 0
        point_start = job.started_at if first_of_job else time.monotonic()
        offset = self._header(points[0])
        self._watching = (points[0], offset, point_start)
        drained = False
        while index < len(points):
            point = points[index]
            events = self._events()
            if events:
                for event in events:
                    kind, pid = event.get("event"), event.get("point_id")
                    if kind == "expired":
                        self._expired = True
                        continue
                    if kind not in ("done", "error") or pid != point.point_id:
                        continue
                    text = self._segment(offset)
                    self._append_log(point, text)
                    duration = time.monotonic() - point_start
                    if kind == "error":
                        message = str(event.get("message"))
                        self._append_log(point, f"error: {message}\n")
                        result = conclude_attempt(self.results, plan, point, [], None,
                                                  ("exit code", f"the worker refused the point: {message}"), text,
                                                  duration)
                    else:
                        records, problem = collect_records(spec, point, self.results.partial_path(point.point_id),
                                                           text, self.results.log_path(point.point_id))
                        result = conclude_attempt(self.results, plan, point, records, problem, None, text, duration)
                    report(point, result, duration)
                    index += 1
                    if index == len(points):
                        break
                    point = points[index]
                    offset = self._header(point)
                    point_start = time.monotonic()
                    self._watching = (point, offset, point_start)
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
            self.failed = True
            if not timed_out and self._quick_failure(point, offset):
                return points[index:]
            self._fail(plan, point, code, timed_out or self._expired, offset, time.monotonic() - point_start,
                       report, left=len(points) - index - 1)
            return points[index + 1:]
        return None

    def _quick_failure(self, point: Point, offset: int) -> bool:
        """Whether the job died of a launcher error within :data:`~collscope.sweeps.attempt.QUICK_LAUNCH_FAILURE_S`
        of its start during its first point, nothing measured, and is the first start (then the log says so and
        the point is left for the next start, as :func:`~collscope.sweeps.attempt.run_point` does)."""
        assert self.job is not None
        since_start = time.monotonic() - self.job.started_at
        partial = self.results.partial_path(point.point_id)
        if self.after_quick_failure is not None or self.fed != 1 or since_start > attempt.QUICK_LAUNCH_FAILURE_S \
                or (os.path.isfile(partial) and os.path.getsize(partial) > 0):
            return False
        text = self._segment(offset)
        quick = launcher_failure(text)
        if quick is None:
            return False
        note = (f"the persistent worker job failed {since_start:.1f} s after its start with a launcher error "
                f"({quick}); started once more")
        self._append_log(point, f"{text}=== collscope: {note}\n")
        self.echo(f"point {point.point_id}: {note}")
        self.quick_failure = quick
        return True

    def _fail(self, plan: Plan, point: Point, code: int | None, timed_out: bool, offset: int, duration: float,
              report: Report, *, left: int) -> None:
        spec = self.spec
        text = self._segment(offset)
        self._append_log(point, text)
        if timed_out:
            who = f"the ranks' watchdog after {rank_timeout_s(spec, self.options.launch):g} s" if self._expired \
                else "the worker job was killed"
            failure = ("timeout", f"timeout after {spec.timeout_s:g} s ({who}; persistent worker)")
        else:
            failure = ("exit code", f"exit code {code} (persistent worker job ended during this point)")
        diagnosis = launch_diagnosis(text)
        if diagnosis:
            failure = (failure[0], f"{failure[1]} ({diagnosis})")
        if self.after_quick_failure is not None and self.fed == 1:
            failure = (failure[0], f"{failure[1]}; a first attempt failed at launch ({self.after_quick_failure}) "
                                   "and was started once more")
        records, _ = collect_records(spec, point, self.results.partial_path(point.point_id), text,
                                     self.results.log_path(point.point_id))
        result = conclude_attempt(self.results, plan, point, records, None, failure, text, duration)
        report(point, result, duration)
        if left:
            self.echo(f"persistent worker job ended ({failure[1]}); launching a new one for {left} point(s)")
