"""evidence_runs: a verification run at NCCL_DEBUG=INFO per configuration even with nothing forced, so that the log
says what NCCL chose at each size (a canary's sides differ by library, plugin or image, not by NCCL_* settings),
and every repeat of the configuration finds that log through its check file."""

from __future__ import annotations

import json
import os
import sys

from collscope.analysis.load import load_results
from collscope.analysis.logged_choices import logged_choices
from collscope.analysis.point_evidence import point_logs
from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from tests.fakes import NCCL_TESTS_FIXTURES

RING_ONLY_OUTPUT = NCCL_TESTS_FIXTURES / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"


def _run(tmp_path, fake_tools, *, evidence: bool):
    bin_dir = tmp_path / "nccl-tests"
    fake_tools.nccl_tests("all_reduce", RING_ONLY_OUTPUT, directory=bin_dir, info_at_debug_info=True)
    spec = SweepSpec(name="evidence", engine="nccl-tests", nranks=2, min_bytes=8, max_bytes=64, factor=8,
                     timeout_s=60, nccl_tests_dir=str(bin_dir), repeats=2)
    points = tuple(Point(point_id_for(spec, "all_reduce", {}, r), "all_reduce", {}, r) for r in range(2))
    launch = LaunchOptions(python=sys.executable, as_root=os.geteuid() == 0, local_cores=len(os.sched_getaffinity(0)))
    options = RunOptions(launcher="local", launch=launch, progress=False, evidence_runs=evidence)
    out = tmp_path / ("with" if evidence else "without")
    outcome = run_sweep(Plan(spec, points), out, options, meta={})
    assert [o.status for o in outcome.outcomes] == ["done", "done"]
    return ResultsDir(out), points


def test_every_repeat_finds_its_configurations_choices(tmp_path, fake_tools):
    results, (first, second) = _run(tmp_path, fake_tools, evidence=True)
    assert "Algo RING proto LL" in (results.points_dir / f"{first.point_id}.verify.log").read_text()
    assert not (results.points_dir / f"{second.point_id}.verify.log").exists()  # verified once
    check = json.loads(results.check_path(second.point_id).read_text())
    assert check["configuration"] == first.point_id
    (log,) = [lg for lg in point_logs(results.points_dir, second.point_id) if lg.size_choices]
    assert {(c.size_bytes, c.algorithm, c.protocol) for c in log.size_choices} >= {(8, "Ring", "LL")}
    frame = load_results(results.root)
    choices = logged_choices([results.root], frame)
    assert choices[("default", "all_reduce", 8)] == ("Ring", "LL")


def test_without_evidence_runs_nothing_forced_means_no_info_run(tmp_path, fake_tools):
    results, (first, _) = _run(tmp_path, fake_tools, evidence=False)
    assert not list(results.points_dir.glob("*.verify.log"))
    assert not results.check_path(first.point_id).exists() or \
        "configuration" not in json.loads(results.check_path(first.point_id).read_text())
