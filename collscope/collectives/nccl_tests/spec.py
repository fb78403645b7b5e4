"""What one nccl-tests invocation is (:class:`NcclTestsSpec`) and its command line (:func:`nccl_tests_argv`).

Pure: no lookup, no subprocess. :func:`nccl_tests_spec_for_ladder` is the one translation of collscope's own
measurement terms (a size ladder, iterations, check, a ``collscope bench`` dtype name) into nccl-tests flags;
``collscope bench --engine nccl-tests`` and the sweep launchers both use it. Flags and their valid values:
nccl-tests v2.19.6 README and ``src/common.cu`` (``shared/reference/nccl-facts.md`` section 4.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from collscope.collectives.sizes import first_ladder_size
from collscope.errors import ConfigError
from collscope.vocab.ops import DTYPE_TABLE, OPS, Op, op_facts

if TYPE_CHECKING:
    from collscope.collectives.spec import BenchSpec

__all__ = ["NcclTestsSpec", "NcclTestsOp", "nccl_tests_argv", "binary_name", "nccl_tests_spec_for_ladder",
           "nccl_tests_spec_for_bench", "NCCL_TESTS_DTYPES", "NCCL_TESTS_REDOPS", "BENCH_TO_NCCL_TESTS_DTYPE",
           "COLLSCOPE_AVERAGE"]

NcclTestsOp = Op
"""The collectives nccl-tests builds a ``<op>_perf`` binary for (``src/*.cu``): every op of the vocabulary."""

# src/common.cu test_typenames (NCCL >= 2.10; bfloat16 and fp8 where the headers have them) and "all".
NCCL_TESTS_DTYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
                     "f8e4m3", "f8e5m2", "all")
# src/common.cu test_opnames and "all" (mulsum: ncclRedOpCreatePreMulSum, NCCL >= 2.11).
NCCL_TESTS_REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum", "all")

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
        ops = OPS
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
    return f"{op_facts(op).nccl_tests_binary}{'_mpi' if mpi else ''}"


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


BENCH_TO_NCCL_TESTS_DTYPE = {d.name: d.nccl_tests for d in DTYPE_TABLE if d.nccl_tests is not None}
"""collscope's element type names (``collscope bench --dtype``, the records' ``dtype``) -> nccl-tests ``-d``
names, from :data:`collscope.vocab.ops.DTYPE_TABLE` (names nccl-tests already knows pass through)."""

COLLSCOPE_AVERAGE: Literal[3] = 3
"""The ``-a`` of every nccl-tests run collscope starts: the maximum over ranks, as collscope's harnesses report
(nccl-tests' default ``-a 1`` is the mean, which reads faster than the slowest rank whenever ranks differ)."""


def nccl_tests_spec_for_ladder(*, op: str, min_bytes: int, max_bytes: int, factor: float, iters: int, warmup: int,
                               check: bool, dtype: str, redop: str | None = None, root: int | None = None,
                               cuda_graph: bool = False, ngpus: int | None = None,
                               timeout_s: float | None = None, nranks: int | None = None) -> NcclTestsSpec:
    """The nccl-tests invocation measuring a collscope size ladder: ``-b/-e/-f``, ``-n``, ``-w``, ``-c``, ``-d``,
    and ``-a 3`` (:data:`COLLSCOPE_AVERAGE`: times are the maximum over ranks, as the harnesses report them).

    ``factor`` must be a whole number (nccl-tests' ``-f`` is an integer); ``dtype`` is a ``collscope bench``
    name (``float32``) or an nccl-tests one (``float``); ``check`` becomes ``-c 1`` / ``-c 0``; ``cuda_graph``
    ``-G 1``; ``timeout_s`` (``-T``) is rounded down to whole seconds, at least 1. ``None`` leaves a flag out.
    With ``nranks`` (the ranks of the launch) a split op (all_gather, reduce_scatter, alltoall) starts at the
    first ladder size that gives every rank data (:func:`~collscope.collectives.sizes.first_ladder_size`: 8 B
    on 8 ranks becomes ``-b 128`` with ``-f 2``): nccl-tests rounds each rank's share down to 16 bytes and would
    print the smaller sizes as size-0 rows. Raises ConfigError naming the bad value and the valid ones.
    """
    if factor != int(factor):
        raise ConfigError(f"factor={factor:g} is invalid for engine nccl-tests, which takes a whole size factor "
                          "(-f); valid: a whole number >= 2")
    nccl_dtype = BENCH_TO_NCCL_TESTS_DTYPE.get(dtype, dtype)
    if nccl_dtype not in NCCL_TESTS_DTYPES:
        raise ConfigError(f"dtype={dtype!r} is invalid for engine nccl-tests; valid: "
                          f"{', '.join([*BENCH_TO_NCCL_TESTS_DTYPE, *NCCL_TESTS_DTYPES])}")
    if nranks is not None:
        min_bytes = first_ladder_size(min_bytes, max_bytes, factor, op=op, nranks=nranks)
    return NcclTestsSpec(op=op, min_bytes=min_bytes, max_bytes=max_bytes,  # type: ignore[arg-type]
                         step_factor=int(factor), iters=iters, warmup_iters=warmup, check_iters=1 if check else 0,
                         ngpus=ngpus, average=COLLSCOPE_AVERAGE,
                         timeout_s=None if timeout_s is None else max(1, int(timeout_s)),
                         dtype=nccl_dtype, redop=redop, root=root, cudagraph_launches=1 if cuda_graph else None)


def nccl_tests_spec_for_bench(spec: BenchSpec, nranks: int | None = None) -> NcclTestsSpec:
    """What ``collscope bench --engine nccl-tests`` runs for ``spec``: its ladder, reduction, root and CUDA graph;
    with ``nranks`` (processes x GPUs per process) a split op starts where every rank holds data, as in a sweep.

    nccl-tests measures a ladder only, so a spec listing explicit ``sizes`` is a ConfigError.
    """
    if spec.sizes is not None:
        raise ConfigError(f"sizes={list(spec.sizes)} is invalid for engine nccl-tests; valid: a ladder "
                          "(min_bytes, max_bytes, factor)")
    return nccl_tests_spec_for_ladder(op=spec.op, min_bytes=spec.min_bytes, max_bytes=spec.max_bytes,
                                      factor=spec.factor, iters=spec.iters, warmup=spec.warmup, check=spec.check,
                                      dtype=spec.dtype, redop=spec.redop, root=spec.root,
                                      cuda_graph=spec.cuda_graph, nranks=nranks)
