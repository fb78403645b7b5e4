"""One attempt at one point, and how its ending is written down (shared by per-point launches and persistent
workers): the run options, :func:`run_point` (one launch, its timeout, its log) and :func:`conclude_attempt`
(records, failures with the log tail, wrong values, settings that did not apply).

What shapes a timed run besides the point's own settings is decided here, once for every launcher
(:func:`timed_launch`): engines torch and nccl-tests time at ``NCCL_DEBUG=WARN`` with ``NCCL_DEBUG_SUBSYS`` and
``NCCL_DEBUG_FILE`` unset whatever the spec or the user's environment says (NCCL >= 2.24 logs a line per call at
INFO, inside the timed loop; a debug file would take the WARN lines :func:`launch_diagnosis` reads), and the
inherited variables of the sweep's audit (:mod:`collscope.sweeps.inherited_env`) are removed from the launch's
environment. ``--keep-env`` (:attr:`RunOptions.keep_env`) keeps all of them. Forced NCCL settings are verified
from a separate short run at INFO (:mod:`collscope.sweeps.verification`), once per configuration.

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
from collscope.vocab.configs import is_tuning_variable

__all__ = ["RunOptions", "PointOutcome", "SettingsCheck", "Workers", "LauncherKind", "run_point", "conclude_attempt",
           "collect_records", "verify_settings", "launch_options_for", "overridden_user_env", "timed_launch",
           "launch_environment", "forced_nccl_settings", "TIMED_DEBUG", "TIMED_UNSET"]

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
    keep_env: bool = False
    """``--keep-env``: timed runs keep ``NCCL_DEBUG``, ``NCCL_DEBUG_SUBSYS`` and ``NCCL_DEBUG_FILE`` as the spec and
    the environment set them (by default engines torch and nccl-tests time at :data:`TIMED_DEBUG`)."""
    unset_env: tuple[str, ...] = ()
    """Inherited variables removed from every launch's environment (and from mpirun's ``-x`` list): the ones the
    sweep's inherited-environment audit unsets (:mod:`collscope.sweeps.inherited_env`); empty with
    ``--keep-env``."""

    def __post_init__(self) -> None:
        if self.workers not in ("per-point", "persistent"):
            raise ConfigError(f"workers={self.workers!r} is invalid; valid: per-point, persistent")
        if not isinstance(self.unset_env, tuple) or not all(isinstance(n, str) for n in self.unset_env):
            raise ConfigError(f"unset_env={self.unset_env!r} is invalid; valid: a tuple of variable names")


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
    timed_spec, timed_point, unset = timed_launch(spec, point, options)
    try:
        cmd = build_launch(options.launcher, timed_spec, timed_point, partial,
                           launch_options_for(timed_spec, timed_point, options, without=unset))
    except CollscopeError as exc:
        results.record_failure(pid, "launch error", str(exc))
        return PointOutcome(pid, "failed", "launch error", str(exc))
    replaced = overridden_user_env(cmd.env, os.environ) + unset_user_env(unset, os.environ)
    with log_path.open("a") as fh:
        fh.write(f"\n=== collscope attempt {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n{cmd.display()}\n")
        fh.write("".join(f"=== {line}\n" for line in replaced) + "===\n")
    for line in replaced:
        log.warning("point %s: %s", pid, line)
    offset_after_header = log_path.stat().st_size
    start = time.monotonic()
    try:
        result = proc.run(list(cmd.argv), timeout_s=spec.timeout_s, env=launch_environment(unset),
                          extra_env=cmd.env, output_path=log_path, kill_on_parent_death=True)
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

    ``options``: how the point was launched, for the verification of its forced NCCL settings: always from a
    separate short run at NCCL_DEBUG=INFO, once per configuration
    (:func:`collscope.sweeps.verification.configuration_check`), never from the timed run's log; without it (a
    persistent worker's point) the attempt's own log is the only evidence."""
    spec = plan.spec
    pid = point.point_id
    ran_spec, ran_point, _ = timed_launch(spec, point, options) if options is not None else (spec, point, ())
    records = [_stamp(r, plan, point, {**ran_spec.fixed_env, **ran_point.settings}) for r in records]
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

    if options is not None and spec.engine != "mpi" and forced_nccl_settings(point):
        from collscope.sweeps.verification import configuration_check

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


TIMED_DEBUG: dict[str, str] = {"NCCL_DEBUG": "WARN"}
"""What a timed run of engine torch or nccl-tests logs at, whatever the spec and the environment say (DESIGN,
domain rules: NCCL >= 2.24 at INFO writes a line per call inside the timed loop)."""
TIMED_UNSET = ("NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")
"""Left out of a timed run of engine torch or nccl-tests: the subsystems only matter at INFO, and a debug file
would take the run's WARN lines out of its log (:func:`~collscope.sweeps.diagnose.launch_diagnosis` reads them)."""


