"""Launch failures are classified before they are blamed (issue 22 items 3-5), with the local launcher and a
stand-in all_reduce_perf that prints a recorded nccl-tests 2.19.6 output, or fails the way launchers do:

- a point cancelled by SIGTERM (a requeued or preempted job) is an attempt: a resume measures it again;
- a launch that dies within seconds of a launcher error is started once more before it counts;
- a configuration that hung costs one timeout: its other repeats are written down as skipped;
- a missing launcher or binary stops the sweep before the first point, with nothing written down as a failure,
  and a "launch error" of an earlier run is retried without --retry-failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import collscope.sweeps.attempt as attempt
from collscope.cli import main
from collscope.errors import ConfigError
from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from collscope.sweeps.termination import SweepTerminated
from tests.conftest import sigterm_self_once
from tests.fakes import NCCL_TESTS_FIXTURES, write_executable

HUNG_REASON = "configuration hung"
OUTPUT = NCCL_TESTS_FIXTURES / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"

# FAKE_BEHAVIOUR: ok | hang_first (the first call hangs) | killed_first (the first call dies as srun reports a
# task killed by the runtime) | aborted_first (the first call prints what srun 24.x printed in a CI run when a revived
# node's slurmd could not start task 1 of a requeued job's step, and exits 0 as srun did) | hang_ring (hangs whenever
# NCCL_ALGO=Ring).
_FAKE = r'''#!{python} -S
import os, sys
calls = {calls!r}
n = len(open(calls).read().splitlines()) if os.path.exists(calls) else 0
with open(calls, "a") as f:
    f.write("call\n")
mode = os.environ.get("FAKE_BEHAVIOUR", "ok")
if (mode == "hang_first" and n == 0) or (mode == "hang_ring" and os.environ.get("NCCL_ALGO") == "Ring"):
    print("# nccl-tests stand-in: hanging", flush=True)
    os.execvp("sleep", [{marker!r}, "300"])
if mode == "killed_first" and n == 0:
    sys.stderr.write("srun: error: node1: task 0: Killed\n")
    sys.exit(137)
if mode == "aborted_first" and n == 0:
    sys.stderr.write("srun: error: task 1 launch failed: Unspecified error\n"
                     "srun: launch/slurm: launch_p_step_launch: StepId=127.1 aborted before step completely launched.\n"
                     "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
                     "srun: error: Timed out waiting for job step to complete\n")
    sys.exit(0)
sys.stdout.write(open({output!r}).read())
'''


@pytest.fixture
def fake_nccl_tests(tmp_path):
    bin_dir = tmp_path / "nccl-tests"
    calls = tmp_path / "calls.txt"
    marker = f"collscope-launch-{os.getpid()}"
    write_executable(bin_dir / "all_reduce_perf", _FAKE.format(python=sys.executable, calls=str(calls),
                                                               marker=marker, output=str(OUTPUT)))
    return bin_dir, calls, marker


def _spec(bin_dir: Path, timeout_s: float = 30.0) -> SweepSpec:
    return SweepSpec(name="launch", engine="nccl-tests", nranks=2, min_bytes=8, max_bytes=64, factor=8,
                     timeout_s=timeout_s, nccl_tests_dir=str(bin_dir), check=False)


def _plan(spec: SweepSpec, grid: list[dict[str, str]], repeats: int = 1) -> Plan:
    points = tuple(Point(point_id_for(spec, "all_reduce", s, r), "all_reduce", s, r)
                   for r in range(repeats) for s in grid)
    return Plan(spec, points)


def _options(**kw) -> RunOptions:
    launch = LaunchOptions(python=sys.executable, as_root=os.geteuid() == 0, local_cores=len(os.sched_getaffinity(0)))
    return RunOptions(launcher=kw.pop("launcher", "local"), launch=kw.pop("launch", launch), progress=False, **kw)


def _alive(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def test_a_point_cancelled_by_sigterm_is_measured_again_by_a_resume(tmp_path, fake_nccl_tests, monkeypatch):
    bin_dir, calls, marker = fake_nccl_tests
    monkeypatch.setenv("FAKE_BEHAVIOUR", "hang_first")
    plan = _plan(_spec(bin_dir), [{}])
    point = plan.points[0].point_id
    out = tmp_path / "res"

    sigterm_self_once(calls.exists, 0.5)
    with pytest.raises(SweepTerminated):
        run_sweep(plan, out, _options(), meta={})
    results = ResultsDir(out)
    failure = results.failures()[point]
    assert failure.reason == "cancelled" and "a resume measures it again" in failure.detail
    # the same command again (a requeued job reruns its script) measures the point; nothing was deleted
    again = run_sweep(plan, out, _options(), meta={})
    assert [(o.status, o.reason) for o in again.outcomes] == [("done", None)]
    assert [r.size_bytes for r in results.read_point(point)] == [8, 8, 64, 64]
    log = results.log_path(point).read_text()
    assert log.count("=== collscope attempt") == 2 and "nccl-tests stand-in: hanging" in log
    assert results.failures() == {}
    status = results.status()
    assert (status.done, status.failed, status.pending) == (1, 0, 0)
    assert _alive(marker) == []


@pytest.mark.parametrize(("behaviour", "words"), [
    ("killed_first", "launcher error (node1: task 0: killed); started once more"),
    # srun exits 0 after aborting a step whose task 1 never started: not "the engine wrote no records" (a parse
    # error that fails the sweep) but a launcher error
    ("aborted_first", "launcher error (srun could not start task 1 (Unspecified error): the step was aborted "
                      "before all its tasks ran); started once more"),
])
def test_a_launch_failure_within_seconds_is_started_once_more(tmp_path, fake_nccl_tests, monkeypatch, behaviour,
                                                              words):
    bin_dir, calls, _ = fake_nccl_tests
    monkeypatch.setenv("FAKE_BEHAVIOUR", behaviour)
    monkeypatch.setattr(attempt, "QUICK_RETRY_PAUSE_S", 0.0)
    plan = _plan(_spec(bin_dir), [{}])
    outcome = run_sweep(plan, tmp_path / "res", _options(), meta={})
    assert [(o.status, o.reason) for o in outcome.outcomes] == [("done", None)]
    results = ResultsDir(tmp_path / "res")
    log = results.log_path(plan.points[0].point_id).read_text()
    assert words in log
    assert log.count("=== collscope attempt") == 2 and len(calls.read_text().splitlines()) == 2
    assert not results.failures_path.exists()


def test_a_step_aborted_after_the_quick_window_is_an_exit_code_failure_not_a_parse_error(tmp_path, fake_nccl_tests,
                                                                                         monkeypatch):
    bin_dir, calls, _ = fake_nccl_tests
    monkeypatch.setenv("FAKE_BEHAVIOUR", "aborted_first")
    monkeypatch.setattr(attempt, "QUICK_LAUNCH_FAILURE_S", 0.0, raising=False)
    plan = _plan(_spec(bin_dir), [{}])
    outcome = run_sweep(plan, tmp_path / "res", _options(), meta={})
    assert [(o.status, o.reason) for o in outcome.outcomes] == [("failed", "exit code")]
    detail = outcome.outcomes[0].detail
    assert detail.startswith("exit code 0 with nothing measured (srun could not start task 1 (Unspecified error)")
    assert "srun timed out waiting for the step's tasks to end" in detail
    assert len(calls.read_text().splitlines()) == 1


def test_a_launch_error_after_the_quick_window_counts_at_once(tmp_path, fake_nccl_tests, monkeypatch):
    bin_dir, calls, _ = fake_nccl_tests
    monkeypatch.setenv("FAKE_BEHAVIOUR", "killed_first")
    monkeypatch.setattr(attempt, "QUICK_LAUNCH_FAILURE_S", 0.0, raising=False)
    plan = _plan(_spec(bin_dir), [{}])
    outcome = run_sweep(plan, tmp_path / "res", _options(), meta={})
    assert [(o.status, o.reason) for o in outcome.outcomes] == [("failed", "exit code")]
    assert "exit code 137 (node1: task 0: killed)" in outcome.outcomes[0].detail
    assert len(calls.read_text().splitlines()) == 1


def test_a_hung_configuration_costs_one_timeout_and_retry_failed_runs_the_rest(tmp_path, fake_nccl_tests,
                                                                              monkeypatch):
    bin_dir, _, marker = fake_nccl_tests
    monkeypatch.setenv("FAKE_BEHAVIOUR", "hang_ring")
    plan = _plan(_spec(bin_dir, timeout_s=2.0), [{}, {"NCCL_ALGO": "Ring"}], repeats=3)
    out = tmp_path / "res"
    start = time.monotonic()
    outcome = run_sweep(plan, out, _options(), meta={})
    elapsed = time.monotonic() - start
    by_id = {o.point_id: o for o in outcome.outcomes}
    ring = [p for p in plan.points if p.settings]
    default = [p for p in plan.points if not p.settings]
    assert all(by_id[p.point_id].status == "done" for p in default)
    assert (by_id[ring[0].point_id].status, by_id[ring[0].point_id].reason) == ("failed", "timeout")
    for p in ring[1:]:
        skipped = by_id[p.point_id]
        assert (skipped.status, skipped.reason) == ("skipped", HUNG_REASON)
        assert f"repeat 0 of this configuration ({ring[0].point_id}) timed out" in skipped.detail
    assert elapsed < 2 * 2.0 + 20, elapsed  # one timeout, not three
    results = ResultsDir(out)
    assert {pid: f.reason for pid, f in results.failures().items()} == {
        ring[0].point_id: "timeout", ring[1].point_id: HUNG_REASON, ring[2].point_id: HUNG_REASON}
    assert results.status().failure_reasons == {"timeout": 1, HUNG_REASON: 2}
    # a plain resume leaves them alone; --retry-failed runs every one (the configuration no longer hangs)
    assert all(o.status == "skipped" for o in run_sweep(plan, out, _options(), meta={}).outcomes)
    monkeypatch.setenv("FAKE_BEHAVIOUR", "ok")
    retried = run_sweep(plan, out, _options(retry_failed=True), meta={})
    assert sorted(o.point_id for o in retried.outcomes if o.status == "done") == sorted(p.point_id for p in ring)
    assert results.status().done == 6 and results.failures() == {}
    time.sleep(0.3)
    assert _alive(marker) == []


def test_a_missing_nccl_tests_binary_stops_the_sweep_before_the_first_point(tmp_path):
    empty = tmp_path / "no-nccl-tests"
    empty.mkdir()
    plan = _plan(_spec(empty), [{}, {"NCCL_ALGO": "Ring"}])
    with pytest.raises(ConfigError, match=r"all_reduce_perf not found.*nothing was run or recorded"):
        run_sweep(plan, tmp_path / "res", _options(), meta={})
    assert not (tmp_path / "res" / "failures.jsonl").exists()
    assert not list((tmp_path / "res").glob("points/*.log"))


def test_a_missing_mpirun_stops_the_sweep_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    spec = SweepSpec(name="mpi", engine="mpi", nranks=2, min_bytes=8, max_bytes=64, timeout_s=30)
    plan = _plan(spec, [{}])
    launch = LaunchOptions(python=sys.executable, mpirun="mpirun")
    with pytest.raises(ConfigError, match=r"mpirun not found \(PATH\).*install Open MPI.*nothing was run"):
        run_sweep(plan, tmp_path / "res", _options(launcher="mpirun", launch=launch), meta={})
    assert not (tmp_path / "res" / "failures.jsonl").exists()
    # the same with the launcher's absolute path gone
    gone = LaunchOptions(python=sys.executable, mpirun=str(tmp_path / "gone" / "mpirun"))
    with pytest.raises(ConfigError, match=r"mpirun not found \(.*gone/mpirun\)"):
        run_sweep(plan, tmp_path / "res", _options(launcher="mpirun", launch=gone), meta={})


def test_a_missing_binary_through_the_cli_exits_2_and_records_nothing(tmp_path):
    empty = tmp_path / "no-nccl-tests"
    empty.mkdir()
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: nt\nengine: nccl-tests\nops: [all_reduce]\nmin_bytes: 8\nmax_bytes: 64\nnranks: 2\n"
                    f"nccl_tests_dir: {empty}\n")
    out = tmp_path / "res"
    result = CliRunner().invoke(main, ["sweep", "run", str(spec), "--launcher", "local", "--out", str(out),
                                       "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "error: all_reduce_perf not found" in result.stderr and "nothing was run or recorded" in result.stderr
    assert "Traceback" not in result.output
    assert not (out / "failures.jsonl").exists()


def test_a_launch_error_of_an_earlier_run_is_retried_without_retry_failed(tmp_path, fake_nccl_tests):
    bin_dir, _, _ = fake_nccl_tests
    plan = _plan(_spec(bin_dir), [{}, {"NCCL_ALGO": "Ring"}])
    out = tmp_path / "res"
    results = ResultsDir(out)
    results.prepare(plan.sweep_id, plan.spec.to_dict(), plan.to_dict(), {})
    launch_failed, measured_failed = plan.points
    results.record_failure(launch_failed.point_id, "launch error", "mpirun not found on PATH; install Open MPI")
    results.record_failure(measured_failed.point_id, "exit code", "exit code 1")
    outcome = {o.point_id: o for o in run_sweep(plan, out, _options(), meta={}).outcomes}
    assert outcome[launch_failed.point_id].status == "done"
    assert (outcome[measured_failed.point_id].status, outcome[measured_failed.point_id].reason) == \
        ("skipped", "failed before (use --retry-failed)")


def test_which_failures_a_resume_runs_again():
    assert attempt.resumed_failure("cancelled", "the sweep was stopped by SIGTERM while this point ran")
    assert attempt.resumed_failure("launch error", "mpirun not found on PATH")
    # a node lost under the point (the launcher's words, as launch_diagnosis writes them) is not the configuration's
    assert attempt.resumed_failure("exit code", "exit code 1 (node failure on node2; node1: task 0: killed)")
    assert attempt.resumed_failure("timeout", "timeout after 60 s (Slurm cancelled step 77.3 on node2 due to "
                                              "node failure)")
    for reason, detail in (("exit code", "exit code 1"), ("timeout", "timeout after 60 s"),
                           ("wrong values", "wrong values at 1 size(s): 8"), (HUNG_REASON, "repeat 0 ... timed out"),
                           ("exit code", "exit code 1 (node3: task 0: segmentation fault)")):
        assert not attempt.resumed_failure(reason, detail), (reason, detail)


def test_a_rank_that_crashed_inside_mpi_init_is_a_launch_failure():
    """Open MPI's crash backtrace through MPI_Init (seen on the simulated cluster right after a killed step: a rank
    segfaults in PMPI_Init_thread) means the launch failed before anything was measured; a plain failure of the
    measured op's frames does not."""
    from collscope.sweeps.diagnose import launcher_failure

    crash = ("[gpu-b2:31207] *** Process received signal ***\n"
             "[gpu-b2:31207] Signal: Segmentation fault (11)\n"
             "[gpu-b2:31207] [ 9] /opt/openmpi/lib/libmpi.so.40(ompi_mpi_init+0x6d2)[0x7f00deadb000]\n"
             "[gpu-b2:31207] [10] /opt/openmpi/lib/libmpi.so.40(PMPI_Init_thread+0xbf)[0x7f00deadc000]\n"
             "srun: error: gpu-b2: task 1: Segmentation fault\n")
    assert "crashed inside MPI_Init" in (launcher_failure(crash) or "")
    in_allreduce = crash.replace("ompi_mpi_init+0x6d2", "ompi_coll_base_allreduce_intra_ring+0x1f").replace(
        "PMPI_Init_thread+0xbf", "PMPI_Allreduce+0x3a")
    assert launcher_failure(in_allreduce) is None


def test_srun_task_launch_failures_in_each_slurm_wording_are_launcher_failures():
    """Slurm 22-24 print "task N launch failed: <why>" (this project's CI); others print "Task launch for
    StepId=N.M failed on node X: <why>" then "Application launch failed: <why>" (published CI logs): both say the
    step's tasks never ran, which no configuration causes."""
    from collscope.sweeps.diagnose import launch_diagnosis, launcher_failure

    ours = "srun: error: task 1 launch failed: Unspecified error\n"
    theirs = ("srun: error: Task launch for StepId=4411.7 failed on node gpu-a17: Communication connection failure\n"
              "srun: error: Application launch failed: Communication connection failure\n")
    assert launcher_failure(ours) == ("srun could not start task 1 (Unspecified error): the step was aborted "
                                      "before all its tasks ran")
    assert launcher_failure(theirs) == ("srun could not start the tasks of step StepId=4411.7 on gpu-a17 "
                                        "(Communication connection failure): the step was aborted before all its "
                                        "tasks ran")
    assert launch_diagnosis(theirs) == launcher_failure(theirs)
    assert launcher_failure("# nccl-tests stand-in\n# Avg bus bandwidth    : 0.005\n") is None
