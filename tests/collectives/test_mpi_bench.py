"""The mpi4py harness, for real: `mpirun -np 2 python -m collscope bench --engine mpi ...` on this machine."""

from __future__ import annotations

import json
import time

import pytest

from collscope.collectives.measure import ELEM_SIZE
from collscope.collectives.record import busbw_factor
from collscope.collectives.sizes import size_ladder
from collscope.collectives.spec import BENCH_OPS
from tests.collectives.launch import clean_env, collscope_program, mpirun_argv, need_mpi, records, run

SIZES = ["-b", "8", "-e", "64K", "-f", "4"]  # 8, 32, ..., 32768: 7 sizes (fewer for split ops: collectives.sizes)


def _ladder(op: str, lo: int = 8, hi: int = 64 * 1024, factor: float = 4, dtype: str = "float32") -> list[int]:
    """What ``-b lo -e hi -f factor`` measures for ``op`` on 2 ranks (split ops round each rank's share)."""
    return size_ladder(lo, hi, factor, elem_size=ELEM_SIZE[dtype], op=op, nranks=2)


@pytest.fixture(scope="module")
def mpirun() -> str:
    return need_mpi()


def _bench(mpirun: str, *args: str, helper: bool = False, nranks: int = 2, timeout_s: float = 120, **env: str):
    argv = mpirun_argv(mpirun, nranks, collscope_program(*args, helper=helper))
    return run(argv, clean_env(**env), timeout_s=timeout_s)


@pytest.mark.parametrize("op", BENCH_OPS)
def test_every_op_measures_and_checks(mpirun, tmp_path, op):
    out = tmp_path / "r.jsonl"
    res = _bench(mpirun, "--engine", "mpi", "--op", op, *SIZES, "--iters", "7", "--warmup", "3", "--check",
                 "--out", str(out))
    assert res.returncode == 0, res.stderr
    recs = records(out)
    assert [r.size_bytes for r in recs] == _ladder(op)
    assert _ladder("all_reduce") == [8, 32, 128, 512, 2048, 8192, 32768]
    for r in recs:
        assert (r.engine, r.backend, r.op, r.nranks, r.nnodes) == ("mpi", "mpi", op, 2, 1)
        assert r.wrong == 0 and r.ok
        assert (r.iters, r.warmup) == (7, 3)
        assert r.time_us > 0
        assert r.algbw_gbps == pytest.approx(r.size_bytes / (r.time_us * 1e-6) / 1e9)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * busbw_factor(op, 2))
        assert r.engine_version.startswith("mpi4py ") and "MPI" in r.engine_version
        assert len(r.hosts) == 1 and r.timestamp
        assert r.in_place == (op == "broadcast")
        per_rank = r.size_bytes // 4 // (2 if op in ("all_gather", "reduce_scatter", "alltoall") else 1)
        assert r.count == per_rank
    assert "#wrong" in res.stdout and str(_ladder(op)[-1]) in res.stdout


def test_settings_capture_knobs_not_launcher_bookkeeping(mpirun, tmp_path):
    out = tmp_path / "r.jsonl"
    res = _bench(mpirun, "--engine", "mpi", "--op", "all_reduce", "-b", "1K", "-e", "4K", "--out", str(out),
                 OMPI_MCA_coll_tuned_use_dynamic_rules="1", OMPI_MCA_coll_tuned_allreduce_algorithm="4",
                 NCCL_ALGO="Ring")
    assert res.returncode == 0, res.stderr
    recs = records(out)
    assert len(recs) == 3
    for r in recs:
        assert r.settings == {"NCCL_ALGO": "Ring", "OMPI_MCA_coll_tuned_allreduce_algorithm": "4",
                              "OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}
        assert r.wrong is None and r.ok  # not checked


@pytest.mark.parametrize(("op", "dtype"), [("all_reduce", "int8"), ("all_gather", "float64"),
                                           ("reduce_scatter", "uint8"), ("alltoall", "int64")])
def test_in_place_and_dtypes(mpirun, tmp_path, op, dtype):
    out = tmp_path / "r.jsonl"
    res = _bench(mpirun, "--engine", "mpi", "--op", op, "-b", "16", "-e", "4K", "-f", "16", "--check", "--in-place",
                 "--dtype", dtype, "--redop", "max", "--out", str(out))
    assert res.returncode == 0, res.stderr
    recs = records(out)
    assert [r.size_bytes for r in recs] == _ladder(op, 16, 4096, 16, dtype)
    assert all(r.in_place and r.wrong == 0 and r.dtype == dtype for r in recs)
    assert all(r.redop == ("max" if op in ("all_reduce", "reduce_scatter") else None) for r in recs)


def test_broadcast_from_another_root_and_json_lines_on_stdout(mpirun):
    res = _bench(mpirun, "--engine", "mpi", "--op", "broadcast", "-b", "8", "-e", "64", "--root", "1", "--check")
    assert res.returncode == 0, res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [d["size_bytes"] for d in lines] == [8, 16, 32, 64]
    assert all(d["root"] == 1 and d["wrong"] == 0 for d in lines)
    assert "#wrong" in res.stderr  # the table goes to stderr when stdout carries the records


def test_wrong_values_exit_1(mpirun, tmp_path):
    out = tmp_path / "r.jsonl"
    res = _bench(mpirun, "--engine", "mpi", "--op", "all_reduce", "-b", "8", "-e", "32", "--check", "--out", str(out),
                 helper=True, COLLSCOPE_TEST_DIE_RANK="1", COLLSCOPE_TEST_DIE_MODE="corrupt")
    assert res.returncode == 1, res.stderr
    assert "wrong elements" in res.stderr
    recs = records(out)
    assert [r.wrong for r in recs] == [1, 1, 1] and not any(r.ok for r in recs)


@pytest.mark.parametrize("mode", ["raise", "exit"])
def test_a_failing_rank_fails_the_run_fast(mpirun, tmp_path, mode):
    start = time.monotonic()
    res = _bench(mpirun, "--engine", "mpi", "--op", "all_reduce", *SIZES, "--out", str(tmp_path / "r.jsonl"),
                 helper=True, timeout_s=90, COLLSCOPE_TEST_DIE_RANK="1", COLLSCOPE_TEST_DIE_MODE=mode)
    assert not res.timed_out and res.returncode != 0
    assert time.monotonic() - start < 60
    if mode == "raise":
        assert "error: rank 1 (mpi engine): RuntimeError: injected failure" in res.stderr
    else:
        assert "exited" in (res.stderr + res.stdout).lower()


def test_a_hanging_rank_is_aborted_at_the_timeout(mpirun, tmp_path):
    start = time.monotonic()
    res = _bench(mpirun, "--engine", "mpi", "--op", "all_reduce", *SIZES, "--timeout", "4", helper=True,
                 timeout_s=90, COLLSCOPE_TEST_DIE_RANK="1", COLLSCOPE_TEST_DIE_MODE="hang")
    assert not res.timed_out and res.returncode != 0
    assert time.monotonic() - start < 60
    assert "no result after 4 s (--timeout); aborting the job" in res.stderr


def test_unsupported_dtype_is_a_clean_usage_error(mpirun):
    res = _bench(mpirun, "--engine", "mpi", "--op", "all_reduce", "-b", "8", "-e", "64", "--dtype", "bfloat16")
    assert res.returncode != 0
    assert "the mpi engine has no bfloat16 reductions" in res.stderr
    assert "MPI_ABORT" not in res.stderr
