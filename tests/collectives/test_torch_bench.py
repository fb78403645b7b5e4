"""The torch.distributed harness, for real: torchrun (and once mpirun) with 2 gloo ranks on this machine.

gloo in torch 2.13 runs all five collectives on CPU tensors (all_gather_single, reduce_scatter_single,
all_to_all_single included), so every op is measured; nothing is emulated.
"""

from __future__ import annotations

import time

import pytest

from collscope.collectives.measure import ELEM_SIZE
from collscope.collectives.record import busbw_factor
from collscope.collectives.sizes import size_ladder
from collscope.collectives.spec import BENCH_OPS, BenchSpec
from collscope.errors import ConfigError
from tests.collectives.launch import (
    clean_env,
    collscope_program,
    mpirun_argv,
    need_mpi,
    need_torchrun,
    records,
    run,
    torchrun_argv,
)

SIZES = ["-b", "8", "-e", "64K", "-f", "8", "--iters", "5", "--warmup", "2"]  # 8, 64, 512, 4096, 32768


def _ladder(op: str, dtype: str = "float32") -> list[int]:
    """What SIZES measures for ``op`` on 2 ranks (split ops round each rank's share: collscope.collectives.sizes)."""
    return size_ladder(8, 64 * 1024, 8, elem_size=ELEM_SIZE[dtype], op=op, nranks=2)


@pytest.fixture(scope="module")
def torchrun() -> str:
    return need_torchrun()


def _check_records(recs, op, in_place=False, dtype="float32"):
    assert [r.size_bytes for r in recs] == _ladder(op, dtype)
    assert _ladder("all_reduce") == [8, 64, 512, 4096, 32768]
    for r in recs:
        assert (r.engine, r.backend, r.op, r.nranks, r.nnodes) == ("torch", "gloo", op, 2, 1)
        assert r.wrong == 0 and r.ok and (r.iters, r.warmup) == (5, 2)
        assert r.algbw_gbps == pytest.approx(r.size_bytes / (r.time_us * 1e-6) / 1e9)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * busbw_factor(op, 2))
        assert r.engine_version.startswith("torch ") and r.nccl_version is None
        assert r.in_place == (in_place or op in ("all_reduce", "broadcast"))


@pytest.mark.parametrize("op", BENCH_OPS)
def test_every_op_under_torchrun(torchrun, tmp_path, op):
    out = tmp_path / "r.jsonl"
    res = run(torchrun_argv(torchrun, 2, "--engine", "torch", "--backend", "gloo", "--op", op, *SIZES, "--check",
                            "--out", str(out)), clean_env(NCCL_DEBUG="WARN"))
    assert res.returncode == 0, res.stderr
    recs = records(out)
    _check_records(recs, op)
    # run by hand: NCCL_DEBUG names no configuration (it is not a knob); it is what the ranks inherited
    assert all(r.settings == {} and (r.environment or {}).get("NCCL_DEBUG") == "WARN" for r in recs)


@pytest.mark.parametrize(("op", "dtype"), [("all_gather", "bfloat16"), ("reduce_scatter", "int8")])
def test_in_place_views_and_narrow_dtypes(torchrun, tmp_path, op, dtype):
    out = tmp_path / "r.jsonl"
    res = run(torchrun_argv(torchrun, 2, "--engine", "torch", "--op", op, *SIZES, "--check", "--in-place",
                            "--dtype", dtype, "--out", str(out)), clean_env())
    assert res.returncode == 0, res.stderr
    recs = records(out)
    _check_records(recs, op, in_place=True, dtype=dtype)
    assert {r.dtype for r in recs} == {dtype}


def test_torch_under_mpirun(tmp_path):
    mpirun = need_mpi()
    need_torchrun()
    out = tmp_path / "r.jsonl"
    argv = mpirun_argv(mpirun, 2, collscope_program("--engine", "torch", "--op", "all_reduce", *SIZES, "--check",
                                                    "--out", str(out)))
    res = run(argv, clean_env())
    assert res.returncode == 0, res.stderr
    _check_records(records(out), "all_reduce")


def test_wrong_values_exit_1(torchrun, tmp_path):
    out = tmp_path / "r.jsonl"
    res = run(torchrun_argv(torchrun, 2, "--engine", "torch", "--op", "alltoall", "-b", "64", "-e", "64", "--check",
                            "--out", str(out), helper=True),
              clean_env(COLLSCOPE_TEST_DIE_RANK="0", COLLSCOPE_TEST_DIE_MODE="corrupt"))
    assert res.returncode != 0
    assert "1 wrong elements" in res.stderr + res.stdout
    assert [(r.wrong, r.ok) for r in records(out)] == [(1, False)]


def test_a_failing_rank_fails_the_run_fast(torchrun, tmp_path):
    start = time.monotonic()
    res = run(torchrun_argv(torchrun, 2, "--engine", "torch", "--op", "all_reduce", *SIZES, "--timeout", "20",
                            helper=True),
              clean_env(COLLSCOPE_TEST_DIE_RANK="1", COLLSCOPE_TEST_DIE_MODE="raise"), timeout_s=90)
    assert not res.timed_out and res.returncode != 0
    assert time.monotonic() - start < 60
    assert "error: rank 1 (torch engine): RuntimeError: injected failure" in res.stderr


def test_spec_errors_before_any_rendezvous():
    pytest.importorskip("torch", reason="torch not installed: pip install 'collscope[torch]'")
    from collscope.collectives.harness.torch import run_torch_bench

    with pytest.raises(ConfigError, match="no in-place form"):
        run_torch_bench(BenchSpec(op="alltoall", min_bytes=8, max_bytes=8, in_place=True), "gloo", env={})
    with pytest.raises(ConfigError, match="unknown torch backend 'mpi'"):
        run_torch_bench(BenchSpec(op="all_reduce", min_bytes=8, max_bytes=8), "mpi", env={})  # type: ignore[arg-type]
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="backend nccl needs a CUDA build of torch and a visible GPU"):
            run_torch_bench(BenchSpec(op="all_reduce", min_bytes=8, max_bytes=8, device="cuda"), "nccl", env={})
