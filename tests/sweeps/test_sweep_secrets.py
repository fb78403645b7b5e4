"""A secret forced by a spec's ``fixed_env`` (``NCCL_IB_PASSWORD``, ``*TOKEN*``) is redacted in sweep.json's copy
of the spec as everywhere else (issue 22 item 11), and the launched program still gets the real value.

The program is a stand-in all_reduce_perf (tests/fakes.py) that records the environment it was started with and
prints a recorded nccl-tests 2.19.6 output."""

from __future__ import annotations

import json
import os
import sys

from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from collscope.vocab.secrets import REDACTED
from tests.fakes import NCCL_TESTS_FIXTURES, Answer

OUTPUT = NCCL_TESTS_FIXTURES / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"
SECRETS = {"NCCL_IB_PASSWORD": "pw-7f3a-hunter2", "NCCL_PLUGIN_TOKEN": "tok-91c2e"}


def test_a_forced_secret_is_redacted_on_disk_and_reaches_the_program(tmp_path, fake_tools):
    bin_dir = tmp_path / "nccl-tests"
    seen = tmp_path / "seen.json"
    fake_tools.add("all_reduce_perf", Answer(stdout=OUTPUT), record_to=seen, directory=bin_dir)
    spec = SweepSpec(name="secret", engine="nccl-tests", nranks=2, min_bytes=8, max_bytes=64, factor=8,
                     timeout_s=60, nccl_tests_dir=str(bin_dir), check=False,
                     fixed_env={**SECRETS, "NCCL_SOCKET_IFNAME": "eth0"})
    plan = Plan(spec, (Point(point_id_for(spec, "all_reduce", {}, 0), "all_reduce", {}, 0),))
    launch = LaunchOptions(python=sys.executable, as_root=os.geteuid() == 0, local_cores=len(os.sched_getaffinity(0)))
    out = tmp_path / "res"
    outcome = run_sweep(plan, out, RunOptions(launcher="local", launch=launch, progress=False), meta={})
    assert [o.status for o in outcome.outcomes] == ["done"], outcome.outcomes

    env = json.loads(seen.read_text())["env"]
    assert {k: env.get(k) for k in SECRETS} == SECRETS  # the program got the real values

    recorded = json.loads((out / "sweep.json").read_text())["spec"]["fixed_env"]
    assert recorded == {"NCCL_IB_PASSWORD": REDACTED, "NCCL_PLUGIN_TOKEN": REDACTED, "NCCL_SOCKET_IFNAME": "eth0"}
    everything = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert not any(value in everything for value in SECRETS.values())
    # the same command again resumes the same sweep (the recorded spec is compared redacted)
    again = run_sweep(plan, out, RunOptions(launcher="local", launch=launch, progress=False), meta={})
    assert [o.status for o in again.outcomes] == ["skipped"]
    assert ResultsDir(out).status().done == 1
