"""A rail is part of a configuration's identity (issue 26 item 2).

Points pinned to rail 0, rail 1 or to no rail are three configurations, never repeats of one: the rail is
recorded in every record (``rail``; the harnesses read it from their engine's rail variable, gloo and mpi
included) and names the configuration (``rail=cl1``, or the tuning variable that pins it). A ``collscope
locate`` directory analyses as its tests (kind, nodes, rail), never pooling rail tests with all-rail tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

import collscope.cli.locate as cli_locate
from collscope.analysis.load import load_results
from collscope.cli import main
from collscope.collectives.allocation import GPU_VARIABLES
from collscope.collectives.record import Measurement, write_jsonl
from collscope.collectives.spec import rail_pinned
from collscope.locate.model import TestOutcome, TestSpec
from collscope.vocab.configs import config_of, rail_of
from tests.collectives.launch import (
    clean_env,
    collscope_program,
    mpirun_argv,
    need_mpi,
    need_torchrun,
    records,
    run,
    torchrun_argv,
)
from tests.locate.test_cli_locate import RecordingFabric

SIZES = (64 << 10, 1 << 20, 16 << 20)
MPI_RAIL = ("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include")


def _record(size: int, busbw_gbps: float, repeat: int, settings: dict[str, str], point_id: str,
            **extra: object) -> Measurement:
    return Measurement.from_timing(op="all_reduce", size_bytes=size, nranks=2, time_us=size / (busbw_gbps * 1e3),
                                   engine="mpi", backend="mpi", count=size // 4, dtype="float32", redop="sum",
                                   root=None, in_place=False, nnodes=2, iters=10, warmup=3, repeat=repeat,
                                   settings=settings, point_id=point_id, sweep_id="sw-rails",
                                   hosts=("node1", "node2"), **extra)  # type: ignore[arg-type]


def _mpi_rails_results(root: Path) -> Path:
    """An ``mpi-rails`` sweep as ``sweep run`` writes it: default, rail cl0, rail cl1 (cl1 50x slower), three
    repeats each, every point on the same two nodes."""
    (root / "points").mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"sweep_id": "sw-rails"}))
    points = {"p-default": ({}, 0.6), "p-cl0": (dict.fromkeys(MPI_RAIL, "cl0"), 0.6),
              "p-cl1": (dict.fromkeys(MPI_RAIL, "cl1"), 0.012)}
    for pid, (settings, busbw) in points.items():
        recs = [_record(size, busbw * (1 + 0.02 * r), r, settings, pid, rail=rail_of(settings))
                for size in SIZES for r in range(3)]
        write_jsonl(root / "points" / f"{pid}.jsonl", recs)
    return root


def test_rails_name_their_configurations() -> None:
    cl1 = dict.fromkeys(MPI_RAIL, "cl1")
    assert config_of({}) == "default"
    assert config_of(cl1) == "rail=cl1"  # Open MPI's interface variables are plumbing: the rail names it
    assert config_of({"OMPI_MCA_coll_tuned_allreduce_algorithm": "4", **cl1}) == \
        "OMPI_MCA_coll_tuned_allreduce_algorithm=4;rail=cl1"
    assert config_of({}, rail="cl1") == "rail=cl1"  # a record's rail, when its settings do not pin one
    assert config_of({"GLOO_SOCKET_IFNAME": "cl1"}, rail="cl1") == "GLOO_SOCKET_IFNAME=cl1"  # named once
    assert config_of({"NCCL_IB_HCA": "=mlx5_1"}) == "NCCL_IB_HCA==mlx5_1"
    assert rail_pinned("mpi", None, {"OMPI_MCA_btl_tcp_if_include": "cl1"}) == "cl1"
    assert rail_pinned("torch", "gloo", {"GLOO_SOCKET_IFNAME": "cl0", "OMPI_MCA_btl_tcp_if_include": "cl1"}) == "cl0"
    assert rail_pinned("torch", "nccl", {"NCCL_IB_HCA": "=mlx5_3"}) == "=mlx5_3"
    assert rail_pinned("mpi", None, {"GLOO_SOCKET_IFNAME": "cl0"}) is None  # another engine's rail variable


def test_a_rail_sweep_analyses_each_rail_apart(tmp_path: Path) -> None:
    results = _mpi_rails_results(tmp_path / "results")
    frame = load_results(results)
    assert set(frame["config"]) == {"default", "rail=cl0", "rail=cl1"}
    assert dict(frame.groupby("config", observed=True)["rail"].agg(lambda s: set(s.dropna()))) == {
        "default": set(), "rail=cl0": {"cl0"}, "rail=cl1": {"cl1"}}
    result = CliRunner().invoke(main, ["analyze", str(results), "--json"])
    assert result.exit_code in (0, 1), result.output[-2000:]
    doc = json.loads(result.output)
    peaks = {c["config"]: c["peak_busbw_gbps"] for c in doc["configs"]}
    assert set(peaks) == {"default", "rail=cl0", "rail=cl1"}
    assert peaks["rail=cl1"] < peaks["rail=cl0"] / 20  # the slow rail is visible, not pooled into a spread
    text = CliRunner().invoke(main, ["analyze", str(results)]).output
    assert "rail=cl1" in text
    report = CliRunner().invoke(main, ["report", str(results), "--out", str(tmp_path / "report")])
    assert report.exit_code in (0, 1), report.output[-2000:]
    assert "rail=cl1" in (tmp_path / "report" / "report.md").read_text()


def test_older_records_without_a_rail_field_are_named_by_their_settings(tmp_path: Path) -> None:
    """Results written before records had ``rail`` still keep their rails apart (the settings pin them)."""
    root = tmp_path / "old"
    (root / "points").mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"sweep_id": "sw-rails"}))
    for pid, settings in (("p-default", {}), ("p-cl1", dict.fromkeys(MPI_RAIL, "cl1"))):
        lines = []
        for r in range(2):
            d = _record(1 << 20, 0.5, r, settings, pid).to_dict()
            del d["rail"]
            lines.append(json.dumps(d))
        (root / "points" / f"{pid}.jsonl").write_text("\n".join(lines) + "\n")
    assert set(load_results(root)["config"]) == {"default", "rail=cl1"}


def test_a_hand_run_is_named_by_the_rail_it_recorded(tmp_path: Path) -> None:
    """gloo records name their interface: a record whose settings pin nothing but whose ranks ran on cl1."""
    path = tmp_path / "hand.jsonl"
    write_jsonl(path, [_record(1 << 20, 0.5, 0, {}, "a", rail="cl1"), _record(1 << 20, 0.5, 0, {}, "b")])
    assert list(load_results(path)["config"]) == ["rail=cl1", "default"]


def test_the_gloo_harness_records_its_interface(tmp_path: Path) -> None:
    torchrun = need_torchrun()
    out = tmp_path / "r.jsonl"
    res = run(torchrun_argv(torchrun, 2, "--engine", "torch", "--backend", "gloo", "--op", "all_reduce", "-b", "4K",
                            "-e", "4K", "--iters", "3", "--warmup", "1", "--out", str(out)),
              clean_env(GLOO_SOCKET_IFNAME="lo"))
    assert res.returncode == 0, res.stderr
    recs = records(out)
    assert recs and all(r.rail == "lo" for r in recs)
    assert set(load_results(out)["config"]) == {"rail=lo"}


def test_the_mpi_harness_records_its_interface(tmp_path: Path) -> None:
    mpirun = need_mpi()
    out = tmp_path / "r.jsonl"
    program = collscope_program("--engine", "mpi", "--op", "all_reduce", "-b", "4K", "-e", "4K", "--iters", "3",
                                "--warmup", "1", "--out", str(out))
    res = run(mpirun_argv(mpirun, 2, program), clean_env(OMPI_MCA_btl_tcp_if_include="lo"))
    assert res.returncode == 0, res.stderr
    recs = records(out)
    assert recs and all(r.rail == "lo" for r in recs)


class RailFabric(RecordingFabric):
    """The simulated fabric, its records pinned as the srun runner pins them: a rail test's settings carry the
    engine's rail variables and its ``rail``; an all-rail test's neither, whatever the ranks inherited."""

    def __call__(self, spec: TestSpec, repeats: int) -> TestOutcome:
        got = super().__call__(spec, repeats)
        pinned = {} if spec.rail is None else dict.fromkeys(MPI_RAIL, f"cl{spec.rail}")
        recs = tuple(msgspec.structs.replace(r, settings=pinned, rail=rail_of(pinned)) for r in got.records)
        return TestOutcome(busbw_gbps=got.busbw_gbps, time_us=got.time_us, duration_s=got.duration_s, records=recs,
                           failure=got.failure, detail=got.detail)


def test_a_locate_directory_analyses_as_its_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fabric = RailFabric(nodes=[f"node{i}" for i in range(1, 5)], slow={("node2", 1): 0.05}, rails=2)
    monkeypatch.setattr(cli_locate, "_make_runner", lambda options, work_dir, timeout_s: fabric)
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[1-4]")
    monkeypatch.setenv("SLURM_JOB_ID", "22")
    for name in GPU_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "locate"
    located = CliRunner().invoke(main, ["locate", "--rails", "2", "--json", "--out", str(out)])
    assert located.exit_code == 1, located.output[-2000:]
    tests = json.loads(located.output)["tests"]
    frame = load_results(out)
    by_config = frame.groupby("config", observed=True)
    # one configuration per test kind, nodes and rail: rail tests never pooled with all-rail tests
    assert all(len(set(g["rail"].astype(object).where(g["rail"].notna(), None))) == 1 for _, g in by_config)
    names = set(frame["config"])
    assert {"node node1", "group node1,node2,node3,node4;rail=cl0", "group node1,node2,node3,node4;rail=cl1",
            "pair node1,node2;rail=cl0", "pair node1,node2;rail=cl1"} <= names  # node tests run on every rail
    assert len(names) == len({(t["kind"], tuple(t["nodes"]), t["rail"]) for t in tests})
    result = CliRunner().invoke(main, ["analyze", str(out), "--json"])
    assert result.exit_code in (0, 1), result.output[-2000:]
    peaks = {c["config"]: c["peak_busbw_gbps"] for c in json.loads(result.output)["configs"]}
    slow, fast = peaks["pair node1,node2;rail=cl1"], peaks["pair node1,node2;rail=cl0"]
    assert slow < fast / 10  # node2's slow rail 1 is its own configuration, not a spread of one
