"""The torch harness's check by period counts what the whole-array check counts, fills what pattern() gives, and
needs no host memory of the size of nranks inputs (the whole-array check built nranks float64 copies)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from collscope.collectives.harness.periodic import expected_blocks
from collscope.collectives.spec import BENCH_OPS, BenchSpec, count_wrong, expected_result, pattern

torch = pytest.importorskip("torch", reason="torch not installed: pip install 'collscope[torch]'")

from collscope.collectives.harness.torch import _Tensors, torch_dtype  # noqa: E402  (imports torch)
from collscope.collectives.harness.torch_check import count_wrong_tensor, fill_rows  # noqa: E402

DTYPES = ["float32", "bfloat16", "int8", "uint8", "float64"]


class _Dist:
    """The calls _Tensors binds (never called here)."""

    class ReduceOp:
        SUM, MAX, MIN = "sum", "max", "min"

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def _as_tensor(values: np.ndarray, dtype: str):
    """float64 expected values as the buffer holds them (integers wrap as the collective's arithmetic does)."""
    t = torch.from_numpy(values)
    return t.to(torch.int64).to(torch_dtype(dtype)) if dtype in ("int8", "uint8") else t.to(torch_dtype(dtype))


@pytest.mark.parametrize("op", BENCH_OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("redop", ["sum", "max"])
def test_the_periodic_count_equals_the_whole_array_count(op, dtype, redop):
    for nranks in (2, 3):
        for count in (1, 63, 64, 65, 200):
            for rank in range(nranks):
                kw = {"rank": rank, "nranks": nranks, "count": count, "dtype": dtype, "redop": redop,
                      "root": nranks - 1}
                expected = expected_result(op, **kw)
                blocks = expected_blocks(op, **kw)
                out = _as_tensor(expected, dtype)
                assert count_wrong_tensor(torch, out, blocks, count) == 0 == count_wrong(out.double().numpy(), expected)
                for planted in sorted({0, out.numel() // 2, out.numel() - 1}):  # one wrong value, found by both
                    bad = out.clone()
                    bad[planted] += 1
                    full = count_wrong(bad.double().numpy(), expected)
                    assert full == 1 and count_wrong_tensor(torch, bad, blocks, count) == 1


def test_a_short_output_counts_every_element():
    blocks = expected_blocks("all_gather", rank=0, nranks=2, count=10, dtype="float32")
    assert count_wrong_tensor(torch, torch.zeros(19), blocks, 10) == 20


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000])
def test_fill_rows_writes_the_pattern_and_nothing_else(dtype, n):
    buf = torch.full((n + 10,), 7, dtype=torch_dtype(dtype))
    fill_rows(torch, buf, pattern(3, 64, dtype), 5, n)
    assert torch.equal(buf[5:5 + n].double(), torch.from_numpy(pattern(3, n, dtype)))
    assert bool((buf[:5] == 7).all()) and bool((buf[5 + n:] == 7).all())


@pytest.mark.parametrize(("op", "in_place"), [(op, in_place) for op in BENCH_OPS for in_place in (False, True)
                                               if not (in_place and op == "alltoall")])  # no in-place alltoall
def test_the_harness_fills_its_inputs_with_the_whole_pattern(op, in_place):
    spec = BenchSpec(op=op, min_bytes=8, max_bytes=8, dtype="int8", in_place=in_place, check=True, root=1)
    for rank in range(3):
        bufs = _Tensors(spec, torch, _Dist(), torch.device("cpu"), 70, rank, 3)
        bufs.fill_for_check()
        if op == "broadcast":
            want = pattern(rank, 70, "int8") if rank == 1 else np.full(70, -7.0)
            assert np.array_equal(bufs.out.double().numpy(), want)
            continue
        n_in = 70 * 3 if op in ("reduce_scatter", "alltoall") else 70
        assert np.array_equal(bufs.inp.double().numpy(), pattern(rank, n_in, "int8"))


def test_the_check_needs_no_host_memory_of_the_size():
    """8 ranks x 1 Mi float32 elements: the whole-array check allocated the input (8 MiB as float64) and 8
    expected rows (64 MiB) on the host; by period, the host holds 64-element rows."""
    count = 2**20
    spec = BenchSpec(op="all_reduce", min_bytes=8, max_bytes=8, check=True)
    bufs = _Tensors(spec, torch, _Dist(), torch.device("cpu"), count, 2, 8)
    row = expected_blocks("all_reduce", rank=2, nranks=8, count=count, dtype="float32")[0][1]
    correct = torch.from_numpy(np.resize(row, count)).float()
    tracemalloc.start()
    try:
        bufs.fill_for_check()
        bufs.out.copy_(correct)  # as a correct all_reduce leaves it
        wrong = bufs.wrong()
        bufs.out[12345] += 1
        one_wrong = bufs.wrong()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (wrong, one_wrong) == (0, 1)
    assert peak < 256 * 1024, peak  # one float64 row of the size would be 8 MiB
