"""One attempt at one point, and how its ending is written down (shared by per-point launches and persistent
workers): the run options, :func:`run_point` (one launch, its timeout, its log) and :func:`conclude_attempt`
(records, failures with the log tail, wrong values, settings that did not apply).

Moved out of :mod:`collscope.sweeps.runner`, which re-exports these names, so that
:mod:`collscope.sweeps.persistent` can use them without an import cycle.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from collscope import proc
from collscope.collectives.nccl_log.effects import forced_setting_effects
from collscope.collectives.nccl_log.parse import parse_nccl_log
from collscope.collectives.nccl_tests.parse import parse_nccl_tests
from collscope.collectives.nccl_tests.run import find_nccl_tests_binary
from collscope.collectives.nccl_tests.spec import COLLSCOPE_AVERAGE, binary_name
from collscope.collectives.record import Measurement, Settings, write_jsonl
from collscope.errors import CollscopeError, ConfigError, ParseError
from collscope.results.decode import read_jsonl
from collscope.results.points import move_aside
from collscope.results.store import ResultsDir
from collscope.sweeps.diagnose import launch_diagnosis
from collscope.sweeps.launchers import LaunchOptions, build_launch
from collscope.sweeps.spec import Plan, Point, SweepSpec
from collscope.sweeps.termination import SweepTerminated, cancel_job_steps, slurm_nodes_down

__all__ = ["RunOptions", "PointOutcome", "SettingsCheck", "Workers", "LauncherKind", "run_point", "conclude_attempt",
           "collect_records", "verify_settings", "launch_options_for", "overridden_user_env", "VERIFY_ENV"]

log = logging.getLogger(__name__)
LauncherKind = Literal["local", "mpirun", "srun"]
Workers = Literal["per-point", "persistent"]


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    launcher: LauncherKind
    """How each point is launched: ``local`` (this host), ``mpirun`` or ``srun`` (inside an allocation)."""
    launch: LaunchOptions
    """Launcher details (python, hostfile, MPI flavour, root flags, ...)."""
    dry_run: bool = False
    """Print every command and environment; run nothing, write nothing."""
    retry_failed: bool = False
    """Run points whose last attempt failed again (by default they are left as failed)."""
    shard: tuple[int, int] | None = None
    """``(i, n)``: run only points i, i+n, i+2n, ... (Slurm job arrays)."""
    progress: bool = True
    workers: Workers = "per-point"
    """``per-point``: one launch per point; ``persistent``: ranks launched once per group of points that can
    share a launch, measuring point after point (:mod:`collscope.sweeps.persistent`)."""

    def __post_init__(self) -> None:
        if self.workers not in ("per-point", "persistent"):
            raise ConfigError(f"workers={self.workers!r} is invalid; valid: per-point, persistent")


@dataclass(frozen=True)
class PointOutcome:
    point_id: str
    status: Literal["done", "failed", "skipped"]
    reason: str | None = None
    detail: str = ""
    records: int = 0
    duration_s: float = 0.0



def run_point(results: ResultsDir, plan: Plan, point: Point, options: RunOptions) -> PointOutcome:
    """One attempt at one point; every ending is written down (records, or a failure with the log tail)."""
    spec = plan.spec
    pid = point.point_id
    partial = results.partial_path(pid)
    if os.path.lexists(partial):  # an earlier attempt's records are kept, never deleted (and never counted)
        move_aside(partial, "attempt")
    log_path = results.log_path(pid)
    try:
        cmd = build_launch(options.launcher, spec, point, partial, launch_options_for(spec, point, options))
    except CollscopeError as exc:
        results.record_failure(pid, "launch error", str(exc))
        return PointOutcome(pid, "failed", "launch error", str(exc))
    replaced = overridden_user_env(cmd.env, os.environ)
    with log_path.open("a") as fh:
        fh.write(f"\n=== collscope attempt {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n{cmd.display()}\n")
        fh.write("".join(f"=== {line}\n" for line in replaced) + "===\n")
    for line in replaced:
        log.warning("point %s: %s", pid, line)
    offset_after_header = log_path.stat().st_size
    start = time.monotonic()
    try:
        result = proc.run(list(cmd.argv), timeout_s=spec.timeout_s, extra_env=cmd.env, output_path=log_path,
                          kill_on_parent_death=True)
    except SweepTerminated as exc:
        record_cancelled(results, pid, exc, _read_from(log_path, offset_after_header), options.launcher,
                         time.monotonic() - start)
        raise
    except CollscopeError as exc:
        results.record_failure(pid, "launch error", str(exc), attempt_s=time.monotonic() - start)
        return PointOutcome(pid, "failed", "launch error", str(exc))
    if result.timed_out and options.launcher == "srun":
        cancel_job_steps()
    duration = time.monotonic() - start
    attempt_text = _read_from(log_path, offset_after_header)
    failure: tuple[str, str] | None = None
    records, parse_problem = collect_records(spec, point, partial, attempt_text, log_path)
    if result.timed_out or result.returncode not in (0, 1) or (result.returncode == 1 and not _any_wrong(records)):
        detail = f"timeout after {spec.timeout_s:g} s" if result.timed_out else f"exit code {result.returncode}"
        diagnosis = launch_diagnosis(attempt_text)
        if diagnosis:
            detail += f" ({diagnosis})"
        failure = ("timeout" if result.timed_out else "exit code", detail)
    return conclude_attempt(results, plan, point, records, parse_problem, failure, attempt_text, duration,
                            options=options)


def record_cancelled(results: ResultsDir, pid: str, exc: SweepTerminated, attempt_text: str, launcher: str,
                     attempt_s: float) -> None:
    """Write the running point down as cancelled (with what the launcher and Slurm say), for a sweep stopped by
    SIGTERM; ``exc.detail`` gets the same words. Shared by per-point launches and persistent workers."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    diagnosis = launch_diagnosis(attempt_text)
    down = slurm_nodes_down() if launcher == "srun" else None
    exc.detail = str(exc) + " while this point ran" + (f"; Slurm reports down: {down}" if down else "") + (
        f" ({diagnosis})" if diagnosis else " (Slurm cancels a job when a node fails, its time runs out, or "
        "on scancel)")
    results.record_failure(pid, "cancelled", exc.detail, attempt_s=attempt_s)


