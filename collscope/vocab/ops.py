"""The collectives collscope knows, by collscope's names, and nccl-tests' busbw factors.

Every layer names a collective the same way (``all_reduce``, ``all_gather``, ...); the engines, the NCCL
vocabulary and the models map from these names, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["OPS", "SPLIT_OPS", "busbw_factor"]

OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv",
                        "gather", "scatter", "hypercube")
"""Every collective a Measurement may name (nccl-tests' binaries, the harnesses, the traces)."""

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
