"""The message-size ladder of a benchmark run, with nccl-tests' semantics.

nccl-tests walks ``size = min; size <= max; size *= factor`` (``-b``, ``-e``, ``-f``) and, for each size,
derives the element count the collective is called with. Here the same walk is done once, up front:

* every size is rounded **down** to whole elements of the dtype;
* for ``all_gather``, ``reduce_scatter`` and ``alltoall`` it is rounded down as nccl-tests rounds it: each
  rank's share (all_gather input, reduce_scatter output, alltoall block) down to a multiple of 16 bytes
  (``(count/nranks) & ~(16/eltSize - 1)``, nccl-tests ``src/all_gather.cu``, ``reduce_scatter.cu``,
  ``alltoall.cu``), so sizes are multiples of ``16 * nranks`` bytes; the size is the total (all_gather:
  gathered output; reduce_scatter: input), as in nccl-tests' "size" column;
* sizes that round to 0 are dropped (nccl-tests prints them as size-0 rows), and a size equal to the previous
  one is not repeated (nccl-tests prints it again);
* ``factor`` may be fractional (> 1); a step that would not grow the size grows it by one byte.

So for the same ``-b``/``-e``/``-f``, dtype and ranks the harnesses measure exactly the sizes nccl-tests
prints, less its size-0 rows and repeats. :func:`first_ladder_size` is where a ladder's split ops start to
hold data (nccl-tests is then given that ``-b``).

:func:`call_count` gives nccl-tests' "count" column: the count argument of the call, per rank for
all_gather/reduce_scatter and per peer for alltoall.
"""

from __future__ import annotations

from collscope.errors import ConfigError
from collscope.vocab.ops import SPLIT_GRANULE_BYTES, SPLIT_OPS

__all__ = ["size_ladder", "size_list", "call_count", "size_quantum", "first_ladder_size", "SPLIT_OPS"]


def size_quantum(op: str, *, elem_size: int, nranks: int) -> int:
    """Every size of ``op`` is a multiple of this many bytes: a whole element; for split ops each rank's share a
    multiple of 16 bytes, as nccl-tests rounds it (of the element, for a type wider than 16 bytes)."""
    if op not in SPLIT_OPS:
        return elem_size
    share = SPLIT_GRANULE_BYTES if SPLIT_GRANULE_BYTES % elem_size == 0 else elem_size
    return share * nranks


def first_ladder_size(min_bytes: int, max_bytes: int, factor: float, *, op: str, nranks: int,
                      elem_size: int = 1) -> int:
    """The first size of the ladder ``min_bytes * factor**k`` (nccl-tests' walk) that holds data for ``op`` on
    ``nranks`` ranks: ``min_bytes`` itself except for split ops, which start at ``16 * nranks`` bytes or the next
    ladder step above (8 B on 8 ranks: 128 B with factor 2). ConfigError when no size up to ``max_bytes`` does."""
    quantum = size_quantum(op, elem_size=elem_size, nranks=nranks)
    raw = min_bytes
    while raw <= max_bytes:
        if raw >= quantum:
            return raw
        nxt = int(raw * factor)
        raw = nxt if nxt > raw else raw + 1
    raise ConfigError(f"no size in {min_bytes}..{max_bytes} bytes holds data for {op} on {nranks} ranks (each "
                      f"rank's share is rounded down to {quantum // nranks} bytes, as nccl-tests does); use "
                      f"--max-bytes {quantum} or more")


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
    quantum = size_quantum(op, elem_size=elem_size, nranks=nranks)
    sizes: list[int] = []
    raw = min_bytes
    while raw <= max_bytes:
        size = raw // quantum * quantum
        if size > 0 and (not sizes or sizes[-1] != size):
            sizes.append(size)
        nxt = int(raw * factor)
        raw = nxt if nxt > raw else raw + 1
    if not sizes:
        raise ConfigError(f"no size in {min_bytes}..{max_bytes} bytes holds data for {op} on {nranks} ranks "
                          f"(sizes are rounded down to a multiple of {quantum} bytes, as nccl-tests rounds them); "
                          f"use --max-bytes {quantum} or more")
    return sizes


def size_list(sizes: tuple[int, ...] | list[int], *, elem_size: int, op: str, nranks: int) -> list[int]:
    """Explicit sizes (``collscope bench --sizes``, adaptive sweeps) rounded as the ladder rounds them, sorted,
    without repeats; ConfigError for a negative size or when none is left."""
    if not sizes or any(s < 0 for s in sizes):
        raise ConfigError(f"sizes must be a non-empty list of sizes >= 0, got {list(sizes)}")
    if elem_size < 1 or nranks < 1:
        raise ConfigError(f"element size and rank count must be >= 1, got {elem_size}, {nranks}")
    quantum = size_quantum(op, elem_size=elem_size, nranks=nranks)
    out = sorted({s // quantum * quantum for s in sizes} - {0})
    if not out:
        raise ConfigError(f"no size in {list(sizes)} holds data for {op} on {nranks} ranks (sizes are rounded "
                          f"down to a multiple of {quantum} bytes, as nccl-tests rounds them); use sizes of "
                          f"{quantum} bytes or more")
    return out


def call_count(op: str, size_bytes: int, *, elem_size: int, nranks: int) -> int:
    """The count argument of the call for a ladder size (nccl-tests' "count" column: per rank for all_gather and
    reduce_scatter, per peer for alltoall)."""
    elems = size_bytes // elem_size
    return elems // nranks if op in SPLIT_OPS else elems
