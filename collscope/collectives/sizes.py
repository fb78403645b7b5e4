"""The message-size ladder of a benchmark run, with nccl-tests' semantics.

nccl-tests walks ``size = min; size <= max; size *= factor`` (``-b``, ``-e``, ``-f``) and, for each size,
derives the element count the collective is called with. Here the same walk is done once, up front:

* every size is rounded **down** to whole elements of the dtype;
* for ``all_gather``, ``reduce_scatter`` and ``alltoall`` it is rounded down to a multiple of
  ``nranks * elem_size``, so each rank's share (all_gather input, reduce_scatter output, alltoall block) is a
  whole number of elements; the size is the total (all_gather: gathered output; reduce_scatter: input), as
  in nccl-tests' "size" column;
* sizes that round to 0 are dropped, and a size equal to the previous one is not repeated;
* ``factor`` may be fractional (> 1); a step that would not grow the size grows it by one byte.

:func:`call_count` gives nccl-tests' "count" column: the count argument of the call, per rank for
all_gather/reduce_scatter and per peer for alltoall.
"""

from __future__ import annotations

from collscope.errors import ConfigError
from collscope.vocab.ops import SPLIT_OPS

__all__ = ["size_ladder", "size_list", "call_count", "SPLIT_OPS"]

"""Collectives whose total size is split evenly across ranks."""


def size_ladder(min_bytes: int, max_bytes: int, factor: float, *, elem_size: int, op: str, nranks: int) -> list[int]:
    """Sizes in bytes, from ``min_bytes`` up to ``max_bytes`` by ``factor``, rounded as the module doc says.

    Raises ConfigError for a bad range or factor, or when no size is left after rounding (the message names
    the smallest size that would work).
    """
    if min_bytes < 0 or max_bytes < 0:
        raise ConfigError(f"sizes must be >= 0, got min {min_bytes}, max {max_bytes}")
    if min_bytes > max_bytes:
        raise ConfigError(f"min size {min_bytes} is above max size {max_bytes}")
    if not factor > 1:
        raise ConfigError(f"size factor must be > 1, got {factor}")
    if elem_size < 1 or nranks < 1:
        raise ConfigError(f"element size and rank count must be >= 1, got {elem_size}, {nranks}")
    quantum = elem_size * (nranks if op in SPLIT_OPS else 1)
    sizes: list[int] = []
    raw = min_bytes
    while raw <= max_bytes:
        size = raw // quantum * quantum
        if size > 0 and (not sizes or sizes[-1] != size):
            sizes.append(size)
        nxt = int(raw * factor)
        raw = nxt if nxt > raw else raw + 1
    if not sizes:
        raise ConfigError(f"no size in {min_bytes}..{max_bytes} bytes holds a whole element per rank for {op} "
                          f"({nranks} ranks x {elem_size} bytes); use --max-bytes {quantum} or more")
    return sizes


def size_list(sizes: tuple[int, ...] | list[int], *, elem_size: int, op: str, nranks: int) -> list[int]:
    """Explicit sizes (``collscope bench --sizes``, adaptive sweeps) rounded as the ladder rounds them, sorted,
    without repeats; ConfigError for a negative size or when none is left."""
    if not sizes or any(s < 0 for s in sizes):
        raise ConfigError(f"sizes must be a non-empty list of sizes >= 0, got {list(sizes)}")
    if elem_size < 1 or nranks < 1:
        raise ConfigError(f"element size and rank count must be >= 1, got {elem_size}, {nranks}")
    quantum = elem_size * (nranks if op in SPLIT_OPS else 1)
    out = sorted({s // quantum * quantum for s in sizes} - {0})
    if not out:
        raise ConfigError(f"no size in {list(sizes)} holds a whole element per rank for {op} "
                          f"({nranks} ranks x {elem_size} bytes); use sizes of {quantum} bytes or more")
    return out


def call_count(op: str, size_bytes: int, *, elem_size: int, nranks: int) -> int:
    """The count argument of the call for a ladder size (nccl-tests' "count" column)."""
    elems = size_bytes // elem_size
    return elems // nranks if op in SPLIT_OPS else elems
