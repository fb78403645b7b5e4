"""The collectives collscope knows, by collscope's names, nccl-tests' busbw factors, and the element types.

Every layer names a collective the same way (``all_reduce``, ``all_gather``, ...); the engines, the NCCL
vocabulary and the models map from these names, never the other way round. Element types likewise: a record's
``dtype`` is collscope's name (:data:`DTYPES`: ``float32``, as torch names it), whichever engine measured it;
:data:`DTYPE_TABLE` maps nccl-tests' names (``float``, ``half``, and the pre-2.10 ``char``/``int``) to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple, get_args

__all__ = ["Op", "OPS", "HarnessOp", "HARNESS_OPS", "SweepOp", "SWEEP_OPS", "SPLIT_OPS", "busbw_factor",
           "DtypeName", "DTYPE_TABLE", "DTYPE_NAMES", "DTYPE_ALIASES", "canonical_dtype", "NCCL_TESTS_TYPE_BYTES",
           "ELEM_BYTES", "DTYPE_SPELLINGS",
           "SPLIT_GRANULE_BYTES"]

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv", "gather",
             "scatter", "hypercube"]
"""Every collective a Measurement may name: nccl-tests builds a ``<op>_perf`` binary for each (``src/*.cu``)."""
OPS: tuple[str, ...] = get_args(Op)
"""The names of :data:`Op`, in nccl-tests' order."""

HarnessOp = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"]
"""The collectives the mpi4py and torch harnesses (``collscope bench``) measure."""
HARNESS_OPS: tuple[str, ...] = get_args(HarnessOp)

SweepOp = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce"]
"""The collectives a sweep may name: the harnesses' and nccl-tests' ``reduce`` (which engine runs which op is
checked when a point is launched)."""
SWEEP_OPS: tuple[str, ...] = get_args(SweepOp)

# Each narrower list is a part of OPS, in OPS' order: checked once, when the vocabulary is imported.
for _part in (HARNESS_OPS, SWEEP_OPS):
    if tuple(o for o in OPS if o in _part) != _part:
        raise AssertionError(f"{_part} is not an ordered part of OPS {OPS}")

SPLIT_OPS = frozenset({"all_gather", "reduce_scatter", "alltoall"})
"""Collectives whose nccl-tests "size" is the total over ranks, each rank holding size / nranks."""

SPLIT_GRANULE_BYTES = 16
"""nccl-tests rounds each rank's share of a split op down to a multiple of 16 bytes (``(count/nranks) &
~(16/eltSize - 1)`` in ``src/all_gather.cu``, ``reduce_scatter.cu``, ``alltoall.cu``): sizes are multiples of
16 x nranks bytes, and a size below that is a size-0 row."""


class DtypeName(NamedTuple):
    """One element type: collscope's name (the one records carry), its width, and nccl-tests' names."""

    name: str
    """collscope's name, as torch names the type (``float32``, ``bfloat16``)."""
    elem_bytes: int
    nccl_tests: str | None
    """nccl-tests' ``-d`` name and "type" column (``src/common.cu`` test_typenames); None: nccl-tests has none."""
    nccl_tests_old: tuple[str, ...] = ()
    """Names of the same type in nccl-tests built against NCCL < 2.10 (``char``, ``int``)."""
    trace_names: tuple[str, ...] = ()
    """Other spellings traces use (matched without case): PyTorch profiler / Flight Recorder ``c10::`` and C type
    names, NCCL's ``ncclDataType_t`` names (``ncclFloat32``) as NCCL Inspector writes them."""


DTYPE_TABLE: tuple[DtypeName, ...] = (
    DtypeName("int8", 1, "int8", ("char",), ("signed char", "ncclInt8")),
    DtypeName("uint8", 1, "uint8", (), ("byte", "unsigned char", "ncclUint8")),
    DtypeName("int16", 2, None, (), ("short",)),
    DtypeName("int32", 4, "int32", ("int",), ("ncclInt32",)),
    DtypeName("uint32", 4, "uint32"),
    DtypeName("int64", 8, "int64", (), ("long", "long int", "ncclInt64")),
    DtypeName("uint64", 8, "uint64"),
    DtypeName("float16", 2, "half", (), ("c10::Half", "ncclFloat16", "ncclHalf")),
    DtypeName("float32", 4, "float", (), ("c10::float", "ncclFloat32", "ncclFloat")),
    DtypeName("float64", 8, "double", (), ("ncclFloat64",)),
    DtypeName("bfloat16", 2, "bfloat16", (), ("c10::BFloat16", "ncclBfloat16")),
    DtypeName("float8_e4m3fn", 1, "f8e4m3", (), ("c10::Float8_e4m3fn",)),
    DtypeName("float8_e5m2", 1, "f8e5m2", (), ("c10::Float8_e5m2",)),
    DtypeName("bool", 1, None),
)
"""Every element type a record may name, once (the harnesses' ``--dtype`` names are a part of it)."""
DTYPE_NAMES: tuple[str, ...] = tuple(d.name for d in DTYPE_TABLE)

DTYPE_ALIASES: dict[str, str] = {d.name: d.name for d in DTYPE_TABLE}
"""Every name of an element type (collscope's, nccl-tests' current and old) -> collscope's name."""
for _d in DTYPE_TABLE:
    for _alias in (_d.nccl_tests, *_d.nccl_tests_old):
        if _alias is not None:
            DTYPE_ALIASES[_alias] = _d.name
NCCL_TESTS_TYPE_BYTES: dict[str, int] = {alias: d.elem_bytes for d in DTYPE_TABLE
                                         for alias in (d.nccl_tests, *d.nccl_tests_old) if alias is not None}
"""nccl-tests' type names (current and pre-2.10) -> bytes per element: what its "type" column may hold."""
ELEM_BYTES: dict[str, int] = {d.name: d.elem_bytes for d in DTYPE_TABLE}
"""collscope's element type name -> bytes per element."""
DTYPE_SPELLINGS: dict[str, str] = {name.lower(): d.name for d in DTYPE_TABLE
                                   for name in (d.name, d.nccl_tests, *d.nccl_tests_old, *d.trace_names) if name}
"""Every spelling of an element type, lower case (traces: ``c10::BFloat16``, ``ncclFloat32``, ``float``) ->
collscope's name; records and nccl-tests tables use :data:`DTYPE_ALIASES`, which is exact."""


def canonical_dtype(name: str) -> str:
    """collscope's name of an element type named by any engine (``float`` -> ``float32``); ValueError naming the
    known names when it is none of them."""
    try:
        return DTYPE_ALIASES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown element type {name!r}; known: {', '.join(DTYPE_ALIASES)}") from None

# nccl-tests doc/PERFORMANCE.md and the *GetBw functions (nccl-facts.md section 4.1).
_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "hypercube": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def busbw_factor(op: str, nranks: int) -> float:
    """busbw = algbw x factor; the factor assumes point-to-point algorithms (not NVLS/CollNet wire rates)."""
    if op not in _FACTORS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(_FACTORS)}")
    if nranks < 1:
        raise ValueError(f"nranks must be >= 1, got {nranks}")
    return float(_FACTORS[op](nranks))
