"""One attempt at one point, and how its ending is written down (shared by per-point launches and persistent
workers): :func:`run_point` (one launch, its timeout, its log) and :func:`conclude_attempt` (records, failures
with the log tail, wrong values, settings that did not apply).

The launch's options and the environment of a timed run are :mod:`collscope.sweeps.run_options`'s; forced NCCL
settings are verified from a separate short run at INFO (:mod:`collscope.sweeps.verification`), once per
configuration. Moved out of :mod:`collscope.sweeps.runner`, so that :mod:`collscope.sweeps.persistent` can use
them without an import cycle.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from collscope import proc
from collscope.collectives.nccl_tests.parse import parse_nccl_tests
from collscope.collectives.nccl_tests.spec import COLLSCOPE_AVERAGE, binary_name
from collscope.collectives.record import Measurement, Settings, write_jsonl
from collscope.collectives.spec import captured_environment
from collscope.errors import CollscopeError, ParseError
from collscope.results.decode import read_jsonl
from collscope.results.points import move_aside
from collscope.results.store import ResultsDir
from collscope.sweeps.diagnose import NODE_LOST, launch_diagnosis, launcher_failure
from collscope.sweeps.launchers import build_launch
from collscope.sweeps.run_options import (
    RunOptions,
    forced_nccl_settings,
    launch_environment,
    launch_options_for,
    overridden_user_env,
    timed_launch,
    unset_user_env,
)
from collscope.sweeps.spec import Plan, Point, SweepSpec
from collscope.sweeps.termination import SweepTerminated, cancel_job_steps, slurm_nodes_down
from collscope.sweeps.verification import SettingsCheck, configuration_check, verify_settings
from collscope.vocab.configs import rail_of
from collscope.vocab.engines import engine_row
from collscope.vocab.secrets import redact_env

__all__ = ["PointOutcome", "run_point", "conclude_attempt", "collect_records", "record_cancelled", "RESUMED_REASONS",
           "QUICK_LAUNCH_FAILURE_S", "QUICK_RETRY_PAUSE_S", "resumed_failure"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PointOutcome:
    point_id: str
    status: Literal["done", "failed", "skipped"]
    reason: str | None = None
    detail: str = ""
    records: int = 0
    duration_s: float = 0.0


QUICK_LAUNCH_FAILURE_S = 10.0
"""A launch that fails within this many seconds with a launcher error (:func:`launcher_failure`: a task killed, a
step not created, a PMIx error) is started once more before it counts: on a node that just came back (a requeued
job) the first step can die 0.1 s in, with nothing measured."""

QUICK_RETRY_PAUSE_S = 2.0
"""The pause before that second start: a node that just came back (slurmd restarted) may still be clearing the
steps of the job's first run."""

RESUMED_REASONS = ("cancelled", "launch error")
"""Failure reasons that say nothing about the point: a resume (the same command, a requeued job) runs such a point
again without ``--retry-failed``. ``cancelled``: the sweep was stopped (SIGTERM) while the point ran, an attempt
cut short; ``launch error``: the launch could not be built or started (a tool missing at the time)."""


def resumed_failure(reason: str, detail: str) -> bool:
    """Whether a resume runs a point whose last failure is (``reason``, ``detail``) without ``--retry-failed``:
    a reason of :data:`RESUMED_REASONS`, or an exit code or timeout while Slurm lost a node under the point (the
    launcher's words, :data:`~collscope.sweeps.diagnose.NODE_LOST`): neither says anything about the
    configuration."""
    if reason in RESUMED_REASONS:
        return True
    return reason in ("exit code", "timeout") and any(f"({words}" in detail or f"; {words}" in detail
                                                      for words in NODE_LOST)


@dataclass(frozen=True)
class _Attempt:
    """How one launch of a point ended, before it is written down."""

    records: list[Measurement]
    parse_problem: str | None
    failure: tuple[str, str] | None
    text: str
    duration_s: float


def run_point(results: ResultsDir, plan: Plan, point: Point, options: RunOptions) -> PointOutcome:
    """One attempt at one point (two when the first dies of a launcher error within
    :data:`QUICK_LAUNCH_FAILURE_S`); every ending is written down (records, or a failure with the log tail)."""
    attempt = _launch(results, plan, point, options)
    if isinstance(attempt, PointOutcome):
        return attempt
    quick = _quick_launch_failure(attempt)
    if quick is not None:
        note = (f"the launch failed {attempt.duration_s:.1f} s after its start with a launcher error ({quick}); "
                "started once more")
        log.warning("point %s: %s", point.point_id, note)
        results.append_log(point.point_id, f"=== collscope: {note}\n")
        time.sleep(QUICK_RETRY_PAUSE_S)
        attempt = _launch(results, plan, point, options)
        if isinstance(attempt, PointOutcome):
            return attempt
        if attempt.failure is not None:
            reason, detail = attempt.failure
            attempt = dataclasses.replace(attempt, failure=(reason, f"{detail}; a first attempt failed at launch "
                                                                    f"({quick}) and was started once more"))
    return conclude_attempt(results, plan, point, attempt.records, attempt.parse_problem, attempt.failure,
                            attempt.text, attempt.duration_s, options=options)


