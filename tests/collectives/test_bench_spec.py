"""Pure parts of the harnesses: size ladder, BenchSpec validation, settings capture, check patterns, CLI layer."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from collscope.cli import main
from collscope.collectives.harness.mpi import parse_ompi_cuda_support
from collscope.collectives.sizes import call_count, size_ladder
from collscope.collectives.spec import (
    BENCH_DTYPES,
    BENCH_OPS,
    ELEM_SIZE,
    BenchSpec,
    captured_settings,
    count_wrong,
    expected_result,
    pattern,
)
from collscope.errors import ConfigError


def test_ladder_like_nccl_tests():
    assert size_ladder(8, 128, 2, elem_size=4, op="all_reduce", nranks=8) == [8, 16, 32, 64, 128]
    assert size_ladder(8, 64 * 1024, 4, elem_size=4, op="all_reduce", nranks=2)[-1] == 32768


def test_ladder_rounds_to_whole_elements_per_rank():
    # nccl-tests rounds each rank's share of a split op down to 16 bytes: on 8 ranks 8..64 B hold nothing
    # (size-0 rows in nccl-tests), 129..255 round down to 128 (src/all_gather.cu: (count/nranks) & ~(16/4 - 1)).
    assert size_ladder(8, 300, 2, elem_size=4, op="all_gather", nranks=8) == [128, 256]
    assert size_ladder(8, 300, 2, elem_size=4, op="all_gather", nranks=16) == [256]
    assert size_ladder(100, 1000, 3, elem_size=2, op="reduce_scatter", nranks=3) == [96, 288, 864]
    assert size_ladder(6, 50, 2, elem_size=4, op="broadcast", nranks=8) == [4, 12, 24, 48]
    assert size_ladder(10, 20, 2, elem_size=8, op="alltoall", nranks=1) == [16]  # 10 B: a size-0 row


def test_ladder_fractional_factor_and_dedupe():
    assert size_ladder(1, 6, 1.5, elem_size=1, op="all_reduce", nranks=2) == [1, 2, 3, 4, 6]
    assert size_ladder(4, 7, 1.1, elem_size=4, op="all_reduce", nranks=2) == [4]


@pytest.mark.parametrize(("args", "message"), [
    ((16, 8, 2), "above max"), ((8, 16, 1), "factor must be > 1"), ((8, 16, 0.5), "factor"),
    ((-1, 16, 2), ">= 0"), ((8, 16, 2), "no size in 8..16 bytes"),
])
def test_ladder_errors(args, message):
    with pytest.raises(ConfigError, match=message):
        size_ladder(*args, elem_size=4, op="reduce_scatter", nranks=8)


@given(st.integers(0, 1 << 20), st.integers(0, 1 << 22), st.sampled_from([1.5, 2, 3, 4]),
       st.sampled_from(sorted(ELEM_SIZE.values())), st.sampled_from(BENCH_OPS), st.integers(1, 16))
def test_ladder_invariants(lo, span, factor, elem, op, nranks):
    try:
        sizes = size_ladder(lo, lo + span, factor, elem_size=elem, op=op, nranks=nranks)
    except ConfigError:
        return
    quantum = elem * (nranks if op in ("all_gather", "reduce_scatter", "alltoall") else 1)
    assert sizes == sorted(set(sizes))
    assert all(0 < s <= lo + span and s % quantum == 0 for s in sizes)
    for s in sizes:
        count = call_count(op, s, elem_size=elem, nranks=nranks)
        total = count * elem * (nranks if op in ("all_gather", "reduce_scatter", "alltoall") else 1)
        assert total == s


def test_spec_validation_names_the_bad_value_and_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown op 'allreduce'; valid: all_reduce, all_gather"):
        BenchSpec(op="allreduce", min_bytes=8, max_bytes=8)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown dtype 'float8'"):
        BenchSpec(op="all_reduce", min_bytes=8, max_bytes=8, dtype="float8")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="iters must be >= 1"):
        BenchSpec(op="all_reduce", min_bytes=8, max_bytes=8, iters=0)
    with pytest.raises(ConfigError, match="cuda_graph needs device 'cuda'"):
        BenchSpec(op="all_reduce", min_bytes=8, max_bytes=8, cuda_graph=True)
    with pytest.raises(ConfigError, match="min_bytes <= max_bytes"):
        BenchSpec(op="all_reduce", min_bytes=9, max_bytes=8)


def test_captured_settings_keep_knobs_drop_launcher_bookkeeping():
    env = {"NCCL_ALGO": "Tree", "OMPI_MCA_coll_tuned_allreduce_algorithm": "4", "OMPI_MCA_initial_wdir": "/x",
           "OMPI_MCA_num_procs": "2", "OMPI_MCA_orte_hnp_uri": "x", "OMPI_MCA_PREFIXES": "mca", "PATH": "/bin",
           "OMPI_COMM_WORLD_RANK": "0", "TORCH_NCCL_BLOCKING_WAIT": "1"}
    assert captured_settings(env) == {"NCCL_ALGO": "Tree", "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}


def _simulate(op: str, nranks: int, count: int, dtype: str, redop: str, root: int) -> list[np.ndarray]:
    """What an independent, literal implementation of each collective leaves on every rank."""
    n_in = count * nranks if op in ("reduce_scatter", "alltoall") else count
    inputs = [pattern(r, n_in, dtype) for r in range(nranks)]
    reduce = {"sum": np.sum, "max": np.max, "min": np.min}[redop]
    outs = []
    for rank in range(nranks):
        if op == "all_reduce":
            outs.append(reduce(np.stack(inputs), axis=0))
        elif op == "broadcast":
            outs.append(inputs[root])
        elif op == "all_gather":
            outs.append(np.concatenate(inputs))
        elif op == "reduce_scatter":
            outs.append(reduce(np.stack([x[rank * count:(rank + 1) * count] for x in inputs]), axis=0))
        else:
            outs.append(np.concatenate([inputs[src][rank * count:(rank + 1) * count] for src in range(nranks)]))
    return outs


@pytest.mark.parametrize("op", BENCH_OPS)
@pytest.mark.parametrize("redop", ["sum", "max", "min"])
def test_expected_results_match_a_literal_simulation(op, redop):
    for nranks in (1, 2, 3, 8):
        outs = _simulate(op, nranks, 5, "float32", redop, root=nranks - 1)
        for rank, out in enumerate(outs):
            expected = expected_result(op, rank=rank, nranks=nranks, count=5, dtype="float32", redop=redop,
                                       root=nranks - 1)
            assert count_wrong(out, expected) == 0


@pytest.mark.parametrize("dtype", BENCH_DTYPES)
def test_patterns_are_rank_dependent_and_exact_in_every_dtype(dtype):
    assert not np.array_equal(pattern(0, 16, dtype), pattern(1, 16, dtype))
    torch = pytest.importorskip("torch")
    from collscope.collectives.harness.torch import torch_dtype

    total = expected_result("all_reduce", rank=0, nranks=42, count=64, dtype=dtype)
    exact = torch.from_numpy(total).to(torch_dtype(dtype)).double().numpy()
    assert count_wrong(exact, total) == 0


def test_count_wrong():
    assert count_wrong(np.array([1, 2, 3], dtype=np.int8), np.array([1.0, 2.0, 4.0])) == 1
    assert count_wrong(np.array([1, 2]), np.array([1.0, 2.0, 3.0])) == 3


def test_parse_ompi_cuda_support():
    assert parse_ompi_cuda_support("mca:opal:base:param:opal_built_with_cuda_support:value:false\n") is False
    assert parse_ompi_cuda_support("mca:mpi:base:param:mpi_built_with_cuda_support:value:true\n") is True
    assert parse_ompi_cuda_support("nothing here") is None


def _cli(*args: str):
    return CliRunner().invoke(main, ["bench", *args])


def test_bench_help_has_examples():
    res = _cli("--help")
    assert res.exit_code == 0 and "Example" in res.output and "mpirun -np 2 collscope bench" in res.output


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "mpi", "--backend", "gloo", "--op", "all_reduce", "-b", "8", "-e", "8"], "--backend applies"),
    (["--engine", "mpi", "--op", "all_reduce", "-b", "8x", "-e", "8"], "not a size"),
    (["--engine", "torch", "--op", "all_reduce", "-b", "8", "-e", "8", "--iters", "0"], "iters must be >= 1"),
    (["--engine", "torch", "--op", "alltoall", "-b", "8", "-e", "64", "--in-place"], "no in-place form"),
    (["--engine", "torch", "--backend", "gloo", "--op", "all_reduce", "-b", "8", "-e", "8", "--device", "cuda"],
     "gloo is measured on CPU"),
    (["--engine", "mpi", "--op", "all_reduce", "-b", "8", "-e", "8", "--dtype", "float16"],
     "no float16 reductions"),
])
def test_bench_usage_errors_exit_2(args, message):
    res = _cli(*args)
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_nccl_tests_engine_without_the_binary_says_how_to_build_it(tmp_path):
    res = CliRunner().invoke(main, ["bench", "--engine", "nccl-tests", "--op", "all_reduce", "-b", "8", "-e", "8",
                                    "--nccl-tests-dir", str(tmp_path)], env={"NCCL_TESTS_HOME": None})
    assert res.exit_code == 2, res.output
    assert "all_reduce_perf" in res.output and "nccl-tests" in res.output


def test_nccl_tests_engine_takes_whole_factors_only(tmp_path):
    res = _cli("--engine", "nccl-tests", "--op", "all_reduce", "-b", "8", "-e", "8", "-f", "1.5")
    assert res.exit_code == 2 and "whole size factor" in res.output


def test_explicit_sizes_follow_the_min_bytes_rule_and_say_so():
    with pytest.raises(ConfigError, match=r"sizes > 0 bytes.*got \[0, 8\]"):
        BenchSpec(op="all_reduce", min_bytes=8, max_bytes=8, sizes=(0, 8))
    result = CliRunner().invoke(main, ["bench", "--engine", "mpi", "--op", "all_reduce", "--sizes", "0,8"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith("error: sizes must be a non-empty list of sizes > 0")
