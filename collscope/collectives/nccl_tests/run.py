"""Run NVIDIA nccl-tests (``all_reduce_perf`` ...): binary lookup, run -> records.

Three steps, as for every external tool: :func:`~collscope.collectives.nccl_tests.spec.nccl_tests_argv` builds
the command line from an :class:`NcclTestsSpec` (pure, golden-tested; re-exported here), :mod:`collscope.proc`
runs it, and :func:`~collscope.collectives.nccl_tests.parse.parse_nccl_tests` turns the output into records.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import msgspec

from collscope import proc
from collscope.collectives.nccl_tests.parse import parse_nccl_tests
from collscope.collectives.nccl_tests.records import NcclTestsRun
from collscope.collectives.nccl_tests.spec import (
    NCCL_TESTS_DTYPES,
    NCCL_TESTS_REDOPS,
    NcclTestsOp,
    NcclTestsSpec,
    binary_name,
    nccl_tests_argv,
)
from collscope.collectives.record import Measurement, Settings
from collscope.collectives.spec import captured_environment, captured_settings
from collscope.errors import ConfigError, ParseError, ToolMissingError

__all__ = ["NcclTestsSpec", "NcclTestsOp", "NcclTestsExecution", "nccl_tests_argv", "find_nccl_tests_binary",
           "run_nccl_tests", "binary_name", "NCCL_TESTS_DTYPES", "NCCL_TESTS_REDOPS", "BUILD_HINT"]

log = logging.getLogger(__name__)

BUILD_HINT = ("build nccl-tests: git clone https://github.com/NVIDIA/nccl-tests && cd nccl-tests && "
              "make MPI=1 MPI_HOME=/path/to/mpi CUDA_HOME=/path/to/cuda NCCL_HOME=/path/to/nccl "
              "(MPI=1 is needed for more than one process, hence for multi-node runs), then pass "
              "--nccl-tests-dir nccl-tests/build or set NCCL_TESTS_HOME")


def find_nccl_tests_binary(op: str, nccl_tests_dir: str | os.PathLike[str] | None = None, mpi: bool = False, *,
                           env: Mapping[str, str] | None = None) -> Path:
    """Where ``<op>_perf`` (or ``<op>_perf_mpi``) is: ``nccl_tests_dir`` (and its ``build/``), else
    ``$NCCL_TESTS_HOME`` (and its ``build/``), else PATH. Raises ToolMissingError saying how to build it.

    Without ``mpi`` both names are accepted, the plain one first; with ``mpi`` the ``_mpi`` name first.
    """
    env = os.environ if env is None else env
    names = [binary_name(op, True), binary_name(op)] if mpi else [binary_name(op), binary_name(op, True)]
    if nccl_tests_dir is not None:
        dirs = [Path(nccl_tests_dir)]
        where = f"--nccl-tests-dir {nccl_tests_dir}"
    elif env.get("NCCL_TESTS_HOME"):
        dirs = [Path(env["NCCL_TESTS_HOME"])]
        where = f"NCCL_TESTS_HOME={env['NCCL_TESTS_HOME']}"
    else:
        dirs = []
        where = "PATH"
    for base in dirs:
        for folder in (base, base / "build"):
            for name in names:
                candidate = folder / name
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return candidate
    if not dirs:
        for name in names:
            found = shutil.which(name, path=env.get("PATH", os.defpath))
            if found:
                return Path(found)
    raise ToolMissingError(names[0], f"looked in {where}{' (and build/)' if dirs else ''}; {BUILD_HINT}")


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsExecution:
    """What running nccl-tests gave: the parsed run (whatever it printed before failing) and how it ended."""

    argv: tuple[str, ...]
    run: NcclTestsRun | None
    """None only when the output held nothing parseable (the binary failed before its header)."""
    returncode: int | None
    timed_out: bool
    duration_s: float
    failure: str | None
    """Why the run is not a clean success: ``timeout after 60 s``, ``exit code 1``, ``wrong values``, a parse
    error; None when it succeeded."""
    output_tail: str
    """The end of stdout and stderr, for logs and failure reports."""

    @property
    def records(self) -> tuple[Measurement, ...]:
        return self.run.records if self.run is not None else ()

    @property
    def ok(self) -> bool:
        return self.failure is None


def run_nccl_tests(spec: NcclTestsSpec, *, nccl_tests_dir: str | os.PathLike[str] | None = None,
                   launcher: Sequence[str] = (), timeout_s: float = 3600.0, extra_env: Mapping[str, str] | None = None,
                   env: Mapping[str, str] | None = None, nranks: int | None = None) -> NcclTestsExecution:
    """Run one nccl-tests binary and parse what it printed.

    ``launcher`` is prepended (``["mpirun", "-np", "16", ...]``). The process gets ``timeout_s`` seconds;
    unless the spec sets its own ``timeout_s`` nccl-tests is also given ``-T`` (the same budget, so a hung
    collective aborts inside nccl-tests first and says which). A timeout, a non-zero exit or reported wrong
    values never lose the rows printed before: they are parsed and returned with ``failure`` set.
    """
    if spec.run_cycles == 0:
        raise ConfigError("nccl-tests run_cycles=0 runs forever; valid here: 1 or more")
    if timeout_s <= 0:
        raise ConfigError(f"timeout_s={timeout_s!r} is invalid; valid: a positive number of seconds")
    if spec.timeout_s is None:
        spec = replace(spec, timeout_s=max(1, int(timeout_s)))
    lookup_env = dict(os.environ if env is None else env)
    lookup_env.update(extra_env or {})
    binary = find_nccl_tests_binary(spec.op, nccl_tests_dir, spec.mpi, env=lookup_env)
    argv = [*launcher, *nccl_tests_argv(spec, str(binary))]
    log.info("running %s", " ".join(argv))
    result = proc.run(argv, timeout_s=timeout_s, env=env, extra_env=extra_env, install_hint=BUILD_HINT,
                      kill_on_parent_death=True)  # every rank ends with the run (collscope._reaper)
    tail = (result.stdout[-4000:] + ("\n" + result.stderr[-4000:] if result.stderr else "")).strip()
    failure: str | None = None
    if result.timed_out:
        failure = f"timeout after {timeout_s:g} s"
    elif result.returncode != 0:
        failure = f"exit code {result.returncode}"
    run: NcclTestsRun | None = None
    try:
        run = parse_nccl_tests(result.stdout, source=" ".join(argv), op=spec.op, nranks=nranks, env=lookup_env,
                               argv=argv)
    except ParseError as exc:
        failure = f"{failure}; {exc}" if failure else f"unparseable output: {exc}"
    if run is not None:  # the run's own environment names its configuration, as the harnesses' records do
        settings = captured_settings(lookup_env)
        environment = captured_environment(lookup_env, forced=settings)
        run = replace(run, records=tuple(msgspec.structs.replace(r, settings=Settings(settings),
                                                                 environment=Settings(environment))
                                         for r in run.records))
    if run is not None and failure is None:
        if run.failed:
            failure = "wrong values" if (run.oob_failed or any(not r.ok for r in run.records)) else \
                "; ".join(run.errors) or "bandwidth below NCCL_TESTS_MIN_BW"
        elif not run.complete:
            failure = "output ends before the summary"
    if failure:
        log.warning("nccl-tests %s: %s (%d records kept)", spec.op, failure, len(run.records) if run else 0)
    return NcclTestsExecution(argv=tuple(argv), run=run, returncode=result.returncode, timed_out=result.timed_out,
                              duration_s=result.duration_s, failure=failure, output_tail=tail)