def timed_launch(spec: SweepSpec, point: Point, options: RunOptions) -> tuple[SweepSpec, Point, tuple[str, ...]]:
    """The spec and point a timed run is launched with, and the inherited variables it runs without.

    Engines nccl-tests and torch (NCCL, not gloo): ``fixed_env`` gets :data:`TIMED_DEBUG` and loses
    :data:`TIMED_UNSET`, the point's settings lose both, and :data:`TIMED_UNSET` joins ``options.unset_env``; with
    ``options.keep_env`` (or engine mpi, or torch over gloo) the spec and point are the plan's. The point keeps
    its id (its records say what the plan asked for)."""
    unset = tuple(options.unset_env)
    if options.keep_env or not (spec.engine == "nccl-tests" or (spec.engine == "torch" and spec.backend != "gloo")):
        return spec, point, unset
    debug = (*TIMED_DEBUG, *TIMED_UNSET)
    fixed = {**{k: TIMED_DEBUG.get(k, v) for k, v in spec.fixed_env.items() if k not in TIMED_UNSET}, **TIMED_DEBUG}
    settings = {k: v for k, v in point.settings.items() if k not in debug}
    return (dataclasses.replace(spec, fixed_env=fixed), dataclasses.replace(point, settings=settings),
            (*unset, *(n for n in TIMED_UNSET if n not in unset)))


def launch_environment(unset: tuple[str, ...] | list[str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a launch starts from: ``base`` (this process's) without the names in ``unset``."""
    env = os.environ if base is None else base
    return {k: v for k, v in env.items() if k not in unset}


def unset_user_env(unset: tuple[str, ...], user_env: Mapping[str, str]) -> list[str]:
    """``NCCL_ALGO: your 'Ring' -> unset for this run``: the user's variables a launch goes without (a sweep never
    changes a user's variable silently)."""
    return [f"{name}: your {user_env[name]!r} -> unset for this run (see sweep.json's inherited_env; --keep-env "
            "keeps it)" for name in sorted(unset) if name in user_env]


def forced_nccl_settings(point: Point) -> dict[str, str]:
    """The point's settings that NCCL's log can confirm: NCCL tuning variables (not nccl-tests' own, not logging)."""
    return {k: v for k, v in point.settings.items()
            if k.startswith("NCCL_") and not k.startswith("NCCL_TESTS") and is_tuning_variable(k)}


def overridden_user_env(point_env: dict[str, str], user_env: Mapping[str, str]) -> list[str]:
    """``NCCL_ALGO: yours Ring -> this point's Tree``: the variables a point sets that the user had set otherwise
    (a sweep never changes a user's variable silently; DESIGN, domain rules)."""
    return [f"{name}: your {user_env[name]!r} -> this point's {value!r}" for name, value in sorted(point_env.items())
            if name in user_env and user_env[name] != value]


def launch_options_for(spec: SweepSpec, point: Point, options: RunOptions, *,
                       without: tuple[str, ...] | None = None) -> LaunchOptions:
    """The launch options of one point: nccl-tests points need the binary of their op, looked up here (the
    builder stays pure), and mpirun forwards none of the variables the launch goes without (``without``, by
    default ``options.unset_env``)."""
    launch = options.launch
    gone = options.unset_env if without is None else without
    if gone and any(n in gone for n in launch.forward_env):
        launch = dataclasses.replace(launch, forward_env=tuple(n for n in launch.forward_env if n not in gone))
    if spec.engine != "nccl-tests" or launch.nccl_tests_binary is not None:
        return launch
    binary = find_nccl_tests_binary(point.op, spec.nccl_tests_dir, mpi=options.launcher != "local")
    return dataclasses.replace(launch, nccl_tests_binary=str(binary))


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


def _stamp(record: Measurement, plan: Plan, point: Point, ran_with: dict[str, str]) -> Measurement:
    """The record as the point's: ids, repeat, and the settings it ran with (the engine's own capture, else
    ``ran_with``: the timed run's fixed env and settings, NCCL_DEBUG=WARN included)."""
    settings = record.settings or Settings(ran_with)
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
    """Forced variables the log does not confirm either way (not echoed, or no evidence of their effect); None
    when the log was not examined. Any of them leaves ``applied`` None, never True."""
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
    forced = forced_nccl_settings(point)
    if not forced:
        return None
    if spec.engine == "mpi":
        return SettingsCheck(applied=None, note="NCCL settings have no effect on the mpi engine")
    try:
        nccl = parse_nccl_log(attempt_text, "point log")
    except ParseError:
        return SettingsCheck(applied=None, note="no NCCL debug output in the point log (NCCL_DEBUG=INFO?)")
    effects = forced_setting_effects(nccl)
    verdicts = [effects[k].get("applied") if k in effects else None for k in forced]
    # applied only when the log confirms every forced variable: one it says nothing about is unchecked
    applied = False if False in verdicts else (True if all(v is True for v in verdicts) else None)
    unchecked = tuple(sorted(k for k in forced if effects.get(k, {}).get("applied") is None))
    return SettingsCheck(applied=applied, effects=effects, unchecked=unchecked)
