"""A real `collscope sweep run` whose rank hangs under real mpirun: nothing of the launch survives the point's
timeout, nor SIGTERM, SIGINT or SIGKILL of the sweep (issue 22 item 1), and the sweep exits 1 / 143 / 130 / -9
(item 14: 130 and 143 are 128 + the signal, as a shell reports it; 1 means a point failed, 2 bad input).
The same for a slow command that is not a sweep (``collscope bench --engine nccl-tests``) under Ctrl-C.

The hanging rank: ``all_reduce_perf_mpi`` (the nccl-tests binary a sweep runs under mpirun; a fake here, as no
GPU exists) prints its header and sleeps, each rank under a name unique to the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collscope.results.store import ResultsDir
from tests.collectives.launch import clean_env, sigint_at_default, tool
from tests.conftest import marked_left_after, wait_for_marked
from tests.fakes import Answer

EXIT = {"timeout": 1, "SIGTERM": 128 + signal.SIGTERM, "SIGINT": 128 + signal.SIGINT, "SIGKILL": -signal.SIGKILL}


def _spec(tmp_path: Path, timeout_s: float) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: hang\nengine: nccl-tests\nops: [all_reduce]\nmin_bytes: 8\nmax_bytes: 64\nnranks: 2\n"
                    f"repeats: 1\ntimeout_s: {timeout_s}\ncheck: false\n")
    return spec


@pytest.fixture
def hanging_rank(fake_tools, leak_marker, tmp_path):
    if tool("mpirun") is None:
        pytest.skip("mpirun not found: pip install 'collscope[mpi]'")
    bin_dir = tmp_path / "nccl-tests"
    hang = Answer(stdout="# nccl-tests stand-in whose rank hangs\n", hang_as=leak_marker)
    fake_tools.add("all_reduce_perf_mpi", hang, directory=bin_dir)
    return bin_dir


@pytest.mark.parametrize("how", sorted(EXIT))
def test_a_hung_rank_dies_with_the_sweep_and_the_exit_code_says_how(how, hanging_rank, leak_marker, tmp_path):
    out = tmp_path / "res"
    timeout_s = 6 if how == "timeout" else 300
    env = clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", TMPDIR=str(tmp_path))
    argv = [sys.executable, "-m", "collscope", "sweep", "run", str(_spec(tmp_path, timeout_s)), "--launcher",
            "mpirun", "--nccl-tests-dir", str(hanging_rank), "--out", str(out), "--no-progress"]
    sweep = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=sigint_at_default)
    try:
        wait_for_marked(leak_marker, 2)  # both ranks run (and hang)
        if how != "timeout":
            time.sleep(0.5)
            sweep.send_signal(getattr(signal, how))
        stdout, stderr = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == EXIT[how], stdout + stderr
    assert marked_left_after(leak_marker) == [], f"a rank outlived the sweep's {how}"
    assert "Traceback" not in stderr, stderr
    if how == "timeout":
        assert "timeout after 6 s" in stdout + stderr
    elif how == "SIGTERM":  # written down as today: the running point cancelled, and why
        failures = ResultsDir(out).failures()
        assert [f.reason for f in failures.values()] == ["cancelled"], failures
        assert "stopped by SIGTERM" in stderr, stderr
    elif how == "SIGINT":
        assert stderr.rstrip().endswith("interrupted (SIGINT)"), stderr


def test_ctrl_c_of_a_slow_command_exits_130_and_ends_its_run(hanging_rank, leak_marker, tmp_path):
    """``collscope bench --engine nccl-tests`` (no sweep) whose nccl-tests run hangs: Ctrl-C exits 130, one line,
    and the run it started is gone."""
    env = clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", TMPDIR=str(tmp_path))
    argv = [sys.executable, "-m", "collscope", "bench", "--engine", "nccl-tests", "--op", "all_reduce", "-b", "8",
            "-e", "64", "--nccl-tests-dir", str(hanging_rank), "--launcher", "mpirun", "--nranks", "2",
            "--timeout", "300"]
    bench = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=sigint_at_default)
    try:
        wait_for_marked(leak_marker, 2)
        time.sleep(0.5)
        bench.send_signal(signal.SIGINT)
        stdout, stderr = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode == 130, stdout + stderr
    assert stderr.strip().splitlines()[-1] == "interrupted (SIGINT)", stderr
    assert "Traceback" not in stderr
    assert marked_left_after(leak_marker) == [], "the nccl-tests ranks outlived Ctrl-C of collscope bench"