def _quick_launch_failure(attempt: _Attempt) -> str | None:
    """Why ``attempt`` is worth starting once more (a launcher error within seconds, nothing measured), or None."""
    if attempt.failure is None or attempt.failure[0] != "exit code" or attempt.records:
        return None
    if attempt.duration_s > QUICK_LAUNCH_FAILURE_S:
        return None
    return launcher_failure(attempt.text)


def _launch(results: ResultsDir, plan: Plan, point: Point, options: RunOptions) -> _Attempt | PointOutcome:
    """Start ``point`` once and wait for it; a launch that cannot be built or started is written down here."""
    spec = plan.spec
    pid = point.point_id
    partial = results.partial_path(pid)
    if os.path.lexists(partial):  # an earlier attempt's records are kept, never deleted (and never counted)
        move_aside(partial, "attempt")
    timed_spec, timed_point, unset = timed_launch(spec, point, options)
    try:
        cmd = build_launch(options.launcher, timed_spec, timed_point, partial,
                           launch_options_for(timed_spec, timed_point, options, without=unset))
    except CollscopeError as exc:
        results.record_failure(pid, "launch error", str(exc))
        return PointOutcome(pid, "failed", "launch error", str(exc))
    replaced = overridden_user_env(cmd.env, os.environ) + unset_user_env(unset, os.environ)
    point_log = results.open_log(pid)  # no link followed; written and read back through its descriptor
    if point_log.note:
        log.warning("point %s: %s", pid, point_log.note)
    log_path = point_log.path
    point_log.write(f"\n=== collscope attempt {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n{cmd.display()}\n"
                    + "".join(f"=== {line}\n" for line in replaced) + "===\n")
    for line in replaced:
        log.warning("point %s: %s", pid, line)
    offset_after_header = point_log.size()
    start = time.monotonic()
    try:
        result = proc.run(list(cmd.argv), timeout_s=spec.timeout_s, env=launch_environment(unset),
                          extra_env=cmd.env, output_path=point_log.output_path, kill_on_parent_death=True)
    except SweepTerminated as exc:
        record_cancelled(results, pid, exc, point_log.read_from(offset_after_header), options.launcher,
                         time.monotonic() - start)
        raise
    except CollscopeError as exc:
        results.record_failure(pid, "launch error", str(exc), attempt_s=time.monotonic() - start)
        return PointOutcome(pid, "failed", "launch error", str(exc))
    if result.timed_out and options.launcher == "srun":
        cancel_job_steps()
    duration = time.monotonic() - start
    attempt_text = point_log.read_from(offset_after_header)
    point_log.close()
    failure: tuple[str, str] | None = None
    records, parse_problem = collect_records(spec, point, partial, attempt_text, log_path)
    if result.timed_out or result.returncode not in (0, 1) or (result.returncode == 1 and not _any_wrong(records)):
        detail = f"timeout after {spec.timeout_s:g} s" if result.timed_out else f"exit code {result.returncode}"
        diagnosis = launch_diagnosis(attempt_text)
        if diagnosis:
            detail += f" ({diagnosis})"
        failure = ("timeout" if result.timed_out else "exit code", detail)
    elif not records and (launcher := launcher_failure(attempt_text)):
        # srun can exit 0 after aborting a step whose tasks never started: the launch failed, not the engine
        failure = ("exit code", f"exit code {result.returncode} with nothing measured "
                                f"({launch_diagnosis(attempt_text) or launcher})")
    return _Attempt(records, parse_problem, failure, attempt_text, duration)


