"""``sbatch slurm/sweep.sh --preset nccl-algo-proto --dry-run`` on a 2-node allocation of 8 GPUs per node, as the
batch script sees it (issue 21: the srun lines a Slurm expert accepts).

slurm/sweep.sh runs under bash with the variables sbatch sets for ``sbatch -N 2 --ntasks-per-node=8
--gpus-per-node=8 --cpus-per-task=16``, the real collscope, a fake ``srun`` that answers ``--version`` as Slurm
does, and fake MPI-built nccl-tests binaries (found, never run: a dry run prints). The printed commands are
compared with ``golden/sbatch-sweep-nccl-algo-proto-2x8gpu-slurm22.05.txt``; after an intended change rerun with
``COLLSCOPE_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from collscope import proc
from tests.fakes import Answer, FakeTools

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "sbatch-sweep-nccl-algo-proto-2x8gpu-slurm22.05.txt"
OPS = ("all_reduce", "all_gather", "reduce_scatter")

ALLOCATION = {  # what sbatch -N 2 --ntasks-per-node=8 --gpus-per-node=8 --cpus-per-task=16 sets in the batch script
    "SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "collscope-sweep", "SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NTASKS": "16", "SLURM_NPROCS": "16", "SLURM_NTASKS_PER_NODE": "8", "SLURM_TASKS_PER_NODE": "8(x2)",
    "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_NODELIST": "gpu[01-02]", "SLURMD_NODENAME": "gpu01",
    "SLURM_GPUS_ON_NODE": "8", "SLURM_GPUS_PER_NODE": "8", "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7",
    "SLURM_CPUS_PER_TASK": "16", "SLURM_CPUS_ON_NODE": "128", "SLURM_JOB_CPUS_PER_NODE": "128(x2)",
}


def _dry_run(tmp_path: Path, fake_tools: FakeTools, slurm: str) -> str:
    fake_tools.add("srun", {"--version": Answer(stdout=f"slurm {slurm}\n")})
    binaries = tmp_path / "nccl-tests"
    for op in OPS:
        fake_tools.add(f"{op}_perf_mpi", directory=binaries)
    venv_bin = Path(sys.executable).parent
    env = {"PATH": f"{fake_tools.bin_dir}:{venv_bin}:/usr/bin:/bin", "HOME": str(tmp_path),
           "COLLSCOPE": str(venv_bin / "collscope"), "NCCL_TESTS_HOME": str(binaries), **ALLOCATION}
    res = proc.run(["bash", str(REPO / "slurm" / "sweep.sh"), "--preset", "nccl-algo-proto", "--dry-run"],
                   timeout_s=120, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout.replace(str(binaries), "$NCCL_TESTS_HOME")


def _srun_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if " srun " in f" {line}"]


def test_gpu_allocation_dry_run_matches_the_golden_srun_lines(tmp_path: Path, fake_tools: FakeTools) -> None:
    text = _dry_run(tmp_path, fake_tools, "22.05.8")
    if os.environ.get("COLLSCOPE_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
        pytest.skip(f"rewrote {GOLDEN}; review the diff")
    assert text == GOLDEN.read_text(), "dry-run commands changed; if intended, rerun with COLLSCOPE_UPDATE_GOLDEN=1"


def test_every_srun_line_places_one_rank_per_gpu_with_its_cpus(tmp_path: Path, fake_tools: FakeTools) -> None:
    lines = _srun_lines(_dry_run(tmp_path, fake_tools, "22.05.8"))
    assert lines
    for line in lines:
        words = line.split()
        step = words[words.index("srun"):]
        assert step[:14] == ["srun", "--ntasks", "16", "--nodes", "2", "--ntasks-per-node=8", "--cpus-per-task=16",
                             "--cpu-bind=cores", "--gpu-bind=none", "--export=ALL", "--kill-on-bad-exit=1",
                             "--mpi=pmix", step[12], "-b"], line
        assert step[12].endswith("_perf_mpi") and step[step.index("-g") + 1] == "1"
        assert "NCCL_TESTS_DEVICE" not in line  # every task sees the node's 8 GPUs


def test_slurm_24_05_turns_binding_off_with_tres_bind(tmp_path: Path, fake_tools: FakeTools) -> None:
    old = _dry_run(tmp_path, fake_tools, "22.05.8")
    new = _dry_run(tmp_path, fake_tools, "24.05.4")
    assert new == old.replace("--gpu-bind=none", "--tres-bind=gres/gpu:none")
    assert "--tres-bind=gres/gpu:none" in new
