"""Run NVIDIA nccl-tests (``all_reduce_perf`` ...): spec -> argv, binary lookup, run -> records.

Three steps, as for every external tool: :func:`nccl_tests_argv` builds the command line from an
:class:`NcclTestsSpec` (pure, golden-tested), :mod:`collscope.proc` runs it, and
:func:`~.nccl_tests_parse.parse_nccl_tests` turns the output into records. Flags and their valid values:
nccl-tests v2.19.6 README and ``src/common.cu`` (``shared/reference/nccl-facts.md`` section 4.2).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, get_args

from collscope import proc
from collscope.collectives.nccl_tests.parse import parse_nccl_tests
from collscope.collectives.nccl_tests.records import NcclTestsRun
from collscope.collectives.record import Measurement
from collscope.errors import ConfigError, ParseError, ToolMissingError
from collscope.vocab.ops import Op

__all__ = ["NcclTestsSpec", "NcclTestsOp", "NcclTestsExecution", "nccl_tests_argv", "find_nccl_tests_binary",
           "run_nccl_tests", "binary_name", "NCCL_TESTS_DTYPES", "NCCL_TESTS_REDOPS", "BUILD_HINT"]

log = logging.getLogger(__name__)

NcclTestsOp = Op
"""The collectives nccl-tests builds a ``<op>_perf`` binary for (``src/*.cu``): every op of the vocabulary."""

# src/common.cu test_typenames (NCCL >= 2.10; bfloat16 and fp8 where the headers have them) and "all".
NCCL_TESTS_DTYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
                     "f8e4m3", "f8e5m2", "all")
# src/common.cu test_opnames and "all" (mulsum: ncclRedOpCreatePreMulSum, NCCL >= 2.11).
NCCL_TESTS_REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum", "all")

BUILD_HINT = ("build nccl-tests: git clone https://github.com/NVIDIA/nccl-tests && cd nccl-tests && "
              "make MPI=1 MPI_HOME=/path/to/mpi CUDA_HOME=/path/to/cuda NCCL_HOME=/path/to/nccl "
              "(MPI=1 is needed for more than one process, hence for multi-node runs), then pass "
              "--nccl-tests-dir nccl-tests/build or set NCCL_TESTS_HOME")


def _check_int(name: str, value: object, lo: int, hi: int | None = None, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < lo or (hi is not None and value > hi):
        valid = f"an integer >= {lo}" if hi is None else f"an integer {lo}..{hi}"
        raise ConfigError(f"nccl-tests {name}={value!r} is invalid; valid: {valid}")


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsSpec:
    """One nccl-tests invocation. ``None`` leaves a flag out, so nccl-tests' own default applies."""

    op: NcclTestsOp = "all_reduce"
    """Which binary: ``<op>_perf``."""
    min_bytes: int | None = None
    """``-b``: smallest size in bytes (nccl-tests default 32M)."""
    max_bytes: int | None = None
    """``-e``: largest size in bytes (default 32M)."""
    step_factor: int | None = None
    """``-f``: multiply the size by this each step (>= 2). Exclusive with ``step_bytes``."""
    step_bytes: int | None = None
    """``-i``: add this many bytes each step. Exclusive with ``step_factor``."""
    iters: int | None = None
    """``-n``: timed iterations per size (default 20)."""
    warmup_iters: int | None = None
    """``-w``: untimed warm-up iterations (default 1 since v2.16.8, 5 before)."""
    agg_iters: int | None = None
    """``-m``: operations aggregated in one group per iteration (default 1)."""
    check_iters: int | None = None
    """``-c``: correctness-check iterations; 0 disables the check (``#wrong`` prints N/A). Default 1."""
    nthreads: int | None = None
    """``-t``: threads per process (default 1)."""
    ngpus: int | None = None
    """``-g``: GPUs per thread (default 1). Ranks = processes x threads x GPUs."""
    average: Literal[0, 1, 2, 3] | None = None
    """``-a``: how the MPI ranks' times are combined: 0 rank 0, 1 average (default), 2 min, 3 max."""
    blocking: Literal[0, 1, 2, 3] | None = None
    """``-z``: 0 non-blocking (default); 1 wait and barrier per inner iteration; 2 wait, no barrier; 3 wait and
    barrier per outer iteration, barrier excluded from the time (v2.19)."""
    cudagraph_launches: int | None = None
    """``-G``: capture the iterations in a CUDA graph and replay it this many times (0: off)."""
    timeout_s: int | None = None
    """``-T``: nccl-tests aborts a size after this many seconds (0: disabled)."""
    json_output: str | None = None
    """``-J``: also write the JSON results to this path (must end in ``.json``; nccl-tests >= 2.17.3)."""
    run_cycles: int | None = None
    """``-N``: repeat the whole sweep this many times (0: forever, refused by run_nccl_tests)."""
    dtype: str | None = None
    """``-d``: one of NCCL_TESTS_DTYPES (``all`` runs every type). nccl-tests silently falls back to float on a
    name it does not know, so the name is checked here."""
    redop: str | None = None
    """``-o``: one of NCCL_TESTS_REDOPS (``all`` runs every operation)."""
    root: int | Literal["all"] | None = None
    """``-r``: root rank of broadcast/reduce; ``"all"`` (``-r -1``) runs every root."""
    local_register: Literal[0, 1, 2] | None = None
    """``-R``: 0 none, 1 local buffer registration (NCCL >= 2.19), 2 symmetric (NCCL >= 2.27)."""
    report_cputime: bool | None = None
    """``-C 1``: report CPU time per op instead of latency (the column becomes ``cputime``)."""
    mpi: bool = False
    """Use the ``<op>_perf_mpi`` binary name (builds made with ``NAME_SUFFIX=_mpi``)."""

    def __post_init__(self) -> None:
        ops = get_args(NcclTestsOp)
        if self.op not in ops:
            raise ConfigError(f"nccl-tests op={self.op!r} is invalid; valid: {', '.join(ops)}")
        for name in ("min_bytes", "max_bytes", "warmup_iters", "check_iters", "cudagraph_launches", "timeout_s",
                     "run_cycles"):
            _check_int(name, getattr(self, name), 0)
        for name in ("iters", "agg_iters", "nthreads", "ngpus", "step_bytes"):
            _check_int(name, getattr(self, name), 1)
        _check_int("step_factor", self.step_factor, 2)
        _check_int("average", self.average, 0, 3)
        _check_int("blocking", self.blocking, 0, 3)
        _check_int("local_register", self.local_register, 0, 2)
        if self.step_factor is not None and self.step_bytes is not None:
            raise ConfigError("nccl-tests step_factor (-f) and step_bytes (-i) are mutually exclusive; set one")
        if self.min_bytes is not None and self.max_bytes is not None and self.min_bytes > self.max_bytes:
            raise ConfigError(f"nccl-tests min_bytes={self.min_bytes} is larger than max_bytes={self.max_bytes}")
        if self.dtype is not None and self.dtype not in NCCL_TESTS_DTYPES:
            raise ConfigError(f"nccl-tests dtype={self.dtype!r} is invalid; valid: {', '.join(NCCL_TESTS_DTYPES)}")
        if self.redop is not None and self.redop not in NCCL_TESTS_REDOPS:
            raise ConfigError(f"nccl-tests redop={self.redop!r} is invalid; valid: {', '.join(NCCL_TESTS_REDOPS)}")
        if self.root is not None and self.root != "all":
            _check_int("root", self.root, 0)
        if self.report_cputime is not None and not isinstance(self.report_cputime, bool):
            raise ConfigError(f"nccl-tests report_cputime={self.report_cputime!r} is invalid; valid: True, False")
        if self.json_output is not None and (not isinstance(self.json_output, str)
                                             or not self.json_output.lower().endswith(".json")):
            raise ConfigError(f"nccl-tests json_output={self.json_output!r} is invalid; valid: a path ending in "
                              ".json (nccl-tests infers the format from the suffix)")
        if self.cudagraph_launches and self.blocking == 3:
            raise ConfigError("nccl-tests blocking=3 is incompatible with cudagraph_launches (-G); valid: "
                              "blocking 0, 1 or 2 with CUDA graphs")


def binary_name(op: str, mpi: bool = False) -> str:
    """``all_reduce`` -> ``all_reduce_perf`` (``all_reduce_perf_mpi`` with mpi)."""
    return f"{op}_perf{'_mpi' if mpi else ''}"


_FLAGS = (("min_bytes", "-b"), ("max_bytes", "-e"), ("step_factor", "-f"), ("step_bytes", "-i"), ("iters", "-n"),
          ("warmup_iters", "-w"), ("agg_iters", "-m"), ("check_iters", "-c"), ("nthreads", "-t"), ("ngpus", "-g"),
          ("average", "-a"), ("blocking", "-z"), ("cudagraph_launches", "-G"), ("timeout_s", "-T"),
          ("json_output", "-J"), ("run_cycles", "-N"), ("dtype", "-d"), ("redop", "-o"), ("root", "-r"),
          ("local_register", "-R"), ("report_cputime", "-C"))


def nccl_tests_argv(spec: NcclTestsSpec, binary: str | None = None) -> list[str]:
    """The command line for ``spec``: ``[binary, flag, value, ...]`` in a fixed order, sizes in plain bytes.

    ``binary`` defaults to the bare ``<op>_perf`` name; :func:`run_nccl_tests` passes the path it found.
    """
    argv = [binary if binary is not None else binary_name(spec.op, spec.mpi)]
    for name, flag in _FLAGS:
        value = getattr(spec, name)
        if value is None:
            continue
        if isinstance(value, bool):
            value = int(value)
        elif name == "root" and value == "all":
            value = -1
        argv += [flag, str(value)]
    return argv


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
    result = proc.run(argv, timeout_s=timeout_s, env=env, extra_env=extra_env, install_hint=BUILD_HINT)
    tail = (result.stdout[-4000:] + ("\n" + result.stderr[-4000:] if result.stderr else "")).strip()
    failure: str | None = None
    if result.timed_out:
        failure = f"timeout after {timeout_s:g} s"
    elif result.returncode != 0:
        failure = f"exit code {result.returncode}"
    run: NcclTestsRun | None = None
    try:
        run = parse_nccl_tests(result.stdout, source=" ".join(argv), op=spec.op, nranks=nranks)
    except ParseError as exc:
        failure = f"{failure}; {exc}" if failure else f"unparseable output: {exc}"
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

