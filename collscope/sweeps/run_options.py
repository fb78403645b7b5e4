"""How a sweep's points are launched, and the environment of a timed run (shared by per-point launches,
persistent workers and the verification runs): :class:`RunOptions`, :func:`timed_launch` (what shapes a timed run
besides the point's own settings), the launch's base environment and the launch options of one point.

What shapes a timed run is decided here, once for every launcher: engines torch and nccl-tests time at
``NCCL_DEBUG=WARN`` with ``NCCL_DEBUG_SUBSYS`` and ``NCCL_DEBUG_FILE`` unset whatever the spec or the user's
environment says (NCCL >= 2.24 logs a line per call at INFO, inside the timed loop; a debug file would take the WARN
lines :func:`~collscope.sweeps.diagnose.launch_diagnosis` reads), and the inherited variables of the sweep's audit
(:mod:`collscope.sweeps.inherited_env`) are removed from the launch's environment. ``--keep-env``
(:attr:`RunOptions.keep_env`) keeps all of them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from collscope.collectives.nccl_tests.run import find_nccl_tests_binary
from collscope.errors import ConfigError
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.spec import Point, SweepSpec
from collscope.vocab.configs import is_tuning_variable
from collscope.vocab.engines import engine_row
from collscope.vocab.secrets import redacted

__all__ = ["RunOptions", "Workers", "LauncherKind", "launch_options_for", "overridden_user_env", "timed_launch",
           "launch_environment", "unset_user_env", "forced_nccl_settings", "TIMED_DEBUG", "TIMED_UNSET"]

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
    """``(i, n)``: run only repeats i, i+n, i+2n, ... of every configuration (Slurm job arrays; each shard
    measures every configuration: :func:`~collscope.sweeps.runner.select_shard`)."""
    progress: bool = True
    workers: Workers = "per-point"
    """``per-point``: one launch per point; ``persistent``: ranks launched once per group of points that can
    share a launch, measuring point after point (:mod:`collscope.sweeps.persistent`)."""
    keep_env: bool = False
    """``--keep-env``: timed runs keep ``NCCL_DEBUG``, ``NCCL_DEBUG_SUBSYS`` and ``NCCL_DEBUG_FILE`` as the spec and
    the environment set them (by default engines torch and nccl-tests time at :data:`TIMED_DEBUG`)."""
    evidence_runs: bool = False
    """Engines that run NCCL: a verification run at NCCL_DEBUG=INFO for every configuration, forced NCCL settings or
    not (:mod:`collscope.sweeps.verification`), so that its log says what NCCL chose at each size (a canary's two
    sides: another library, plugin or image chooses differently)."""
    unset_env: tuple[str, ...] = ()
    """Inherited variables removed from every launch's environment (and from mpirun's ``-x`` list): the ones the
    sweep's inherited-environment audit unsets (:mod:`collscope.sweeps.inherited_env`); empty with
    ``--keep-env``."""

    def __post_init__(self) -> None:
        if self.workers not in ("per-point", "persistent"):
            raise ConfigError(f"workers={self.workers!r} is invalid; valid: per-point, persistent")
        if not isinstance(self.unset_env, tuple) or not all(isinstance(n, str) for n in self.unset_env):
            raise ConfigError(f"unset_env={self.unset_env!r} is invalid; valid: a tuple of variable names")


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
    if options.keep_env or not engine_row(spec.engine, spec.backend).honours("nccl"):  # the engine runs NCCL
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
    return [f"{name}: your {redacted(name, user_env[name])!r} -> unset for this run (see sweep.json's inherited_env; "
            "--keep-env keeps it)" for name in sorted(unset) if name in user_env]


def forced_nccl_settings(point: Point) -> dict[str, str]:
    """The point's settings that NCCL's log can confirm: NCCL tuning variables (not nccl-tests' own, not logging)."""
    return {k: v for k, v in point.settings.items()
            if k.startswith("NCCL_") and not k.startswith("NCCL_TESTS") and is_tuning_variable(k)}


def overridden_user_env(point_env: dict[str, str], user_env: Mapping[str, str]) -> list[str]:
    """``NCCL_ALGO: yours Ring -> this point's Tree``: the variables a point sets that the user had set otherwise
    (a sweep never changes a user's variable silently; DESIGN, domain rules)."""
    return [f"{name}: your {redacted(name, user_env[name])!r} -> this point's {redacted(name, value)!r}"
            for name, value in sorted(point_env.items()) if name in user_env and user_env[name] != value]


def launch_options_for(spec: SweepSpec, point: Point, options: RunOptions, *,
                       without: tuple[str, ...] | None = None) -> LaunchOptions:
    """The launch options of one point: nccl-tests points need the binary of their op, looked up here (the
    builder stays pure), and mpirun forwards none of the variables the launch goes without (``without``, by
    default ``options.unset_env``)."""
    launch = options.launch
    gone = options.unset_env if without is None else without
    if gone and any(n in gone for n in launch.forward_env):
        launch = dataclasses.replace(launch, forward_env=tuple(n for n in launch.forward_env if n not in gone))
    if engine_row(spec.engine).program != "nccl-tests" or launch.nccl_tests_binary is not None:
        return launch
    binary = find_nccl_tests_binary(point.op, spec.nccl_tests_dir, mpi=options.launcher != "local")
    return dataclasses.replace(launch, nccl_tests_binary=str(binary))
