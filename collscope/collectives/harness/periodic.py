"""The check pass by period: fill inputs and count wrong outputs without building whole expected arrays.

:func:`collscope.collectives.spec.pattern` repeats every :data:`PERIOD` elements (``3 * 64`` is a multiple of both
of its moduli, 64 and 4), so every block of a collective's expected output (:func:`~collscope.collectives.spec.
expected_result`) is one period row repeated. Filling a buffer is then a broadcast assignment of that row over a
``(n // PERIOD, PERIOD)`` view, and counting wrong elements one vectorised comparison against it: no index array,
no per-rank copies of the input, no float64 copy of a 16 MiB output. The counts are the same as
``count_wrong(actual, expected_result(...))`` (``tests/collectives/test_periodic_check.py`` compares them).
"""

from __future__ import annotations

import numpy as np

from collscope.collectives.spec import pattern, reduce_rows

__all__ = ["PERIOD", "Block", "expected_blocks", "fill_periodic", "count_wrong_periodic"]

PERIOD = 64
"""Elements after which :func:`~collscope.collectives.spec.pattern` repeats, whatever the rank and dtype."""

Block = tuple[int, np.ndarray]
"""``(start, period row)``: output elements ``start .. start + count`` repeat the float64 row."""


def expected_blocks(op: str, *, rank: int, nranks: int, count: int, dtype: str, redop: str = "sum",
                    root: int = 0) -> list[Block]:
    """The blocks of rank ``rank``'s expected output, each ``count`` elements long (see
    :func:`~collscope.collectives.spec.expected_result` for the inputs of each op)."""
    if op == "all_reduce":
        return [(0, reduce_rows([pattern(r, PERIOD, dtype) for r in range(nranks)], redop, dtype))]
    if op == "broadcast":
        return [(0, pattern(root, PERIOD, dtype))]
    if op == "all_gather":
        return [(r * count, pattern(r, PERIOD, dtype)) for r in range(nranks)]
    if op == "reduce_scatter":
        return [(0, reduce_rows([pattern(r, PERIOD, dtype, offset=rank * count) for r in range(nranks)], redop,
                                dtype))]
    if op == "alltoall":
        return [(r * count, pattern(r, PERIOD, dtype, offset=rank * count)) for r in range(nranks)]
    raise ValueError(f"unknown op {op!r}")


def _rows(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``block`` as a ``(k, PERIOD)`` view of its whole periods, and the remainder."""
    whole = block.size // PERIOD * PERIOD
    return block[:whole].reshape(-1, PERIOD), block[whole:]


def fill_periodic(buf: np.ndarray, row: np.ndarray, start: int = 0, n: int | None = None) -> None:
    """``buf[start:start + n] := the row repeated`` (``n`` defaults to the rest of ``buf``)."""
    block = buf[start:] if n is None else buf[start:start + n]
    rows, rest = _rows(block)
    values = row.astype(buf.dtype)
    rows[...] = values
    rest[...] = values[:rest.size]


def count_wrong_periodic(actual: np.ndarray, blocks: list[Block], count: int) -> int:
    """Elements of ``actual`` that differ from the blocks (exact, as after widening to float64). ``actual`` must
    hold ``len(blocks) * count`` elements; otherwise every element counts, as in ``count_wrong``."""
    got = np.asarray(actual).reshape(-1)
    if got.size != len(blocks) * count:
        return int(max(got.size, len(blocks) * count))
    wrong = 0
    for start, row in blocks:
        block = got[start:start + count]
        native = row.astype(got.dtype)
        if np.array_equal(native.astype(np.float64), row):  # the row is exact in the buffer's dtype
            rows, rest = _rows(block)
            wrong += int(np.count_nonzero(rows != native)) + int(np.count_nonzero(rest != native[:rest.size]))
        else:  # the expected values do not fit the dtype (a wrapped sum can never be right): compare widened
            rows, rest = _rows(block.astype(np.float64))
            wrong += int(np.count_nonzero(rows != row)) + int(np.count_nonzero(rest != row[:rest.size]))
    return wrong
