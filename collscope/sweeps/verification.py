"""Did a point's forced NCCL settings take effect? A separate short run at NCCL_DEBUG=INFO, once per configuration.

The timed run logs at WARN (:data:`~collscope.sweeps.run_options.TIMED_DEBUG`): INFO logging inside the timed loop
(NCCL >= 2.24 logs every call) would change what is measured, so its log never serves as evidence. Instead
:func:`verification_run` launches the point again for :data:`VERIFY_ITERS` iterations with
:data:`VERIFY_ENV`, and without ``NCCL_DEBUG_FILE`` (a user's debug file would take the log elsewhere and leave
the point without evidence), and reads NCCL's log (:func:`verify_settings`).

A configuration (op, settings, sizes; not the repeat) is verified once: :func:`configuration_check` keeps the
check in ``points/<id>.verify.json`` (``<id>``: the configuration's repeat-0 point id) beside the run's log
``points/<id>.verify.log``, and every other repeat, in this run or a resumed one, reuses it. A verification run
that could not run is not kept: the next repeat tries again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from collscope import proc
from collscope.atomic import write_text_atomic
from collscope.collectives.nccl_log.effects import forced_setting_effects
from collscope.collectives.nccl_log.parse import parse_nccl_log
from collscope.errors import CollscopeError, ParseError
from collscope.files import read_input_bytes
from collscope.results.store import ResultsDir
from collscope.sweeps.launchers import build_launch
from collscope.sweeps.run_options import RunOptions, forced_nccl_settings, launch_environment, launch_options_for
from collscope.sweeps.spec import Point, SweepSpec, point_id_for
from collscope.sweeps.termination import SweepTerminated
from collscope.vocab.engines import engine_row

__all__ = ["VERIFY_ENV", "VERIFY_ITERS", "VERIFY_UNSET", "SettingsCheck", "configuration_id", "configuration_check",
           "verification_run", "verify_settings"]

VERIFY_ENV: dict[str, str] = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"}
"""The environment of a point's verification run: NCCL's log then shows which algorithm, protocol and settings
really ran (``shared/reference/nccl-facts.md`` section 5)."""
VERIFY_ITERS = 2
VERIFY_UNSET = ("NCCL_DEBUG_FILE",)
"""Never set in a verification run, even with ``--keep-env``: NCCL writes its log to that file instead of the
run's output (``points/<id>.verify.log``)."""


def configuration_id(spec: SweepSpec, point: Point) -> str:
    """The id under which a configuration's verification is kept: the id of its repeat 0 (for a grid point, the
    repeat-0 point's own id)."""
    return point_id_for(spec, point.op, dict(point.settings), 0, sizes=point.sizes)


def configuration_check(results: ResultsDir, spec: SweepSpec, point: Point, options: RunOptions) -> SettingsCheck:
    """The check of ``point``'s configuration: the kept one when an earlier repeat verified it, else a new
    verification run (kept when it ran)."""
    cid = configuration_id(spec, point)
    kept = results.points_dir / f"{cid}.verify.json"
    found = _read_kept(kept)
    if found is not None:
        if cid == point.point_id:
            return dataclasses.replace(found, configuration=cid)
        note = f"verified once for this configuration ({cid}.verify.log)"
        return dataclasses.replace(found, note=f"{found.note}; {note}" if found.note else note, configuration=cid)
    check, ran = verification_run(results, spec, point, options, cid)
    if ran:
        write_text_atomic(kept, json.dumps({"configuration": cid, "check": check.to_dict()}, indent=1))
        return dataclasses.replace(check, configuration=cid)
    return check


