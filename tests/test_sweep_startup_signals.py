"""Ctrl-C and SIGTERM while a sweep starts (before its first point: planning, versions, tool checks, the lock)
end it with 130 / 143 and one line, and nothing is run or written down (issue 22 item 14, exit codes).

The startup moment is pinned by a fake ``mpirun`` whose ``--version`` (asked for sweep.json's versions before the
first point) prints Open MPI's first line and hangs under a name unique to the test; the signal is sent once it
runs. Before, SIGTERM there was swallowed as "mpirun's version unknown" and the sweep ran every point (exit 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collectives.launch import clean_env, sigint_at_default
from tests.conftest import marked_left_after, wait_for_marked
from tests.fakes import Answer


@pytest.mark.parametrize(("name", "code", "said"), [("SIGTERM", 143, "stopped: the sweep was stopped by SIGTERM"),
                                                    ("SIGINT", 130, "interrupted (SIGINT)")])
def test_a_signal_at_startup_stops_the_sweep_with_its_exit_code(name, code, said, fake_tools, leak_marker,
                                                                tmp_path):
    fake_tools.add("mpirun", {"--version": Answer(stdout="mpirun (Open MPI) 5.0.3\n", hang_as=leak_marker),
                              "*": Answer(stderr="mpirun stand-in: a point was launched\n", exit_code=1)})
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: startup\nengine: mpi\nops: [all_reduce]\nmin_bytes: 8\nmax_bytes: 64\nnranks: 2\n"
                    "repeats: 1\ntimeout_s: 20\n")
    out = tmp_path / "res"
    env = clean_env(PATH=f"{fake_tools.bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                         f"{os.environ['PATH']}", TMPDIR=str(tmp_path))
    argv = [sys.executable, "-m", "collscope", "sweep", "run", str(spec), "--launcher", "local", "--out", str(out),
            "--no-progress"]
    sweep = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=sigint_at_default)
    try:
        wait_for_marked(leak_marker, 1)  # the sweep waits for mpirun --version: its startup
        sweep.send_signal(getattr(signal, name))
        stdout, stderr = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == code, stdout + stderr
    assert stderr.rstrip().endswith(said), stderr
    assert "Traceback" not in stderr and "a point was launched" not in stderr, stderr
    assert marked_left_after(leak_marker) == []
    assert not (out / "failures.jsonl").exists()
    assert not list(out.glob("points/*.jsonl")) and not list(out.glob("points/*.log"))
