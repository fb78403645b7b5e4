"""The torch harness's GPU paths, checked on CPU: the measured group carries the measured op alone, the CUDA
timing's order of events, the device bound at init, a rank without a GPU, and the GPU test's size ladder.

Real gloo ranks (spawned processes, ``tests/collectives/torch_ranks.py``) stand in for NCCL ones: what the
harness sends to which group is the same code whatever the backend. Where only CUDA would answer (events,
graphs, device counts), small fakes log what the harness asks of them.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.collectives.ranks import RankInfo
from collscope.collectives.sizes import size_ladder
from collscope.collectives.spec import BENCH_OPS
from tests.collectives.torch_ranks import MEASURED_CALLS, run_ranks
from tests.gpu.test_torch_nccl import LADDER, expected_sizes

torch = pytest.importorskip("torch", reason="torch not installed: pip install 'collscope[torch]'")

from collscope.collectives.harness import torch as harness  # noqa: E402  (imports torch)

# 32, 256, 2048, 16384: split ops on 2 ranks start at 32 B (each rank's share a multiple of 16 B, as nccl-tests)
SMALL = {"min_bytes": 32, "max_bytes": 16384, "factor": 8, "iters": 3, "warmup": 2, "check": True}
GPU_TEST = {"min_bytes": 8, "max_bytes": 64 * 2**20, "factor": 8, "iters": 1, "warmup": 0, "check": True}
RUNS = ([{"op": op, "refuse": False, "spec": SMALL} for op in BENCH_OPS]
        + [{"op": op, "refuse": True, "spec": SMALL} for op in ("all_reduce", "all_gather")]
        + [{"op": op, "refuse": False, "spec": GPU_TEST} for op in ("all_reduce", "reduce_scatter")])


@pytest.fixture(scope="module")
def two_ranks() -> list[list[dict[str, Any]]]:
    """Every run of RUNS on 2 spawned gloo ranks (one launch for the module: torch imports once per rank)."""
    return run_ranks(2, RUNS)


def _ladder(op: str, spec: dict[str, Any] = SMALL) -> list[int]:
    return size_ladder(spec["min_bytes"], spec["max_bytes"], spec["factor"], elem_size=4, op=op, nranks=2)


def _results(two_ranks, op: str, refuse: bool = False, spec: dict[str, Any] = SMALL) -> list[dict[str, Any]]:
    index = next(i for i, run in enumerate(RUNS) if (run["op"], run["refuse"], run["spec"]) == (op, refuse, spec))
    results = [rank[index] for rank in two_ranks]
    for result in results:
        assert result["error"] is None, result["error"]
    return results


@pytest.mark.parametrize("op", BENCH_OPS)
def test_only_the_measured_op_reaches_the_measured_group(two_ranks, op):
    results = _results(two_ranks, op)
    sizes = len(_ladder(op))
    assert [r["size_bytes"] for r in results[0]["records"]] == _ladder(op)
    per_size = SMALL["warmup"] + SMALL["iters"] + 1  # warm-up, timed batch, the check call
    for result in results:
        measured = [name for where, name in result["calls"] if where == "measured"]
        assert len(measured) == sizes * per_size and set(measured) <= MEASURED_CALLS[op], measured
        side = {name for where, name in result["calls"] if where == "side"}
        assert {"all_gather_object", "barrier", "gather"} <= side  # the bookkeeping went to the side group
    assert [(r["wrong"], r["ok"]) for r in results[0]["records"]] == [(0, True)] * sizes
    assert results[1]["records"] == []


@pytest.mark.parametrize("op", ["all_reduce", "all_gather"])
def test_a_group_that_refuses_every_other_function_still_measures(two_ranks, op):
    """As an NCCL communicator under NCCL_ALGO=Tree refuses the AllGather of bookkeeping (NCCL >= 2.24)."""
    results = _results(two_ranks, op, refuse=True)
    records = results[0]["records"]
    assert [r["size_bytes"] for r in records] == _ladder(op)
    assert all(r["wrong"] == 0 and r["time_us"] > 0 for r in records)


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter"])
def test_the_gpu_tests_ladder_is_what_the_harness_measures(two_ranks, op):
    """tests/gpu/test_torch_nccl.py's expectation, on the harness's own output (CPU, 2 ranks)."""
    records = _results(two_ranks, op, spec=GPU_TEST)[0]["records"]
    assert [r["size_bytes"] for r in records] == expected_sizes(op, 2)
    assert all(r["wrong"] == 0 for r in records)


@pytest.mark.parametrize("op", BENCH_OPS)
@pytest.mark.parametrize("nranks", [1, 2])
def test_the_gpu_tests_ladder_ends_at_16_mib(op, nranks):
    """-b 8 -e 64M -f 8 walks 8 * 8**k: 8 B .. 16 MiB (8 * 8**8 = 128 MiB is past 64M); never 32 MiB."""
    assert LADDER == ("-b", "8", "-e", "64M", "-f", "8")
    sizes = expected_sizes(op, nranks)
    assert sizes[-1] == 16 * 2**20
    assert set(sizes) <= {8 * 8**k for k in range(8)}
    if op in ("all_reduce", "broadcast"):
        assert sizes == [8 * 8**k for k in range(8)]


# --- CUDA timing: the order of what the harness asks of the GPU (a fake torch.cuda logs it) -----------------

class _FakeCuda:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.capturing = False
        self.events = 0

    def synchronize(self) -> None:
        self.log.append("synchronize")

    def CUDAGraph(self) -> Any:  # noqa: N802 (torch's name)
        log = self.log

        class Graph:
            def replay(self) -> None:
                log.append("replay")

        return Graph()

    @contextmanager
    def graph(self, g: Any):
        self.log.append("capture begin")
        self.capturing = True
        yield
        self.capturing = False
        self.log.append("capture end")

    def Event(self, enable_timing: bool) -> Any:  # noqa: N802 (torch's name)
        log, name = self.log, "start" if self.events == 0 else "end"
        self.events += 1

        class Event:
            def record(self) -> None:
                log.append(f"record {name}")

            def synchronize(self) -> None:
                log.append(f"{name} synchronize")

            def elapsed_time(self, other: Any) -> float:
                return 2.5  # milliseconds

        return Event()


class _FakeTorch:
    def __init__(self) -> None:
        self.log: list[str] = []
        self.cuda = _FakeCuda(self.log)

    def call(self) -> None:
        self.log.append("captured call" if self.cuda.capturing else "eager call")

    def barrier(self) -> None:
        self.log.append("barrier")


def test_a_graph_is_captured_after_one_eager_call_whatever_the_warm_up():
    fake = _FakeTorch()
    elapsed_ns = harness._time_batch_cuda(fake, fake.call, fake.barrier, 3, graph=True)
    assert elapsed_ns == 2_500_000
    assert fake.log == ["eager call", "synchronize", "capture begin", "captured call", "captured call",
                        "captured call", "capture end", "replay",
                        "synchronize", "barrier", "record start", "replay", "record end", "end synchronize"]


def test_the_batch_starts_on_a_drained_gpu_after_the_side_groups_barrier():
    fake = _FakeTorch()
    harness._time_batch_cuda(fake, fake.call, fake.barrier, 2, graph=False)
    assert fake.log == ["synchronize", "barrier", "record start", "eager call", "eager call", "record end",
                        "end synchronize"]


# --- init: the device bound at once, the side group made --------------------------------------------------

class _InitDist:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def init_process_group(self, backend: str, **kwargs: Any) -> None:
        self.calls.append(("init_process_group", {"backend": backend, **kwargs}))

    def new_group(self, **kwargs: Any) -> str:
        self.calls.append(("new_group", kwargs))
        return "side group"


INFO = RankInfo(rank=1, world_size=2, local_rank=1, local_size=2, node_rank=0, nnodes=1, master_addr="10.0.0.1",
                master_port=29500, source="openmpi")


@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_nccl_is_bound_to_its_device_at_init_and_bookkeeping_gets_a_gloo_group(backend):
    fake = _InitDist()
    device = "cuda:1" if backend == "nccl" else "cpu"
    assert harness._init(fake, backend, INFO, 30.0, device) == "side group"
    (init, init_kw), (new, new_kw) = fake.calls
    assert init_kw["init_method"] == "tcp://10.0.0.1:29500" and (init_kw["rank"], init_kw["world_size"]) == (1, 2)
    assert init_kw.get("device_id") == ("cuda:1" if backend == "nccl" else None)
    assert new_kw["backend"] == "gloo" and new_kw["timeout"].total_seconds() == 30.0


def test_torch_213_init_process_group_takes_device_id():
    import inspect

    import torch.distributed as dist

    assert "device_id" in inspect.signature(dist.init_process_group).parameters


# --- a rank that sees no GPU --------------------------------------------------------------------------------

class _NoGpuTorch:
    __version__ = "2.13.0+cu128"

    class cuda:  # noqa: N801 (torch's name)
        @staticmethod
        def device_count() -> int:
            return 0

        @staticmethod
        def is_available() -> bool:
            return False

    @staticmethod
    def device(*args: Any) -> tuple[Any, ...]:
        return args


class _NcclDist:
    @staticmethod
    def is_nccl_available() -> bool:
        return True

    @staticmethod
    def is_gloo_available() -> bool:
        return True


def test_an_empty_cuda_visible_devices_is_a_usage_error_with_the_reason(monkeypatch):
    monkeypatch.setattr(harness, "import_torch", lambda: (_NoGpuTorch, _NcclDist))
    res = CliRunner().invoke(main, ["bench", "--engine", "torch", "--backend", "nccl", "--op", "all_reduce", "-b", "8",
                                    "-e", "8"], env={"CUDA_VISIBLE_DEVICES": "", "RANK": None, "WORLD_SIZE": None})
    assert res.exit_code == 2, res.output
    assert "CUDA_VISIBLE_DEVICES is set but empty" in res.output and "Traceback" not in res.output