def record_cancelled(results: ResultsDir, pid: str, exc: SweepTerminated, attempt_text: str, launcher: str,
                     attempt_s: float) -> None:
    """Write the running point down as cancelled (with what the launcher and Slurm say), for a sweep stopped by
    SIGTERM; ``exc.detail`` gets the same words. Shared by per-point launches and persistent workers.

    A cancelled point is an attempt cut short, not a failure of its configuration (:data:`RESUMED_REASONS`): the
    same command again (a requeued job) measures it again; its log and partial records stay (the next attempt
    moves the partial file aside, never deletes it)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    diagnosis = launch_diagnosis(attempt_text)
    down = slurm_nodes_down() if launcher == "srun" else None
    exc.detail = str(exc) + " while this point ran" + (f"; Slurm reports down: {down}" if down else "") + (
        f" ({diagnosis})" if diagnosis else " (Slurm cancels a job when a node fails, its time runs out, or "
        "on scancel)")
    results.record_failure(pid, "cancelled", exc.detail + "; a resume measures it again", attempt_s=attempt_s)


def conclude_attempt(results: ResultsDir, plan: Plan, point: Point, records: list[Measurement],
                     parse_problem: str | None, failure: tuple[str, str] | None, attempt_text: str,
                     duration: float, *, options: RunOptions | None = None) -> PointOutcome:
    """Write down how one attempt ended: ``failure`` (reason, detail) from the launch, else the records (done,
    wrong values, setting not applied, parse error). Shared by per-point launches and persistent workers.

    ``options``: how the point was launched, for the verification of its forced NCCL settings: always from a
    separate short run at NCCL_DEBUG=INFO, once per configuration
    (:func:`collscope.sweeps.verification.configuration_check`), never from the timed run's log; without it (a
    persistent worker's point) the attempt's own log is the only evidence."""
    spec = plan.spec
    pid = point.point_id
    ran_spec, ran_point, unset = timed_launch(spec, point, options) if options is not None else (spec, point, ())
    records = [_stamp(r, plan, point, {**ran_spec.fixed_env, **ran_point.settings}, unset) for r in records]
    if failure is not None:
        reason, detail = failure
        _keep_partial(results, pid, records)
        results.record_failure(pid, reason, detail + (f"; {len(records)} record(s) kept in "
                                                      f"{results.partial_path(pid).name}" if records else ""),
                               attempt_s=duration)
        return PointOutcome(pid, "failed", reason, detail, len(records), duration)
    if parse_problem is not None or not records:
        detail = parse_problem or "the engine wrote no records"
        _keep_partial(results, pid, records)
        results.record_failure(pid, "parse error", detail, attempt_s=duration)
        return PointOutcome(pid, "failed", "parse error", detail, len(records), duration)

    if options is not None and engine_row(spec.engine, spec.backend).honours("nccl") and \
            (forced_nccl_settings(point) or options.evidence_runs):
        check: SettingsCheck | None = configuration_check(results, spec, point, options)
    else:
        check = verify_settings(spec, point, attempt_text)
    results.finish_point(pid, records)
    if check is not None:
        results.write_check(pid, check.to_dict())
    if _any_wrong(records):
        sizes = sorted({r.size_bytes for r in records if not r.ok})
        detail = f"wrong values at {len(sizes)} size(s): {', '.join(str(s) for s in sizes[:8])}"
        results.record_failure(pid, "wrong values", detail, attempt_s=duration)
        return PointOutcome(pid, "failed", "wrong values", detail, len(records), duration)
    if check is not None and check.applied is False:
        detail = "; ".join(f"{k}: forced {v.get('forced')!r}, NCCL used {v.get('used')!r}"
                           for k, v in check.effects.items() if v.get("applied") is False)
        results.record_failure(pid, "setting not applied", detail, attempt_s=duration)
        return PointOutcome(pid, "failed", "setting not applied", detail, len(records), duration)
    return PointOutcome(pid, "done", None, "", len(records), duration)


def collect_records(spec: SweepSpec, point: Point, partial: Path, attempt_text: str,
                     log_path: Path) -> tuple[list[Measurement], str | None]:
    """The attempt's records: the engine's JSONL (mpi, torch) or the nccl-tests output in the log.

    nccl-tests is told what the point ran: its ranks (all of them: with ``NCCL_TESTS_SPLIT_MASK`` the records get
    rank 0's group's size, the n of the printed busbw), its environment (the split, checked against the rank
    lines' groups) and its ``-a`` (times are the maximum over ranks)."""
    if engine_row(spec.engine).records_from == "stdout":  # nccl-tests' table, in the log
        try:
            run = parse_nccl_tests(attempt_text, str(log_path), op=point.op, nranks=spec.nranks,
                                   env={**spec.fixed_env, **point.settings},
                                   argv=[binary_name(point.op), "-a", str(COLLSCOPE_AVERAGE)])
        except ParseError as exc:
            return [], str(exc)
        return list(run.records), None
    if not os.path.lexists(partial):
        return [], None
    try:  # a link planted under the name while the point ran is refused, never read through
        return read_jsonl(partial, follow_links=False), None
    except ParseError as exc:
        return [], str(exc)


def _stamp(record: Measurement, plan: Plan, point: Point, ran_with: dict[str, str],
           unset: tuple[str, ...] = ()) -> Measurement:
    """The record as the point's: ids, repeat, the settings the point forced (``ran_with``: the timed run's fixed
    env and settings, NCCL_DEBUG=WARN included) and, apart, what its ranks inherited (``environment``: what the
    engine saw, else this process's environment without ``unset``; see
    :func:`~collscope.collectives.spec.captured_environment`). An inherited variable never names a configuration;
    secrets' values are redacted in both."""
    seen = ({**record.environment, **record.settings} if record.environment is not None
            else launch_environment(unset))
    return msgspec.structs.replace(record, point_id=point.point_id, sweep_id=plan.sweep_id, repeat=point.repeat,
                                   settings=Settings(redact_env(ran_with)),
                                   environment=Settings(captured_environment(seen, forced=ran_with)),
                                   rail=rail_of(ran_with))  # the rail the point pinned, never an inherited one


def _any_wrong(records: list[Measurement]) -> bool:
    return any(not r.ok for r in records)


def _keep_partial(results: ResultsDir, point_id: str, records: list[Measurement]) -> None:
    """Records measured before a failure are kept next to the point (never counted as done)."""
    if records:
        write_jsonl(results.partial_path(point_id), records)


