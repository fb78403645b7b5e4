"""The check pass by period counts exactly what the whole-array check counts, and fills what pattern() gives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.collectives.harness.mpi import BufferPool
from collscope.collectives.harness.periodic import PERIOD, count_wrong_periodic, expected_blocks, fill_periodic
from collscope.collectives.spec import count_wrong, expected_result, pattern

OPS = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "alltoall"]
DTYPES = ["float32", "float64", "int32", "int64", "int8", "uint8"]


def test_pattern_repeats_every_period_for_every_rank_and_dtype():
    for dtype in DTYPES:
        for rank in range(9):
            for offset in (0, 5, 64, 1000):
                whole = pattern(rank, 5 * PERIOD + 17, dtype, offset=offset)
                assert np.array_equal(whole, np.resize(pattern(rank, PERIOD, dtype, offset=offset), whole.size))


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(OPS), dtype=st.sampled_from(DTYPES), redop=st.sampled_from(["sum", "max", "min"]),
       nranks=st.integers(1, 70), count=st.integers(1, 300), data=st.data())
def test_the_periodic_count_equals_the_whole_array_count(op, dtype, redop, nranks, count, data):
    rank = data.draw(st.integers(0, nranks - 1))
    root = data.draw(st.integers(0, nranks - 1))
    expected = expected_result(op, rank=rank, nranks=nranks, count=count, dtype=dtype, redop=redop, root=root)
    blocks = expected_blocks(op, rank=rank, nranks=nranks, count=count, dtype=dtype, redop=redop, root=root)
    np_dtype = np.dtype(dtype)
    actual = expected.astype(np_dtype)  # wraps where the sum does not fit, as the real buffer would
    flips = data.draw(st.lists(st.integers(0, expected.size - 1), max_size=5, unique=True))
    for i in flips:
        actual[i] = actual[i] + np_dtype.type(1)
    assert count_wrong_periodic(actual, blocks, count) == count_wrong(actual, expected)


def test_a_short_or_long_output_counts_every_element():
    blocks = expected_blocks("all_gather", rank=0, nranks=2, count=10, dtype="float32")
    assert count_wrong_periodic(np.zeros(19, np.float32), blocks, 10) == 20
    assert count_wrong_periodic(np.zeros(21, np.float32), blocks, 10) == 21


@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000])
def test_fill_periodic_writes_the_pattern_and_nothing_else(n):
    buf = np.full(n + 10, -7, dtype=np.float32)
    fill_periodic(buf, pattern(3, PERIOD, "float32"), 5, n)
    assert np.array_equal(buf[5:5 + n], pattern(3, n, "float32").astype(np.float32))
    assert (buf[:5] == -7).all() and (buf[5 + n:] == -7).all()


def test_the_pool_reuses_memory_and_zeroes_it():
    pool = BufferPool()
    a = pool.get("send", 100, "float32")
    a[:] = 5
    b = pool.get("send", 50, "float32")
    assert np.shares_memory(a, b) and b.size == 50 and not b.any()
    c = pool.get("recv", 50, "float32")
    assert not np.shares_memory(b, c)
    d = pool.get("send", 200, "float32")  # larger: a new array
    assert d.size == 200 and not d.any() and not np.shares_memory(a, d)
    assert pool.get("send", 10, "int8").dtype == np.int8


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("nranks", [43, 64, 128, 256])
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter"])
def test_integer_sums_are_expected_as_the_wrapped_arithmetic_leaves_them(dtype, nranks, op):
    """int8 sums leave the dtype's range from 85 ranks (uint8 from 170) and wrap, as NCCL, MPI and gloo add."""
    count = 100
    n_in = count * nranks if op == "reduce_scatter" else count
    inputs = np.stack([pattern(r, n_in, dtype).astype(dtype) for r in range(nranks)])
    for rank in (0, nranks - 1):
        rows = inputs[:, rank * count:(rank + 1) * count] if op == "reduce_scatter" else inputs
        out = np.add.reduce(rows, axis=0, dtype=np.dtype(dtype))  # element-type additions: they wrap
        kw = {"rank": rank, "nranks": nranks, "count": count, "dtype": dtype}
        assert count_wrong(out, expected_result(op, **kw)) == 0
        assert count_wrong_periodic(out, expected_blocks(op, **kw), count) == 0
        out[7] += 1
        assert count_wrong(out, expected_result(op, **kw)) == 1
        assert count_wrong_periodic(out, expected_blocks(op, **kw), count) == 1
