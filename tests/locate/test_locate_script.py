"""slurm/locate.sh: syntax, its #SBATCH header, and the command it runs (a fake collscope records its argv)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "slurm" / "locate.sh"


def test_header_asks_for_no_kill_and_two_tasks_per_node():
    header = [line for line in SCRIPT.read_text().splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --no-kill" in header and "#SBATCH --ntasks-per-node=2" in header
    assert subprocess.run(["bash", "-n", str(SCRIPT)], timeout=30).returncode == 0


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "collscope"
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$ARGV_OUT"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    full = {"PATH": os.environ["PATH"], "COLLSCOPE": str(fake), "ARGV_OUT": str(tmp_path / "argv"), **env}
    return subprocess.run(["bash", str(SCRIPT), *args], env=full, capture_output=True, text=True, timeout=30)


def test_adds_nodes_and_out_unless_given(tmp_path):
    done = _run(tmp_path, "--rails", "2", SLURM_JOB_ID="42", SLURM_JOB_NODELIST="node[1-4]")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "argv").read_text().split("\n")[:-1] == [
        "locate", "--nodes", "node[1-4]", "--out", "results/locate-42", "--rails", "2"]
    done = _run(tmp_path, "--nodes=node[1-2]", "--out", "x", SLURM_JOB_ID="42", SLURM_JOB_NODELIST="node[1-4]")
    assert (tmp_path / "argv").read_text().split("\n")[:-1] == ["locate", "--nodes=node[1-2]", "--out", "x"]


def test_outside_an_allocation_exits_2(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 2 and "not inside a Slurm allocation" in done.stderr