def conclude_attempt(results: ResultsDir, plan: Plan, point: Point, records: list[Measurement],
                     parse_problem: str | None, failure: tuple[str, str] | None, attempt_text: str,
                     duration: float, *, options: RunOptions | None = None) -> PointOutcome:
    """Write down how one attempt ended: ``failure`` (reason, detail) from the launch, else the records (done,
    wrong values, setting not applied, parse error). Shared by per-point launches and persistent workers.

    ``options``: how the point was launched, for its verification run when its log cannot show whether a forced
    NCCL setting applied (:func:`verification_run`); without it the attempt's own log is the only evidence."""
    spec = plan.spec
    pid = point.point_id
    records = [_stamp(r, plan, point, spec) for r in records]
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

    check = verify_settings(spec, point, attempt_text)
    if check is not None and options is not None and spec.engine != "mpi" and check.applied is None:
        check = verification_run(results, spec, point, options) or check
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


VERIFY_ENV: dict[str, str] = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"}
"""The environment of a point's verification run: NCCL's log then shows which algorithm, protocol and settings
really ran (``shared/reference/nccl-facts.md`` section 5)."""
VERIFY_ITERS = 2


def verification_run(results: ResultsDir, spec: SweepSpec, point: Point, options: RunOptions) -> SettingsCheck | None:
    """A short run of the point at NCCL_DEBUG=INFO (2 iterations, no warm-up), only to read what NCCL did.

    The timed run stays at the preset's NCCL_DEBUG (WARN): INFO logging inside the timed loop (NCCL >= 2.24 logs
    every call) would change what is measured. The log goes to ``points/<id>.verify.log``; None when the run could
    not be launched (the timed run's check stands).
    """
    short = dataclasses.replace(spec, iters=VERIFY_ITERS, warmup=0, fixed_env={**spec.fixed_env, **VERIFY_ENV})
    pid = point.point_id
    settings = {k: v for k, v in point.settings.items() if k not in VERIFY_ENV}
    probe = dataclasses.replace(point, settings=settings)
    out = results.points_dir / f"{pid}.verify.out"
    log = results.points_dir / f"{pid}.verify.log"
    try:
        cmd = build_launch(options.launcher, short, probe, out, launch_options_for(short, probe, options))
        with log.open("w") as fh:
            fh.write(f"=== collscope verification run (NCCL_DEBUG=INFO) {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n"
                     f"{cmd.display()}\n===\n")
        result = proc.run(list(cmd.argv), timeout_s=spec.timeout_s, extra_env={**cmd.env, **VERIFY_ENV},
                          output_path=log, kill_on_parent_death=True)
    except (CollscopeError, OSError) as exc:
        return SettingsCheck(applied=None, note=f"verification run not started: {exc}")
    text = _read_from(log, 0)
    if result.timed_out or result.returncode != 0:
        why = f"timeout after {spec.timeout_s:g} s" if result.timed_out else f"exit code {result.returncode}"
        return SettingsCheck(applied=None, note=f"verification run at NCCL_DEBUG=INFO failed ({why}); see {log.name}")
    check = verify_settings(spec, point, text)
    if check is None:
        return None
    return dataclasses.replace(check, note=(check.note + "; " if check.note else "") +
                               f"verified in a separate {VERIFY_ITERS}-iteration run at NCCL_DEBUG=INFO ({log.name}); "
                               "the timed run logged at the preset's NCCL_DEBUG")


