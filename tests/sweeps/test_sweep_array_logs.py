"""slurm/sweep.sh names an array task's log by array and task (issue 26 item 6): Slurm opens
``collscope-sweep-%j.out`` by the task's own job id, so shard 2 of array 58 was in ``collscope-sweep-58.out`` and
shard 0 in ``-59``; the script renames the log it was given to ``collscope-sweep-<array id>_<task id>.out`` (what
``%A_%a`` gives, which one ``#SBATCH --output`` cannot say for plain jobs too). The script runs as slurmstepd
starts it: stdout and stderr one file opened for appending (``--open-mode=append``), with a stand-in collscope."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fakes import write_executable

SWEEP = Path(__file__).resolve().parents[2] / "slurm" / "sweep.sh"
ARRAY = {"SLURM_JOB_ID": "59", "SLURM_ARRAY_JOB_ID": "58", "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0",
         "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "1"}


def _start(tmp_path: Path, log_name: str, slurm: dict[str, str], *, append: bool = True) -> int:
    fake = write_executable(tmp_path / "bin" / "collscope",
                            f"#!{sys.executable}\nimport sys\nprint('stand-in collscope', *sys.argv[1:4])\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(slurm, COLLSCOPE=str(fake))
    with open(tmp_path / log_name, "ab" if append else "wb") as log:
        return subprocess.run(["bash", str(SWEEP), "--preset", "mpi-algos"], stdout=log, stderr=subprocess.STDOUT,
                              env=env, cwd=tmp_path, timeout=60).returncode


def test_an_array_task_log_says_array_and_task(tmp_path: Path) -> None:
    assert _start(tmp_path, "collscope-sweep-59.out", ARRAY) == 0
    assert not (tmp_path / "collscope-sweep-59.out").exists()
    text = (tmp_path / "collscope-sweep-58_0.out").read_text()
    assert "collscope-sweep: job 59 (restart 0)" in text and "--shard 0/3" in text, text
    assert "stand-in collscope sweep run" in text, text  # written after the rename: the same open file
    # a requeued task keeps its job id: Slurm opens a fresh -59 file; its lines follow the earlier attempt's
    assert _start(tmp_path, "collscope-sweep-59.out", {**ARRAY, "SLURM_RESTART_COUNT": "1"}) == 0
    again = (tmp_path / "collscope-sweep-58_0.out").read_text()
    assert again.startswith(text) and "collscope-sweep: job 59 (restart 1)" in again[len(text):], again
    assert again.count("stand-in collscope sweep run") == 2 and not (tmp_path / "collscope-sweep-59.out").exists()


def test_other_logs_keep_their_names(tmp_path: Path) -> None:
    plain = {k: v for k, v in ARRAY.items() if not k.startswith("SLURM_ARRAY_")}
    assert _start(tmp_path, "collscope-sweep-59.out", plain) == 0  # not an array task
    assert "collscope-sweep: job 59" in (tmp_path / "collscope-sweep-59.out").read_text()
    assert _start(tmp_path, "mine-59.out", ARRAY) == 0  # the user's own sbatch --output
    assert (tmp_path / "mine-59.out").exists() and not (tmp_path / "collscope-sweep-58_0.out").exists()


def test_a_requeued_log_not_opened_for_appending_stays_apart(tmp_path: Path) -> None:
    """--open-mode=truncate: rewriting the file under the task's own descriptor could be overwritten, so the
    earlier attempt's log keeps its name and the new one its %j name."""
    assert _start(tmp_path, "collscope-sweep-59.out", ARRAY) == 0
    first = (tmp_path / "collscope-sweep-58_0.out").read_text()
    assert _start(tmp_path, "collscope-sweep-59.out", {**ARRAY, "SLURM_RESTART_COUNT": "1"}, append=False) == 0
    assert (tmp_path / "collscope-sweep-58_0.out").read_text() == first
    assert "(restart 1)" in (tmp_path / "collscope-sweep-59.out").read_text()
