"""The sweep session (request -> grid or adaptive run) and the launch environment of this machine."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from collscope.errors import ConfigError
from collscope.sweeps import environment
from collscope.sweeps.environment import check_launcher, find_tool, launch_options
from collscope.sweeps.session import SweepRequest, load_request_spec, run_session
from collscope.topo.samples import sample_path


def test_find_tool_prefers_path_then_beside_python(tmp_path, monkeypatch):
    assert find_tool("sh") == "sh"
    assert find_tool("no-such-tool-anywhere") is None
    fake_python = tmp_path / "bin" / "python"
    fake_python.parent.mkdir()
    (tmp_path / "bin" / "mpirun").write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "executable", str(fake_python))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert find_tool("mpirun") == str(tmp_path / "bin" / "mpirun")


def test_launch_options_of_this_machine(monkeypatch):
    monkeypatch.setattr(environment, "find_tool", lambda name: "/opt/mpi/bin/mpirun")
    local = launch_options("local", "mpi")
    assert local.python == sys.executable and local.mpirun == "/opt/mpi/bin/mpirun"
    assert local.as_root == (os.geteuid() == 0) and local.local_cores == len(os.sched_getaffinity(0))
    assert local.srun_mpi is None and local.oversubscribe is None
    srun = launch_options("srun", "mpi")
    assert srun.srun_mpi == "pmix" and srun.local_cores is None
    assert launch_options("srun", "torch").srun_mpi is None
    assert launch_options("srun", "mpi", srun_mpi="pmi2").srun_mpi == "pmi2"
    assert launch_options("mpirun", "mpi", oversubscribe=True, hostfile="h").oversubscribe is True


def test_a_missing_mpirun_is_named_only_when_required(monkeypatch):
    monkeypatch.setattr(environment, "find_tool", lambda name: None)
    assert launch_options("local", "mpi").mpirun == "mpirun"
    with pytest.raises(ConfigError, match="mpirun not found: install Open MPI"):
        launch_options("local", "mpi", require_mpirun=True)


def test_check_launcher():
    with pytest.raises(ConfigError, match="inside a Slurm allocation"):
        check_launcher("srun", env={})
    check_launcher("srun", env={"SLURM_JOB_ID": "7"})
    check_launcher("srun", env={}, dry_run=True)
    with pytest.raises(ConfigError, match="--oversubscribe applies to --launcher mpirun"):
        check_launcher("local", oversubscribe=True, env={})
    check_launcher("mpirun", oversubscribe=True, env={})


def test_request_needs_exactly_one_spec_source(tmp_path):
    with pytest.raises(ConfigError, match="either SPEC.yaml or --preset"):
        SweepRequest(out_dir=tmp_path)
    with pytest.raises(ConfigError, match="either SPEC.yaml or --preset"):
        SweepRequest(out_dir=tmp_path, preset="demo", spec_file=tmp_path / "s.yaml")
    with pytest.raises(ConfigError, match="grid, adaptive"):
        SweepRequest(out_dir=tmp_path, preset="demo", strategy="random")  # type: ignore[arg-type]


def test_overrides_win_and_none_is_no_override(tmp_path):
    spec = load_request_spec(SweepRequest(out_dir=tmp_path, preset="demo",
                                          overrides={"nranks": 4, "max_bytes": 1024, "iters": None}))
    base = load_request_spec(SweepRequest(out_dir=tmp_path, preset="demo"))
    assert spec.nranks == 4 and spec.max_bytes == 1024 and spec.iters == base.iters


def test_dry_run_grid_prints_commands_and_writes_nothing(tmp_path):
    lines: list[str] = []
    out = tmp_path / "out"
    outcome = run_session(SweepRequest(out_dir=out, preset="demo", overrides={"nranks": 3}, dry_run=True),
                          echo=lines.append)
    assert outcome.strategy == "grid" and outcome.grid is not None and outcome.adaptive is None
    assert len(outcome.commands) == len(outcome.plan.points) > 0
    assert all("-np 3" in c and "collscope bench" in c for c in outcome.commands)
    assert lines[0].startswith(f"sweep {outcome.plan.sweep_id}: {len(outcome.plan.points)} point(s)")
    assert outcome.failed == [] and not out.exists()


def test_dry_run_adaptive_says_later_rounds_come_from_measurements(tmp_path):
    outcome = run_session(SweepRequest(out_dir=tmp_path / "o", preset="demo", strategy="adaptive", dry_run=True),
                          echo=lambda m: None)
    assert outcome.adaptive is not None and outcome.grid is None
    assert outcome.commands[-1].startswith("# later rounds")


def test_topology_of_one_node_is_used_and_a_cluster_dir_refused(tmp_path):
    run_session(SweepRequest(out_dir=tmp_path / "a", preset="demo", dry_run=True,
                             topo_paths=(str(sample_path()),)), echo=lambda m: None)
    cluster = tmp_path / "cluster"
    for node in ("node1", "node2"):
        shutil.copytree(sample_path(), cluster / node)
        meta = json.loads((cluster / node / "meta.json").read_text())
        (cluster / node / "meta.json").write_text(json.dumps({**meta, "host": node}))
    with pytest.raises(ConfigError, match="not a cluster directory"):
        run_session(SweepRequest(out_dir=tmp_path / "b", preset="demo", dry_run=True, topo_paths=(str(cluster),)),
                    echo=lambda m: None)


def test_srun_outside_an_allocation_fails_before_running(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(ConfigError, match="inside a Slurm allocation"):
        run_session(SweepRequest(out_dir=tmp_path / "o", preset="demo", launcher="srun"), echo=lambda m: None)
    assert not Path(tmp_path / "o").exists()