def _read_kept(path: os.PathLike[str]) -> SettingsCheck | None:
    """A kept check, or None when there is none or it cannot be read (then the configuration is verified again)."""
    if not os.path.lexists(path):
        return None
    try:  # O_NOFOLLOW, never a blocking read: a link or a FIFO planted under the name is not a kept check
        doc: Any = json.loads(read_input_bytes(os.fspath(path), "a kept verification check", follow_links=False))
        check = doc["check"]
        unchecked = check.get("unchecked")
        return SettingsCheck(applied=check["applied"], effects=dict(check["effects"]),
                             unchecked=None if unchecked is None else tuple(unchecked), note=check.get("note"))
    except (ParseError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def verification_run(results: ResultsDir, spec: SweepSpec, point: Point, options: RunOptions,
                     configuration: str | None = None) -> tuple[SettingsCheck, bool]:
    """A short run of the point at NCCL_DEBUG=INFO (2 iterations, no warm-up), only to read what NCCL did.

    Returns the check and whether the run ran to its end (exit 0). Its environment: the point's, with
    :data:`VERIFY_ENV`, without :data:`VERIFY_UNSET` and without the variables the timed runs go without
    (``options.unset_env``). The log goes to ``points/<configuration>.verify.log``.
    """
    cid = configuration or point.point_id
    fixed = {**{k: v for k, v in spec.fixed_env.items() if k not in VERIFY_UNSET}, **VERIFY_ENV}
    short = dataclasses.replace(spec, iters=VERIFY_ITERS, warmup=0, fixed_env=fixed)
    settings = {k: v for k, v in point.settings.items() if k not in VERIFY_ENV and k not in VERIFY_UNSET}
    probe = dataclasses.replace(point, settings=settings)
    unset = (*options.unset_env, *(n for n in VERIFY_UNSET if n not in options.unset_env))
    out = results.points_dir / f"{cid}.verify.out"
    try:
        cmd = build_launch(options.launcher, short, probe, out,
                           launch_options_for(short, probe, options, without=unset))
        with results.open_log(cid, ".verify.log", truncate=True) as verify_log:  # no link followed (results.logs)
            log = verify_log.path
            verify_log.write(f"=== collscope verification run (NCCL_DEBUG=INFO) "
                             f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n{cmd.display()}\n===\n")
            result = proc.run(list(cmd.argv), timeout_s=spec.timeout_s, env=launch_environment(unset),
                              extra_env={**cmd.env, **VERIFY_ENV}, output_path=verify_log.output_path,
                              kill_on_parent_death=True)
            text = verify_log.read_from(0)
    except SweepTerminated:  # the sweep was stopped (exit 143), not a verification that could not start
        raise
    except (CollscopeError, OSError) as exc:
        return SettingsCheck(applied=None, note=f"verification run not started: {exc}"), False
    if result.timed_out or result.returncode != 0:
        why = f"timeout after {spec.timeout_s:g} s" if result.timed_out else f"exit code {result.returncode}"
        return SettingsCheck(applied=None, note=f"verification run at NCCL_DEBUG=INFO failed ({why}); see "
                             f"{log.name}"), False
    check = verify_settings(spec, point, text) or SettingsCheck(applied=None, note="nothing to verify")
    note = (f"verified in a separate {VERIFY_ITERS}-iteration run at NCCL_DEBUG=INFO ({log.name}); the timed run "
            "logged at NCCL_DEBUG=WARN" + (" (or as --keep-env kept it)" if options.keep_env else ""))
    return dataclasses.replace(check, note=(check.note + "; " if check.note else "") + note), True


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
    configuration: str | None = None
    """The configuration whose verification run this is (``points/<configuration>.verify.log``: the log of NCCL's
    choices for every repeat of it); None when not from a verification run."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON of the check file: ``applied`` and ``effects``, plus ``unchecked`` or ``note``."""
        doc: dict[str, Any] = {"applied": self.applied, "effects": self.effects}
        if self.unchecked is not None:
            doc["unchecked"] = list(self.unchecked)
        if self.note is not None:
            doc["note"] = self.note
        if self.configuration is not None:
            doc["configuration"] = self.configuration
        return doc


def verify_settings(spec: SweepSpec, point: Point, attempt_text: str) -> SettingsCheck | None:
    """What NCCL's debug output says about the point's forced NCCL settings (None: nothing to verify)."""
    forced = forced_nccl_settings(point)
    if not forced:
        return None
    row = engine_row(spec.engine, spec.backend)
    if not row.honours("nccl"):
        return SettingsCheck(applied=None, note=f"NCCL settings have no effect on engine {row.name}")
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
