"""The collectives collscope knows, by collscope's names, and nccl-tests' busbw factors.

Every layer names a collective the same way (``all_reduce``, ``all_gather``, ...); the engines, the NCCL
vocabulary and the models map from these names, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

__all__ = ["Op", "OPS", "HarnessOp", "HARNESS_OPS", "SweepOp", "SWEEP_OPS", "SPLIT_OPS", "busbw_factor"]

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
