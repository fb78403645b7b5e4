"""Persistent workers without MPI: which points share a launch, the worker's launch and control lines."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from collscope.collectives.harness.worker import effective_env, read_control_line
from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.persistent import WORKER_MODULE, control_line, dry_run_commands, plan_groups, worker_launch
from collscope.sweeps.plan import plan_sweep, preset
from collscope.sweeps.runner import RunOptions
from collscope.sweeps.spec import Point, SweepSpec, point_id_for
from collscope.vocab.knobs import KNOBS
from collscope.vocab.switches import SWITCHES, switch_of

ALGO = "OMPI_MCA_coll_tuned_allreduce_algorithm"
DYN = "OMPI_MCA_coll_tuned_use_dynamic_rules"


def _options(launcher: str = "local", **launch) -> RunOptions:
    return RunOptions(launcher=launcher, launch=LaunchOptions(python="/venv/bin/python", as_root=True, **launch),  # type: ignore[arg-type]
                      progress=False, workers="persistent")


def _point(spec: SweepSpec, settings: dict[str, str], repeat: int = 0) -> Point:
    return Point(point_id_for(spec, "all_reduce", settings, repeat), "all_reduce", settings, repeat)


def test_every_knob_says_how_it_switches_with_a_source():
    assert set(KNOBS) <= set(SWITCHES)
    assert all(s.source.strip() for s in SWITCHES.values())
    assert switch_of(ALGO).kind == "mpi_t"
    assert switch_of("OMPI_MCA_coll_tuned_allgather_algorithm").kind == "mpi_t"
    assert switch_of("NCCL_ALGO").kind == switch_of("NCCL_PROTO").kind == "communicator"
    assert switch_of("NCCL_BUFFSIZE").kind == "launch"
    assert switch_of(DYN).kind == "launch"
    assert switch_of("SOMETHING_ELSE").kind == "launch"


def test_mpi_algos_preset_is_one_launch():
    plan = plan_sweep(preset("mpi-algos"))
    groups = plan_groups(plan.spec, plan.points)
    assert len(groups) == 1 and groups[0].persistent
    assert groups[0].points == plan.points
    assert groups[0].launch_settings == {DYN: "1"}


def test_a_launch_only_knob_gets_its_own_launch():
    spec = SweepSpec(name="g", engine="mpi", nranks=2)
    points = [_point(spec, {}), _point(spec, {DYN: "1", ALGO: "4"}), _point(spec, {"NCCL_BUFFSIZE": "4194304"}),
              _point(spec, {DYN: "1", ALGO: "3"}), _point(spec, {"NCCL_BUFFSIZE": "4194304", DYN: "1", ALGO: "1"})]
    groups = plan_groups(spec, points)
    assert [[points.index(p) for p in g.points] for g in groups] == [[0, 1, 3], [2, 4]]
    assert groups[1].launch_settings == {"NCCL_BUFFSIZE": "4194304", DYN: "1"}


def test_dynamic_rules_in_fixed_env_is_left_as_the_user_set_it():
    spec = SweepSpec(name="g", engine="mpi", nranks=2, fixed_env={DYN: "0"})
    groups = plan_groups(spec, [_point(spec, {})])
    assert groups[0].launch_settings == {}


@pytest.mark.parametrize("engine", ["torch", "nccl-tests"])
def test_other_engines_keep_one_launch_per_point(engine):
    spec = SweepSpec(name="g", engine=engine, nranks=2, backend="gloo" if engine == "torch" else None)
    points = [_point(spec, {}), _point(spec, {"NCCL_ALGO": "Ring"})]
    groups = plan_groups(spec, points)
    assert [len(g.points) for g in groups] == [1, 1] and not any(g.persistent for g in groups)


def test_worker_launch_replaces_only_the_per_rank_program(tmp_path):
    spec = SweepSpec(name="g", engine="mpi", nranks=2, fixed_env={"NCCL_SOCKET_IFNAME": "a b;c"})
    group = plan_groups(spec, [_point(spec, {}), _point(spec, {DYN: "1", ALGO: "4"})])[0]
    control, status = tmp_path / "c ontrol", tmp_path / "status"
    cmd = worker_launch(spec, group, _options("mpirun", hostfile="hosts"), control=control, status=status)
    argv = list(cmd.argv)
    assert argv[:5] == ["mpirun", "-np", "2", "--hostfile", "hosts"]
    for name in (DYN, "NCCL_SOCKET_IFNAME"):
        assert argv[argv.index(name) - 1] == "-x"
    tail = argv[argv.index("/venv/bin/python"):]
    assert tail == ["/venv/bin/python", "-m", WORKER_MODULE, "--control", str(control), "--status", str(status),
                    "--rank-timeout", "540", "--added", DYN]
    assert "bench" not in argv and cmd.env[DYN] == "1" and cmd.env["NCCL_SOCKET_IFNAME"] == "a b;c"
    local = worker_launch(spec, group, _options(local_cores=1), control=control, status=status)
    assert list(local.argv[:4]) == ["mpirun", "-np", "2", "--oversubscribe"]


def test_control_line_carries_the_point_as_a_per_point_launch_sees_it(tmp_path, monkeypatch):
    monkeypatch.delenv(DYN, raising=False)
    spec = SweepSpec(name="g", engine="mpi", nranks=2, min_bytes=8, max_bytes=1024, fixed_env={"X_Y": "1"})
    forced = control_line(spec, _point(spec, {DYN: "1", ALGO: "4"}), tmp_path / "p.jsonl", [DYN], timeout_s=9)
    assert forced["cvars"] == {"coll_tuned_allreduce_algorithm": 4}
    assert forced["env"] == {"X_Y": "1", DYN: "1", ALGO: "4"}
    assert forced["spec"]["min_bytes"] == 8 and forced["spec"]["timeout_s"] == 9
    default = control_line(spec, _point(spec, {}), tmp_path / "p.jsonl", [DYN], timeout_s=9)
    assert default["cvars"] == {} and default["env"] == {"X_Y": "1"}
    monkeypatch.setenv(DYN, "0")  # the user's own value is what a per-point default launch would have seen
    assert control_line(spec, _point(spec, {}), tmp_path / "p", [DYN], timeout_s=9)["env"][DYN] == "0"


def test_effective_env_drops_what_the_worker_launch_added():
    environ = {DYN: "1", "PATH": "/bin", "OMPI_MCA_x": "2"}
    assert effective_env(environ, {DYN}, {}) == {"PATH": "/bin", "OMPI_MCA_x": "2"}
    assert effective_env(environ, {DYN}, {DYN: "1", ALGO: "4"})[ALGO] == "4"


def test_control_lines_are_read_whole_and_bad_ones_refused():
    class Growing(io.BytesIO):
        """A file the writer is still appending to: the second half of a line arrives after one poll."""

        def __init__(self) -> None:
            super().__init__(b'{"point_id": "a", "x"')
            self.polls = 0

        def readline(self, size: int | None = -1) -> bytes:
            line = super().readline()
            if not line and self.polls == 0:
                self.polls += 1
                pos = self.tell()
                self.seek(0, os.SEEK_END)
                self.write(b': 1}\n{"end": true}\n')
                self.seek(pos)
            return line

    fh, buffer = Growing(), []
    assert read_control_line(fh, buffer, 5, sleep=lambda s: None) == {"point_id": "a", "x": 1}
    assert read_control_line(fh, buffer, 5, sleep=lambda s: None) == {"end": True}
    with pytest.raises(ValueError, match="no control line"):
        read_control_line(fh, buffer, 0.01, sleep=lambda s: None)
    with pytest.raises(ValueError):
        read_control_line(io.BytesIO(b"[1, 2]\n"), [], 1)


def test_dry_run_prints_one_launch_with_its_points(tmp_path):
    plan = plan_sweep(preset("demo"))
    lines = dry_run_commands(ResultsDir(Path(tmp_path)), plan, plan.points, _options())
    assert len(lines) == 1 + len(plan.skipped)
    text = lines[0]
    assert f"{len(plan.points)} point(s)" in text and WORKER_MODULE in text
    assert all(p.point_id in text for p in plan.points)
    assert not (tmp_path / "workers").exists()


def test_workers_option_is_checked():
    from collscope.errors import ConfigError

    with pytest.raises(ConfigError, match="per-point, persistent"):
        RunOptions(launcher="local", launch=LaunchOptions(python=sys.executable), workers="pool")  # type: ignore[arg-type]
