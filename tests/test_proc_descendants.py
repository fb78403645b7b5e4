"""Every process a launch starts dies with it (issue 22 item 1): real process trees, no mocks.

Two trees that escape a process-group kill, each marked by a unique name in the argv of every process:
- ``mpirun``: real Open MPI 5 ``mpirun -np 2`` whose ranks sleep forever; Open MPI puts each rank in a process
  group of its own, so killing mpirun's group leaves the ranks running, re-parented to init;
- ``setsid``: a plain child whose grandchild calls ``setsid()`` (a session of its own) and sleeps.
Each is ended four ways: the point's timeout, and SIGTERM, SIGINT, SIGKILL of a real process that called
``proc.run`` (a small driver). Afterwards no process of the tree may be left (``/proc`` scanned for the mark).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from collscope import proc
from tests.collectives.launch import ROOT_FLAGS, sigint_at_default, tool
from tests.conftest import marked_left_after, wait_for_marked

REPO = Path(__file__).resolve().parents[1]
HANG_S = 120
"""How long a marked process sleeps: a leak is bounded even when a test fails."""


def _sleeper(marker: str) -> list[str]:
    """A process that sleeps, named ``marker`` (``sleep`` exec'd with argv[0] = marker)."""
    return [sys.executable, "-c", f"import os; os.execvp('sleep', [{marker!r}, '{HANG_S}'])"]


def mpirun_tree(marker: str, tmp_path: Path) -> tuple[list[str], dict[str, str], int]:
    """argv, environment, and how many marked processes: mpirun -np 2 with two ranks that sleep forever."""
    mpirun = tool("mpirun")
    if mpirun is None:
        pytest.skip("mpirun not found: pip install 'collscope[mpi]'")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PRTE_", "PMIX_"))}
    env.update(ROOT_FLAGS, TMPDIR=str(tmp_path))
    return [mpirun, "-np", "2", "--oversubscribe", *_sleeper(marker)], env, 3  # mpirun and two ranks


def setsid_tree(marker: str, tmp_path: Path) -> tuple[list[str], dict[str, str], int]:
    """A child that sleeps, and its child that left for a session of its own and sleeps."""
    grandchild = f"import os; os.setsid(); os.execvp('sleep', [{marker!r}, '{HANG_S}'])"
    child = (f"import os, subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
             f"os.execvp('sleep', [{marker!r}, '{HANG_S}'])")
    return [sys.executable, "-c", child], dict(os.environ), 2


TREES = {"mpirun": mpirun_tree, "setsid": setsid_tree}


@pytest.mark.parametrize("tree", sorted(TREES))
def test_a_timeout_leaves_no_process_of_the_launch(tree, leak_marker, tmp_path):
    argv, env, count = TREES[tree](leak_marker, tmp_path)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(proc.run, argv, timeout_s=10, env=env, kill_on_parent_death=True)
        wait_for_marked(leak_marker, count)  # the whole tree runs before the timeout
        result = running.result()
    assert result.timed_out
    assert result.duration_s < 10 + 20, "proc.run waited for a leftover that holds its output pipe"
    assert marked_left_after(leak_marker) == [], f"processes of the {tree} launch outlived its timeout"


@pytest.mark.parametrize("tree", sorted(TREES))
def test_a_launch_that_ends_leaves_none_of_its_processes(tree, leak_marker, tmp_path):
    """The launched command exits while what it started still runs: those die with the launch."""
    argv, env, count = TREES[tree](leak_marker, tmp_path)
    leaver = [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(8)",
              *argv]
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(proc.run, leaver, timeout_s=60, env=env, kill_on_parent_death=True)
        wait_for_marked(leak_marker, count, within_s=8)  # the whole tree runs before the command exits
        result = running.result()
    assert not result.timed_out and result.duration_s < 30
    assert marked_left_after(leak_marker) == [], f"processes of the {tree} launch outlived it"


DRIVER = """
import json, sys
from collscope import proc
argv, env = json.loads(sys.argv[1]), json.loads(sys.argv[2])
proc.run(argv, timeout_s=600, env=env, kill_on_parent_death=True)
"""


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL"])
@pytest.mark.parametrize("tree", sorted(TREES))
def test_a_signal_to_the_caller_leaves_no_process_of_the_launch(tree, how, leak_marker, tmp_path):
    import json

    argv, env, count = TREES[tree](leak_marker, tmp_path)
    driver_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(argv), json.dumps(env)], env=driver_env,
                              stderr=subprocess.PIPE, preexec_fn=sigint_at_default)
    try:
        wait_for_marked(leak_marker, count)
        time.sleep(0.3)
        driver.send_signal(getattr(signal, how))
        driver.wait(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert marked_left_after(leak_marker) == [], f"processes of the {tree} launch outlived {how} of the caller"


@pytest.mark.parametrize("tree", sorted(TREES))
def test_a_started_launch_ends_whole_when_killed(tree, leak_marker, tmp_path):
    """proc.start (persistent workers): kill_group ends every process of the launch."""
    argv, env, count = TREES[tree](leak_marker, tmp_path)
    started = proc.start(argv, output_path=tmp_path / "out.log", env=env)
    try:
        wait_for_marked(leak_marker, count)
    finally:
        started.kill_group()
    assert marked_left_after(leak_marker) == [], f"processes of the started {tree} launch outlived kill_group"


def test_without_the_reaper_a_timeout_still_ends_mpiruns_ranks(leak_marker, tmp_path):
    """A plain proc.run (no reaper) ends the whole session of its child: Open MPI's ranks stay in mpirun's
    session though each is in a process group of its own."""
    argv, env, count = mpirun_tree(leak_marker, tmp_path)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(proc.run, argv, timeout_s=10, env=env)
        wait_for_marked(leak_marker, count)
        result = running.result()
    assert result.timed_out and result.duration_s < 10 + 20
    assert marked_left_after(leak_marker) == [], "mpirun's ranks outlived the timeout"
