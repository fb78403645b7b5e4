"""The torch harness's check pass by period: fill and count on the tensors themselves, in O(size) memory.

The same rule as :mod:`collscope.collectives.harness.periodic` (which the mpi harness uses on numpy buffers):
:func:`~collscope.collectives.spec.pattern` repeats every :data:`~collscope.collectives.harness.periodic.PERIOD`
elements, so each block of the expected output is one 64-element row repeated. Filling is a broadcast copy of
that row over a ``(n // PERIOD, PERIOD)`` view of the tensor, on its own device; counting is one comparison
against the row there, and only the count comes back to the host. Nothing builds ``nranks`` full-size inputs or
a float64 copy of the output (the whole-array check did: ``8 * nranks * count`` bytes of host memory per rank).
The counts are those of ``count_wrong(actual, expected_result(...))``
(``tests/collectives/test_torch_check.py`` compares them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collscope.collectives.harness.periodic import PERIOD, Block

__all__ = ["fill_rows", "count_wrong_tensor"]


def fill_rows(torch: Any, buf: Any, row: np.ndarray, start: int, n: int) -> None:
    """``buf[start:start + n] := row`` repeated (``row``: :data:`PERIOD` float64 values), on ``buf``'s device."""
    block = buf[start:start + n]
    values = torch.from_numpy(row).to(dtype=buf.dtype, device=buf.device)
    whole = n // PERIOD * PERIOD
    if whole:
        block[:whole].view(-1, PERIOD).copy_(values.expand(whole // PERIOD, PERIOD))
    if n > whole:
        block[whole:].copy_(values[:n - whole])


def count_wrong_tensor(torch: Any, actual: Any, blocks: list[Block], count: int) -> int:
    """Elements of the tensor ``actual`` that differ from the blocks (exact, as after widening to float64).

    ``actual`` must hold ``len(blocks) * count`` elements; otherwise every element counts, as in ``count_wrong``.
    """
    got = actual.reshape(-1)
    if got.numel() != len(blocks) * count:
        return int(max(got.numel(), len(blocks) * count))
    whole = count // PERIOD * PERIOD
    wrong = 0
    for start, row in blocks:
        block = got[start:start + count]
        want = torch.from_numpy(row)
        native = want.to(block.dtype)
        if torch.equal(native.double(), want):  # the row is exact in the buffer's dtype: compare there
            ref = native.to(block.device)
        else:  # the expected values do not fit the dtype (the result can never be right): compare widened
            block, ref = block.double(), want.to(block.device)
        if whole:
            wrong += int((block[:whole].view(-1, PERIOD) != ref).sum().item())
        if count > whole:
            wrong += int((block[whole:] != ref[:count - whole]).sum().item())
    return wrong
