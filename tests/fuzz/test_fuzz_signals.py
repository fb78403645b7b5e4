"""A signal at a random moment of a real sweep (issue 22, the extended fuzz: "a signal mid-sweep").

A small real sweep (mpi engine, local launcher: ``mpirun -np 2 collscope bench``, all_reduce 8..64 B, nine
points) is started as a real ``collscope sweep run`` process and sent SIGINT, SIGTERM or SIGKILL at a moment
drawn from a seeded generator (``COLLSCOPE_FUZZ_SEED`` replays another draw): from the first point's log on,
so it lands while a point runs, between points, during a launch's start or its end. Then:
- no traceback on stderr, and the exit code says how it was stopped: 130 (SIGINT), 143 (SIGTERM), killed by
  signal 9 (SIGKILL);
- no process of the sweep is left (its ranks carry the results directory's unique path in their argv);
- the same command again (a resume, no --retry-failed) completes every point, none failed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from collscope.results.store import ResultsDir
from tests.collectives.launch import clean_env, sigint_at_default, tool
from tests.conftest import marked_left_after

SEED = int(os.environ.get("COLLSCOPE_FUZZ_SEED", "22"))
EXIT = {"SIGINT": 128 + signal.SIGINT, "SIGTERM": 128 + signal.SIGTERM, "SIGKILL": -signal.SIGKILL}
SPEC = ("name: signals\nengine: mpi\nops: all_reduce\nmin_bytes: 8\nmax_bytes: 64\nfactor: 8\niters: 2\nwarmup: 1\n"
        "nranks: 2\nrepeats: 3\ntimeout_s: 60\ngrid:\n  OMPI_MCA_coll_tuned_use_dynamic_rules: ['1']\n"
        "  OMPI_MCA_coll_tuned_allreduce_algorithm: [default, '4']\n")


def _draws() -> list[tuple[str, float]]:
    """Each signal once, at a moment drawn from the seed (seconds after the first point's log appeared)."""
    rng = random.Random(SEED)
    return [(how, round(rng.uniform(0.0, 3.0), 2)) for how in sorted(EXIT)]


@pytest.fixture
def sweep_argv(tmp_path: Path) -> tuple[list[str], dict[str, str], Path]:
    if tool("mpirun") is None:
        pytest.skip("mpirun not found: pip install 'collscope[mpi]'")
    pytest.importorskip("mpi4py", reason="mpi4py not installed: pip install 'collscope[mpi]'")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / f"res-{uuid.uuid4().hex[:12]}"
    env = clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", TMPDIR=str(tmp_path))
    argv = [sys.executable, "-m", "collscope", "sweep", "run", str(spec), "--launcher", "local", "--out", str(out),
            "--no-progress"]
    return argv, env, out


@pytest.mark.parametrize(("how", "delay_s"), _draws(), ids=lambda v: str(v))
def test_a_signal_mid_sweep_leaves_nothing_and_a_resume_completes(how, delay_s, sweep_argv):
    argv, env, out = sweep_argv
    sweep = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=sigint_at_default)
    try:
        deadline = time.monotonic() + 120
        while not list((out / "points").glob("*.log")) and sweep.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay_s)
        signalled = sweep.poll() is None
        if signalled:
            sweep.send_signal(getattr(signal, how))
        stdout, stderr = sweep.communicate(timeout=180)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert signalled, f"the sweep ended before {how} came {delay_s} s after its first point started"
    assert "Traceback" not in stderr, stderr
    assert sweep.returncode == EXIT[how], f"{how} after {delay_s} s: {stdout}{stderr}"
    assert marked_left_after(str(out)) == [], f"a process of the sweep outlived {how}"

    resumed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Traceback" not in resumed.stderr
    status = ResultsDir(out).status()
    assert (status.done, status.failed, status.pending) == (status.points, 0, 0), status
    assert marked_left_after(str(out)) == []