def overridden_user_env(point_env: dict[str, str], user_env: Mapping[str, str]) -> list[str]:
    """``NCCL_ALGO: yours Ring -> this point's Tree``: the variables a point sets that the user had set otherwise
    (a sweep never changes a user's variable silently; DESIGN, domain rules)."""
    return [f"{name}: your {user_env[name]!r} -> this point's {value!r}" for name, value in sorted(point_env.items())
            if name in user_env and user_env[name] != value]


def launch_options_for(spec: SweepSpec, point: Point, options: RunOptions) -> LaunchOptions:
    """nccl-tests points need the binary of their op, looked up here (the builder stays pure)."""
    if spec.engine != "nccl-tests" or options.launch.nccl_tests_binary is not None:
        return options.launch
    binary = find_nccl_tests_binary(point.op, spec.nccl_tests_dir, mpi=options.launcher != "local")
    return dataclasses.replace(options.launch, nccl_tests_binary=str(binary))


def _read_from(path: Path, offset: int) -> str:
    with path.open("rb") as fh:
        fh.seek(offset)
        return fh.read().decode("utf-8", "replace")


def collect_records(spec: SweepSpec, point: Point, partial: Path, attempt_text: str,
                     log_path: Path) -> tuple[list[Measurement], str | None]:
    """The attempt's records: the engine's JSONL (mpi, torch) or the nccl-tests output in the log.

    nccl-tests is told what the point ran: its ranks (all of them: with ``NCCL_TESTS_SPLIT_MASK`` the records get
    rank 0's group's size, the n of the printed busbw), its environment (the split, checked against the rank
    lines' groups) and its ``-a`` (times are the maximum over ranks)."""
    if spec.engine == "nccl-tests":
        try:
            run = parse_nccl_tests(attempt_text, str(log_path), op=point.op, nranks=spec.nranks,
                                   env={**spec.fixed_env, **point.settings},
                                   argv=[binary_name(point.op), "-a", str(COLLSCOPE_AVERAGE)])
        except ParseError as exc:
            return [], str(exc)
        return list(run.records), None
    if not partial.exists():
        return [], None
    try:
        return read_jsonl(partial), None
    except ParseError as exc:
        return [], str(exc)


def _stamp(record: Measurement, plan: Plan, point: Point, spec: SweepSpec) -> Measurement:
    settings = record.settings or Settings({**spec.fixed_env, **point.settings})
    return msgspec.structs.replace(record, point_id=point.point_id, sweep_id=plan.sweep_id, repeat=point.repeat,
                                   settings=settings)


def _any_wrong(records: list[Measurement]) -> bool:
    return any(not r.ok for r in records)


def _keep_partial(results: ResultsDir, point_id: str, records: list[Measurement]) -> None:
    """Records measured before a failure are kept next to the point (never counted as done)."""
    if records:
        write_jsonl(results.partial_path(point_id), records)


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingsCheck:
    """What NCCL's debug output says about a point's forced NCCL settings (``points/<id>.check.json``)."""

    applied: bool | None
    """False when a forced setting demonstrably did not take effect, True when all that could be checked did,
    None when the log holds no evidence."""
    effects: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per forced variable: what was forced, what NCCL used, and whether it applied."""
    unchecked: tuple[str, ...] | None = None
    """Forced variables the log says nothing about; None when the log was not examined."""
    note: str | None = None
    """Why nothing could be verified."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON of the check file: ``applied`` and ``effects``, plus ``unchecked`` or ``note``."""
        doc: dict[str, Any] = {"applied": self.applied, "effects": self.effects}
        if self.unchecked is not None:
            doc["unchecked"] = list(self.unchecked)
        if self.note is not None:
            doc["note"] = self.note
        return doc


def verify_settings(spec: SweepSpec, point: Point, attempt_text: str) -> SettingsCheck | None:
    """What NCCL's debug output says about the point's forced NCCL settings (None: nothing to verify)."""
    forced = {k: v for k, v in point.settings.items() if k.startswith("NCCL_") and not k.startswith("NCCL_TESTS")}
    if not forced:
        return None
    if spec.engine == "mpi":
        return SettingsCheck(applied=None, note="NCCL settings have no effect on the mpi engine")
    try:
        nccl = parse_nccl_log(attempt_text, "point log")
    except ParseError:
        return SettingsCheck(applied=None, note="no NCCL debug output in the point log (NCCL_DEBUG=INFO?)")
    effects = forced_setting_effects(nccl)
    verdicts = [e.get("applied") for k, e in effects.items() if k in forced]
    applied = False if False in verdicts else (True if verdicts and all(v is True for v in verdicts) else None)
    unchecked = tuple(sorted(set(forced) - set(effects)))
    return SettingsCheck(applied=applied, effects=effects, unchecked=unchecked)
