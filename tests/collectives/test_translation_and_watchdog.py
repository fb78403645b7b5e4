"""The one collscope -> nccl-tests translation, and the MPI watchdog that ends a job whose rank fails or hangs."""

from __future__ import annotations

import threading
import time

import pytest

from collscope.collectives.harness import mpi as mpi_harness
from collscope.collectives.harness.watchdog import ABORT_CODE, Watchdog, failure_line, run_mpi_guarded
from collscope.collectives.nccl_tests.spec import (
    BENCH_TO_NCCL_TESTS_DTYPE,
    NCCL_TESTS_DTYPES,
    nccl_tests_argv,
    nccl_tests_spec_for_bench,
    nccl_tests_spec_for_ladder,
)
from collscope.collectives.spec import BENCH_DTYPES, BenchSpec
from collscope.errors import ConfigError


def test_every_bench_dtype_has_an_nccl_tests_name():
    assert set(BENCH_DTYPES) <= set(BENCH_TO_NCCL_TESTS_DTYPE)
    assert set(BENCH_TO_NCCL_TESTS_DTYPE.values()) <= set(NCCL_TESTS_DTYPES)


def test_bench_spec_translation_is_the_argv_bench_ran_before():
    spec = BenchSpec(op="all_gather", min_bytes=8, max_bytes=1 << 20, factor=4.0, iters=7, warmup=2, check=True,
                     dtype="float16", redop="max", root=0, cuda_graph=True, device="cuda")
    assert nccl_tests_argv(nccl_tests_spec_for_bench(spec)) == [
        "all_gather_perf", "-b", "8", "-e", "1048576", "-f", "4", "-n", "7", "-w", "2", "-c", "1", "-a", "3",
        "-G", "1", "-d", "half", "-o", "max", "-r", "0"]


def test_ladder_translation_of_a_sweep_point():
    nt = nccl_tests_spec_for_ladder(op="reduce", min_bytes=8, max_bytes=64, factor=2, iters=5, warmup=1, check=False,
                                    dtype="f8e4m3", ngpus=8, timeout_s=9.9)
    assert (nt.op, nt.dtype, nt.check_iters, nt.ngpus, nt.timeout_s, nt.redop, nt.root) == \
        ("reduce", "f8e4m3", 0, 8, 9, None, None)
    assert nccl_tests_spec_for_ladder(op="all_reduce", min_bytes=8, max_bytes=8, factor=2, iters=1, warmup=0,
                                      check=False, dtype="float32", timeout_s=0.2).timeout_s == 1


@pytest.mark.parametrize(("kw", "match"), [({"factor": 1.5}, "whole size factor"), ({"factor": 1.5}, "whole number"),
                                           ({"dtype": "complex64"}, "dtype='complex64' is invalid.*float32.*half")])
def test_ladder_translation_errors_name_the_value_and_the_valid_ones(kw, match):
    args = {"op": "all_reduce", "min_bytes": 8, "max_bytes": 64, "factor": 2.0, "iters": 1, "warmup": 0,
            "check": False, "dtype": "float32", **kw}
    with pytest.raises(ConfigError, match=match):
        nccl_tests_spec_for_ladder(**args)


def test_explicit_sizes_have_no_nccl_tests_form():
    with pytest.raises(ConfigError, match="ladder"):
        nccl_tests_spec_for_bench(BenchSpec(op="all_reduce", min_bytes=8, max_bytes=64, sizes=(8, 64)))


def test_watchdog_fires_once_unless_cancelled():
    fired = threading.Event()
    with Watchdog(0.05, fired.set):
        assert fired.wait(5)
    quiet = threading.Event()
    with Watchdog(0.2, quiet.set):
        pass
    time.sleep(0.4)
    assert not quiet.is_set()


def test_failure_line_is_one_line_of_bounded_length():
    line = failure_line(3, "mpi", RuntimeError("first\nsecond " + "x" * 1000))
    assert line.startswith("error: rank 3 (mpi engine): RuntimeError: first") and "\n" not in line
    assert len(line) < 460


class _FakeComm:
    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size
        self.aborted: list[int] = []

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's name)
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def Abort(self, code: int) -> None:  # noqa: N802
        self.aborted.append(code)


SPEC = BenchSpec(op="all_reduce", min_bytes=8, max_bytes=64)


def test_a_raising_rank_reports_and_aborts_the_job(monkeypatch):
    pytest.importorskip("mpi4py")

    def broken(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(mpi_harness, "run_mpi_bench", broken)
    comm, lines, ranks = _FakeComm(1, 2), [], []
    run_mpi_guarded(SPEC, timeout_s=60, comm=comm, report=lines.append, on_rank=ranks.append)
    assert comm.aborted == [ABORT_CODE] and ranks == [1]
    assert lines == ["error: rank 1 (mpi engine): RuntimeError: injected"]


def test_a_one_rank_job_raises_collscope_errors(monkeypatch):
    pytest.importorskip("mpi4py")

    def refused(*args, **kwargs):
        raise ConfigError("root 3 is not a rank")

    monkeypatch.setattr(mpi_harness, "run_mpi_bench", refused)
    comm = _FakeComm(0, 1)
    with pytest.raises(ConfigError, match="root 3"):
        run_mpi_guarded(SPEC, timeout_s=60, comm=comm, report=lambda m: None)
    assert comm.aborted == []


def test_a_hanging_rank_is_aborted_at_the_timeout(monkeypatch):
    pytest.importorskip("mpi4py")
    comm, lines = _FakeComm(0, 2), []

    def hang(*args, **kwargs):
        deadline = time.monotonic() + 5
        while not comm.aborted and time.monotonic() < deadline:
            time.sleep(0.01)

    monkeypatch.setattr(mpi_harness, "run_mpi_bench", hang)
    run_mpi_guarded(SPEC, timeout_s=0.1, comm=comm, report=lines.append)
    assert comm.aborted == [ABORT_CODE]
    assert lines == ["error: rank 0 (mpi engine): no result after 0.1 s (--timeout); aborting the job"]
