"""What one harness run measures (:class:`BenchSpec`) and what the mpi4py and torch harnesses share.

The shared parts: the settings captured from the environment, the rank-dependent check pattern and the
expected results of every collective, and the record built for one measured size.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Literal, get_args

import numpy as np

from collscope.collectives.measure import ELEM_SIZE, Dtype, MeasureSpec
from collscope.collectives.record import Measurement
from collscope.errors import ConfigError
from collscope.vocab.configs import is_launcher_variable, rail_of
from collscope.vocab.engines import ENGINE_ROWS, engine_row
from collscope.vocab.env_roles import env_role
from collscope.vocab.ops import HarnessOp, op_facts
from collscope.vocab.secrets import redact_env, redacted

__all__ = ["BenchSpec", "BenchOp", "BenchDtype", "BENCH_OPS", "BENCH_DTYPES", "ELEM_SIZE", "captured_settings",
           "rail_pinned",
           "captured_environment", "pattern", "reduce_rows", "wrapped", "expected_result", "count_wrong", "make_record"]

BenchOp = HarnessOp
"""The collectives the harnesses measure (the vocabulary's :data:`~collscope.vocab.ops.HarnessOp`)."""
BenchDtype = Dtype
Redop = Literal["sum", "max", "min"]
BENCH_OPS: tuple[str, ...] = tuple(dict.fromkeys(op for r in ENGINE_ROWS if r.program == "bench" for op in r.ops))
"""What ``collscope bench`` measures: the ops of the engines whose per-rank program it is (the engine table)."""
BENCH_DTYPES: tuple[str, ...] = tuple(dict.fromkeys(d for r in ENGINE_ROWS if r.program == "bench" for d in r.dtypes))
_NARROW = frozenset({"float16", "bfloat16", "int8", "uint8"})
_INT_RANGE = {"int8": (-(2**7), 2**8), "uint8": (0, 2**8), "int32": (-(2**31), 2**32), "int64": (-(2**63), 2**64)}
"""Integer dtypes: (lowest value, number of values)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchSpec(MeasureSpec):
    """One configuration measured over a ladder of sizes by the mpi4py or torch harness.

    The sizes, iterations, dtype and check are :class:`~collscope.collectives.measure.MeasureSpec`'s fields."""

    op: BenchOp
    """Collective: all_reduce, all_gather, reduce_scatter, alltoall or broadcast."""
    sizes: tuple[int, ...] | None = None
    """Explicit sizes measured instead of the ladder (adaptive sweeps); rounded like the ladder's sizes."""
    redop: Redop = "sum"
    """Reduction of all_reduce and reduce_scatter."""
    root: int = 0
    """Root rank of broadcast."""
    in_place: bool = False
    """Use the output buffer as input (MPI_IN_PLACE; torch views). Broadcast is always in place, and so is
    torch's all_reduce; the record says what ran."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where buffers live. ``cuda`` with MPI needs a CUDA-aware MPI library and torch."""
    cuda_graph: bool = False
    """torch + NCCL only: capture the batch of iterations in a CUDA graph and time its replay."""
    timeout_s: float = 300.0
    """Longest wait for rendezvous or one collective before the run fails (torch process-group timeout)."""

    def __post_init__(self) -> None:
        if self.op not in BENCH_OPS:
            raise ConfigError(f"unknown op {self.op!r}; valid: {', '.join(BENCH_OPS)}")
        if self.sizes is not None and (not self.sizes or any(s <= 0 for s in self.sizes)):
            raise ConfigError(f"sizes must be a non-empty list of sizes > 0 bytes (as min_bytes: a 0-byte "
                              f"collective measures nothing), got {list(self.sizes)}")
        self.check_measure()
        if self.redop not in get_args(Redop):
            raise ConfigError(f"unknown redop {self.redop!r}; valid: {', '.join(get_args(Redop))}")
        if self.device not in ("cpu", "cuda"):
            raise ConfigError(f"unknown device {self.device!r}; valid: cpu, cuda")
        if self.root < 0:
            raise ConfigError(f"root must be >= 0, got {self.root}")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {self.timeout_s}")
        if self.cuda_graph and self.device != "cuda":
            raise ConfigError("cuda_graph needs device 'cuda' (torch with the nccl backend)")

    @property
    def elem_size(self) -> int:
        return ELEM_SIZE[self.dtype]


def time_batch_ns(call: Callable[[], Any], barrier: Callable[[], Any], iters: int) -> int:
    """Host nanoseconds for ``iters`` back-to-back calls, started right after a barrier. Nothing else runs in
    the loop (the harness-overhead target depends on it): ``call`` is bound once by the caller."""
    clock = time.perf_counter_ns
    barrier()
    t0 = clock()
    for _ in repeat(None, iters):
        call()
    return clock() - t0


def captured_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of this process that choose a configuration: the tuning knobs of the registry
    (:data:`collscope.vocab.knobs.KNOBS`, not the site's plumbing such as ``NCCL_IB_HCA``) and the variables that
    select the algorithm (:func:`collscope.vocab.env_roles.env_role` ``selection``), secrets' values redacted.

    A run started by hand (``NCCL_ALGO=Tree collscope bench ...``) is named by these; everything else it inherited
    is :func:`captured_environment`. A sweep replaces both with what it knows: the settings its plan forced, and
    the rest of what the ranks saw (:mod:`collscope.sweeps.attempt`), so a site-wide ``OMPI_MCA_pml=ob1`` never
    names a configuration.
    """
    from collscope.vocab.knobs import KNOBS

    env = os.environ if env is None else env
    return {k: redacted(k, v) for k, v in sorted(env.items())
            if env_role(k) == "selection" or (k in KNOBS and env_role(k) == "tuning")}


def captured_environment(env: Mapping[str, str] | None = None, *, forced: Iterable[str] = ()) -> dict[str, str]:
    """What this process inherited that can shape a collective (a record's ``environment``): every variable with a
    role (:func:`collscope.vocab.env_roles.env_role`: selection, tuning or plumbing: ``NCCL_*``, ``OMPI_MCA_*``,
    ``GLOO_SOCKET_IFNAME`` ...), except the launcher's bookkeeping and internals
    (:func:`collscope.vocab.configs.is_launcher_variable`: ``OMPI_MCA_orte_*``, ``PMIX_*``, ``SLURM_*`` ...) and the
    names in ``forced`` (the point's own settings); secrets' values redacted."""
    env = os.environ if env is None else env
    skip = set(forced)
    return {k: redacted(k, v) for k, v in sorted(env.items())
            if k not in skip and env_role(k) is not None and not is_launcher_variable(k)}


def rail_pinned(engine: str, backend: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The rail this process's environment pins the engine to (a record's ``rail``): the value of the engine's
    rail variable (:data:`collscope.vocab.engines.ENGINE_ROWS`: ``OMPI_MCA_btl_tcp_if_include`` for mpi,
    ``GLOO_SOCKET_IFNAME`` for torch over gloo, ``NCCL_IB_HCA`` over NCCL); None when none is set. A sweep or
    locate replaces it with the rail its point pinned."""
    return rail_of(os.environ if env is None else env, engine_row(engine, backend).rail_variables)


def pattern(rank: int, n: int, dtype: str, offset: int = 0) -> np.ndarray:
    """Rank-dependent check values for elements ``offset .. offset+n`` as float64 holding small integers.

    Small integers stay exact in every dtype and under any summation order: values are below 4 for the
    narrow types and below 64 otherwise. An element's values cycle through the residues over the ranks, so its
    sum over ``n`` ranks is about ``1.5 * n`` (narrow types) and every partial sum is below it: exact in bfloat16
    (integers to 256) up to 169 ranks, in float16 (to 2048) beyond 1,300. Integer sums that leave the dtype's range
    wrap, and :func:`reduce_rows` given the dtype expects the wrapped value (int8 from 85 ranks, uint8 from 170).
    """
    modulus = 4 if dtype in _NARROW else 64
    i = np.arange(offset, offset + n, dtype=np.int64)
    return ((i * 3 + rank * 5 + 1) % modulus).astype(np.float64)


def reduce_rows(arrays: list[np.ndarray], redop: str, dtype: str | None = None) -> np.ndarray:
    """Element-wise ``redop`` (sum, max or min) over equal-length rows (float64 holding integers).

    With an integer ``dtype`` a sum is wrapped into the dtype's range, as the collective's own integer arithmetic
    wraps it (modulo 2**bits: NCCL, MPI and gloo add integers in the element type), so the expected value is
    the one a correct run leaves in the buffer whatever the number of ranks.
    """
    stack = np.stack(arrays)
    if redop == "sum":
        total = stack.sum(axis=0)
        return total if dtype is None else wrapped(total, dtype)
    return stack.max(axis=0) if redop == "max" else stack.min(axis=0)


def wrapped(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` (float64 integers) as an integer ``dtype``'s two's-complement arithmetic leaves them; floats
    and values already in range unchanged."""
    if dtype not in _INT_RANGE:
        return values
    lo, span = _INT_RANGE[dtype]
    if values.size == 0 or (values.min() >= lo and values.max() < lo + span):
        return values
    return (np.mod(values - lo, span) + lo).astype(np.float64)


def expected_result(op: str, *, rank: int, nranks: int, count: int, dtype: str, redop: str = "sum",
                    root: int = 0) -> np.ndarray:
    """What rank ``rank``'s output must hold when every rank's input is :func:`pattern` (float64).

    Inputs per op (``count`` is the call count of :func:`collscope.collectives.sizes.call_count`):
    all_reduce and broadcast ``pattern(rank, count)``; all_gather ``pattern(rank, count)`` into
    ``count*nranks``; reduce_scatter and alltoall ``pattern(rank, count*nranks)``, split in ``nranks`` blocks.
    """
    if op == "all_reduce":
        return reduce_rows([pattern(r, count, dtype) for r in range(nranks)], redop, dtype)
    if op == "broadcast":
        return pattern(root, count, dtype)
    if op == "all_gather":
        return np.concatenate([pattern(r, count, dtype) for r in range(nranks)])
    if op == "reduce_scatter":
        return reduce_rows([pattern(r, count, dtype, offset=rank * count) for r in range(nranks)], redop, dtype)
    if op == "alltoall":
        return np.concatenate([pattern(r, count, dtype, offset=rank * count) for r in range(nranks)])
    raise ConfigError(f"unknown op {op!r}; valid: {', '.join(BENCH_OPS)}")


def count_wrong(actual: np.ndarray, expected: np.ndarray) -> int:
    """Number of elements that differ (exact comparison after widening to float64)."""
    got = np.asarray(actual, dtype=np.float64).reshape(-1)
    if got.shape != expected.shape:
        return int(max(got.size, expected.size))
    return int(np.count_nonzero(got != expected))


def make_record(spec: BenchSpec, *, engine: str, backend: str, size_bytes: int, count: int, nranks: int,
                time_us: float, wrong: int | None, in_place: bool, hosts: tuple[str, ...],
                engine_version: str | None, nccl_version: str | None, settings: dict[str, str],
                source: str, extra: Mapping[str, Any] | None = None,
                environment: Mapping[str, str] | None = None, rail: str | None = None) -> Measurement:
    """The Measurement of one size (algbw/busbw from size and time, nccl-tests factors). ``time_us`` is the slowest
    rank's (``time_over_ranks="max"``); every rank is a process of its own (``process_shape`` ``Nx1x1``).
    ``settings`` (:func:`captured_settings`) and ``environment`` (:func:`captured_environment`) are written with
    secrets' values redacted, whoever built them. ``rail``: the interface or HCA the ranks were pinned to
    (:func:`rail_pinned`)."""
    facts = op_facts(spec.op)
    return Measurement.from_timing(
        op=spec.op, size_bytes=size_bytes, nranks=nranks, time_us=time_us, engine=engine, backend=backend,
        count=count, dtype=spec.dtype, redop=spec.redop if facts.reduces else None,
        root=spec.root if facts.rooted else None, in_place=in_place, nnodes=len(hosts) or None,
        wrong=wrong, ok=not wrong, iters=spec.iters, warmup=spec.warmup, settings=redact_env(settings), hosts=hosts,
        environment=None if environment is None else redact_env(environment), rail=rail,
        engine_version=engine_version, nccl_version=nccl_version, source=source,
        cluster=os.environ.get("SLURM_CLUSTER_NAME") or None, time_over_ranks="max", process_shape=f"{nranks}x1x1",
        timestamp=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), **dict(extra or {}))
