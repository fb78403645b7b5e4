"""The simulated multi-node cluster (scripts/local-cluster.sh) for the ``multinode`` tests.

The tests need the cluster up (``scripts/local-cluster.sh up``, as root); without it they SKIP, saying so, and a
skip is not a pass: CI brings the cluster up before the tests (``.ci/run``) and sets
``COLLSCOPE_REQUIRE_CLUSTER=1``, which turns the skip into a failure. Work files go under
``/var/tmp/collscope-multinode`` (the ``work`` fixture): every node sees /var/tmp as it is, while /tmp is private
to each node, and pytest's own ``tmp_path`` directories are deleted by any later pytest run on the machine.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import env_without_suite_defaults

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "local-cluster.sh"
BIN = Path(sys.executable).parent
COLLSCOPE = BIN / "collscope"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.multinode)


def _status() -> tuple[bool, str]:
    if not CLUSTER.exists():
        return False, f"{CLUSTER} is missing"
    if os.geteuid() != 0:
        return False, "the simulated cluster needs root (network namespaces)"
    try:
        out = subprocess.run(["bash", str(CLUSTER), "status"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False, "scripts/local-cluster.sh status timed out"
    text = (out.stdout + out.stderr).strip().splitlines()
    if out.returncode != 0:
        return False, ("simulated cluster not up (run 'scripts/local-cluster.sh up'): "
                       + (text[-1] if text else f"status exited {out.returncode}"))
    return True, text[-1] if text else ""


def cluster_env() -> dict[str, str]:
    """The environment of commands run on the cluster: the suite's own defaults (tests/conftest.py) left out,
    since local-cluster.sh lets the caller's variables win over the cluster's (``OMPI_MCA_btl=tcp,self``)."""
    return env_without_suite_defaults()


@dataclass
class Cluster:
    """Runs things on the simulated cluster; every call has a timeout."""

    def run(self, *args: str, timeout_s: float = 120, check: bool = True,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        argv = ["bash", str(CLUSTER), *args]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, env=cluster_env())
        if check and out.returncode != 0:
            raise AssertionError(f"{shlex.join(argv)} exited {out.returncode}:\n{out.stdout[-3000:]}\n"
                                 f"{out.stderr[-3000:]}")
        return out

    def env_args(self, **extra: str) -> list[str]:
        """``env`` arguments for a client command: this checkout first on PYTHONPATH, this venv's collscope."""
        base = {"PYTHONPATH": str(ROOT), "COLLSCOPE": str(COLLSCOPE), "PATH": f"{BIN}:{os.environ['PATH']}"}
        return ["env", *(f"{k}={v}" for k, v in {**base, **extra}.items())]

    def submit(self, work: Path, *args: str, env: dict[str, str] | None = None) -> str:
        """``sbatch --parsable ARGS`` from ``work`` (job output in ``work/job-<id>.out``); returns the job id."""
        out = self.run("exec", *self.env_args(**(env or {})), "sbatch", "--parsable",
                       f"--output={work}/job-%j.out", *args, timeout_s=60, cwd=work)
        return out.stdout.strip().split(";")[0]

    def wait(self, job: str, timeout_s: float = 150) -> tuple[str, str]:
        """Wait for ``job`` to end; returns its (JobState, ExitCode). Polls scontrol twice a second: ``sbatch -W``
        polls with growing sleeps and would add up to half a minute to every job."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.run("exec", "scontrol", "show", "job", "-o", job, timeout_s=30).stdout
            fields = dict(f.split("=", 1) for f in text.split() if "=" in f)
            state = fields.get("JobState", "?")
            if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING",
                             "SUSPENDED", "?"):
                return state, fields.get("ExitCode", "?")
            assert time.monotonic() < deadline, f"job {job} still {state} after {timeout_s:g} s"
            time.sleep(0.5)

    def sbatch(self, work: Path, *args: str, timeout_s: float = 150, env: dict[str, str] | None = None,
               check: bool = True) -> tuple[str, str]:
        """Submit ``ARGS`` from ``work`` and wait for the job; with ``check``, it must have COMPLETED with 0."""
        job = self.submit(work, *args, env=env)
        state, code = self.wait(job, timeout_s)
        if check:
            assert (state, code) == ("COMPLETED", "0:0"), f"job {job}: {state} exit {code}\n" + job_output(work)
        return state, code

    def pids(self, node: str, *, slurm: bool = False) -> list[int]:
        """Processes in ``node``'s network namespace, Slurm's daemons (slurmd, and slurmstepd unless ``slurm``)
        excepted: slurmstepd may outlive a failed step's tasks while it reports to slurmctld."""
        out = subprocess.run(["ip", "netns", "pids", f"cs-{node}"], capture_output=True, text=True, timeout=10)
        pids = [int(p) for p in out.stdout.split()]
        skip = ("slurmd", "") if slurm else ("slurmd", "slurmstepd", "")
        return [p for p in pids if _comm(p) not in skip]

    def wait_no_job_processes(self, nodes: list[str], timeout_s: float = 30) -> dict[str, list[str]]:
        """Wait until no process but slurmd runs on ``nodes``; returns what is left (empty when clean)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = {n: [f"{p} {_cmdline(p)}" for p in self.pids(n)] for n in nodes}
            left = {n: v for n, v in left.items() if v}
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "(gone)"


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    up, why = _status()
    if not up:
        if os.environ.get("COLLSCOPE_REQUIRE_CLUSTER") == "1":  # CI: the cluster was brought up for these tests
            pytest.fail(f"COLLSCOPE_REQUIRE_CLUSTER=1 but {why}")
        pytest.skip(why)
    yield Cluster()


WORK_BASE = Path("/var/tmp/collscope-multinode")


@pytest.fixture
def work(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A fresh directory every node sees; removed after a passing test, kept (and named) after a failure."""
    WORK_BASE.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"{request.node.name[:40]}-", dir=WORK_BASE))
    path.chmod(0o755)
    yield path
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    if failed:
        print(f"work directory kept: {path}")
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]


def done_point_files(out_dir: Path) -> list[Path]:
    """The records files of a results directory's finished points (not the ``.partial.jsonl`` of cut attempts)."""
    return sorted(p for p in (out_dir / "points").glob("*.jsonl") if not p.name.endswith(".partial.jsonl"))


def records(out_dir: Path) -> list[dict]:
    """Every record of a results directory's finished points."""
    found = []
    for path in done_point_files(out_dir):
        found += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return found


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``predicate`` every 0.2 s; fail the test naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what} after {timeout_s:g} s"
        time.sleep(0.2)


def failures(out_dir: Path) -> list[dict]:
    path = out_dir / "failures.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def job_output(work: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(work.glob("job-*.out")))
