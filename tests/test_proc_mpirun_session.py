"""proc gives every Open MPI mpirun a session directory of its own and removes it when the launch ends.

Why, shown for real in a pid namespace (tests/stale_mpirun_session.py): a mpirun killed by a timeout leaves
``$TMPDIR/ompi.<pid>`` behind, and a later mpirun with that pid exits 213 at once ("The PMIx server's listener
thread failed to start"). With pid_max 32768 and a suite or a sweep that kills mpiruns, that happens.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from collscope import proc
from tests.collectives.launch import ROOT_FLAGS, tool

REPO = Path(__file__).resolve().parents[1]
BASE = "PRTE_MCA_prte_local_tmpdir_base"
SHOW_BASE = 'echo "server=${PMIX_SERVER_TMPDIR:-none}"'
"""What a rank is told by its PMIx server: the session directory mpirun really uses, <base>/ompi.<pid>."""


@pytest.fixture
def mpirun() -> str:
    found = tool("mpirun")
    if found is None:
        pytest.skip("mpirun not found: pip install 'collscope[mpi]'")
    return found


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRTE_MCA_")}
    return {**env, **ROOT_FLAGS, "TMPDIR": str(tmp_path), **extra}


def _base_seen(stdout: str) -> str:
    server = next(line for line in stdout.splitlines() if line.startswith("server="))[len("server="):]
    assert server == "none" or Path(server).name.startswith("ompi."), server
    return server if server == "none" else str(Path(server).parent)


def test_each_mpirun_gets_a_fresh_base_that_it_really_uses_and_that_is_removed(mpirun, tmp_path):
    argv = [mpirun, "-np", "1", "--oversubscribe", "sh", "-c", SHOW_BASE]
    first = proc.run(argv, timeout_s=60, env=_env(tmp_path))
    second = proc.run(argv, timeout_s=60, env=_env(tmp_path))
    assert first.ok and second.ok, first.stderr + second.stderr
    bases = [_base_seen(first.stdout), _base_seen(second.stdout)]
    assert bases[0] != bases[1]
    for base in bases:
        assert Path(base).parent == tmp_path and Path(base).name.startswith("collscope-mpirun-")
    assert list(tmp_path.iterdir()) == []


def test_the_base_is_removed_after_a_timeout_kill(mpirun, tmp_path):
    argv = [mpirun, "-np", "1", "--oversubscribe", "sh", "-c", f"{SHOW_BASE}; sleep 60"]
    result = proc.run(argv, timeout_s=3, env=_env(tmp_path))
    assert result.timed_out
    base = Path(_base_seen(result.stdout))
    assert base.parent == tmp_path and base.name.startswith("collscope-mpirun-")
    assert list(tmp_path.iterdir()) == []


def test_a_started_mpirun_has_its_base_removed_when_it_ends(mpirun, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    log = tmp_path / "out"
    started = proc.start([mpirun, "-np", "1", "--oversubscribe", "sh", "-c", f"{SHOW_BASE}; sleep 60"],
                         output_path=log, extra_env={**ROOT_FLAGS, "TMPDIR": str(runs)})
    try:
        deadline = time.monotonic() + 30
        while "server=" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _base_seen(log.read_text()).startswith(str(runs))
        assert len(list(runs.iterdir())) == 1
    finally:
        started.kill_group()
    assert list(runs.iterdir()) == []


def test_a_base_chosen_by_the_caller_is_left_alone(mpirun, tmp_path):
    chosen = tmp_path / "mine"
    result = proc.run([mpirun, "-np", "1", "--oversubscribe", "sh", "-c", SHOW_BASE], timeout_s=60,
                      env=_env(tmp_path, **{BASE: str(chosen)}))
    assert result.ok, result.stderr
    assert _base_seen(result.stdout) == str(chosen)
    assert chosen.is_dir()  # PRRTE made it; it is the caller's to remove
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]


def test_other_commands_get_no_base(tmp_path):
    result = proc.run(["sh", "-c", SHOW_BASE], timeout_s=30, env=_env(tmp_path))
    assert _base_seen(result.stdout) == "none"
    assert list(tmp_path.iterdir()) == []


def test_a_killed_mpiruns_leftovers_stop_the_next_one_only_without_a_private_base(mpirun):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a pid namespace of its own")
    result = proc.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable,
                       str(REPO / "tests" / "stale_mpirun_session.py"), mpirun],
                      timeout_s=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.ok, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert any(name.startswith("pmix.") for name in report["stale_files"]), report
    assert report["pinned"]["returncode"] == 213, report
    assert "listener thread failed to start" in report["pinned"]["first_line"], report
    assert report["private"]["returncode"] == 0, report
    assert report["left_in_tmpdir"] == [], report
