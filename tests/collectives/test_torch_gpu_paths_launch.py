"""Launching ranks onto GPUs: the mpi engine chooses the GPU before MPI_Init, and two ranks on one GPU (NCCL's
"Duplicate GPU detected") are explained in words. Fakes stand in for torch.cuda and mpi4py.MPI (no GPU here)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from collscope.collectives.harness import mpi as mpi_harness
from collscope.collectives.harness.watchdog import run_mpi_guarded
from collscope.collectives.spec import BenchSpec
from collscope.errors import ConfigError
from collscope.sweeps.diagnose import launch_diagnosis

# NCCL src/init.cc WARN line as a rank prints it (host:pid:tid [cudaDev] NCCL WARN ...), then torch's exception.
DUPLICATE_GPU_LOG = """\
gpu-a01:2211:2211 [0] NCCL INFO NCCL version 2.27.3+cuda12.9
gpu-a01:2212:2212 [0] NCCL INFO NCCL version 2.27.3+cuda12.9
gpu-a01:2212:2301 [0] NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000
gpu-a01:2212:2301 [0] NCCL INFO init.cc:1020 -> 5
[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2030, invalid usage (run with \
NCCL_DEBUG=WARN for details), NCCL version 2.27.3
[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
[rank1]: Last error:
[rank1]: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000
"""


def test_duplicate_gpu_is_explained_with_the_cause_and_the_fix():
    why = launch_diagnosis(DUPLICATE_GPU_LOG)
    assert why is not None
    assert "rank 1 and rank 0 both on the GPU at PCI bus id 1b000" in why
    assert "Each rank needs a GPU of its own" in why
    assert "CUDA_VISIBLE_DEVICES" in why and "--gpus-per-task" in why and "--gpu-bind" in why
    assert why.count("two ranks drove one GPU") == 1  # said once, not per line that repeats it


# NCCL >= 2.30 (src/init.cc): the same refusal, without rank numbers (a 2.31.2 line as users report it).
SHARED_GPU_LOG = """\
gpu-a01:2212:2301 [1] init.cc:1141 NCCL WARN Multiple Ranks are using the same GPU/Partition. Set \
NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.
[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
"""


def test_the_nccl_230_wording_is_explained_too():
    why = launch_diagnosis(SHARED_GPU_LOG)
    assert why is not None and why.startswith("two ranks drove one GPU (or MIG partitions of one GPU)")
    assert "NCCL_MULTI_RANK_GPU_ENABLE=1" in why and "Each rank needs a GPU of its own" in why
    assert launch_diagnosis("NCCL INFO Using network IB\n") is None


class _Order:
    """A fake torch (cuda.device_count, cuda.set_device) and mpi4py (MPI_Init on import of mpi4py.MPI) that log
    what happens, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, gpus: int = 8) -> None:
        self.log: list[str] = []
        log = self.log
        cuda = types.SimpleNamespace(device_count=lambda: gpus, set_device=lambda i: log.append(f"set_device({i})"))
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
        comm = types.SimpleNamespace(Get_rank=lambda: 0, Get_size=lambda: 1, Abort=lambda code: log.append("Abort"))
        mpi = types.SimpleNamespace(COMM_WORLD=comm)

        class Mpi4py(types.ModuleType):
            def __getattr__(self, name: str) -> Any:
                if name != "MPI":
                    raise AttributeError(name)
                log.append("MPI_Init")
                self.MPI = mpi  # initialised once, as the real module
                return mpi

        monkeypatch.setitem(sys.modules, "mpi4py", Mpi4py("mpi4py"))
        monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)


def test_the_gpu_is_chosen_before_mpi_init(monkeypatch):
    order = _Order(monkeypatch)
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "3",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}
    mpi_harness.import_mpi("cuda", env)
    assert order.log == ["set_device(3)", "MPI_Init"]


def test_the_command_lines_path_chooses_the_gpu_before_mpi_init(monkeypatch):
    """``collscope bench --engine mpi --device cuda`` runs run_mpi_guarded, which starts MPI itself."""
    order = _Order(monkeypatch)
    for key in ("OMPI_COMM_WORLD_RANK", "RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SLURM_PROCID", "9")
    monkeypatch.setenv("SLURM_NTASKS", "16")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "8(x2)")
    monkeypatch.setattr(mpi_harness, "run_mpi_bench", lambda *args, **kwargs: order.log.append("measure") or [])
    spec = BenchSpec(op="all_reduce", min_bytes=8, max_bytes=8, device="cuda")
    run_mpi_guarded(spec, timeout_s=60, report=order.log.append)
    assert order.log == ["set_device(1)", "MPI_Init", "measure"]


def test_a_cpu_run_touches_no_gpu(monkeypatch):
    order = _Order(monkeypatch)
    mpi_harness.import_mpi("cpu", {})
    assert order.log == ["MPI_Init"]


def test_a_rank_without_its_own_gpu_is_refused_before_mpi_starts(monkeypatch):
    order = _Order(monkeypatch, gpus=2)
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    with pytest.raises(ConfigError, match="4 ranks on this node .* but 2 visible GPU"):
        mpi_harness.import_mpi("cuda", env)
    assert order.log == []
