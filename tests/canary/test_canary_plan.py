"""The canary's plan (ABBA blocks, point ids, side settings), its budget arithmetic, canary.json and the command
prefix wrapper: pure, no launch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from collscope.analysis.recommend.workload import parse_workload
from collscope.canary.layout import (
    PREFIX_VAR,
    SIDE_VAR,
    CanaryMeta,
    PlannedPoint,
    SideConfig,
    read_canary,
    write_canary,
)
from collscope.canary.plan import (
    MIN_BLOCKS,
    block_order,
    blocks_for_budget,
    parse_duration,
    parse_env_items,
    parse_side,
    plan_canary,
    planned_points,
    side_settings,
)
from collscope.canary.run import CanaryRequest, canary_spec, timed_run_notes
from collscope.canary.run_prefix import prefixed_argv, wrapper_text, write_wrapper
from collscope.errors import ConfigError, ParseError
from collscope.sweeps.spec import SweepSpec

SPEC = SweepSpec(name="canary", ops=("all_reduce", "all_gather"), min_bytes=64 << 10, max_bytes=4 << 20, repeats=1)


def _sides(b_env: tuple[str, ...] = ()) -> tuple[SideConfig, SideConfig]:
    return parse_side("A"), parse_side("B", env=b_env)


def test_blocks_run_abba_with_every_op_per_side():
    a, b = _sides(("OMPI_MCA_btl=self,tcp",))
    plan = plan_canary(SPEC, a, b, blocks=4)
    order = [(p.repeat, p.settings[SIDE_VAR], p.op) for p in plan.points]
    expected = []
    for block in range(4):
        for side in ("A", "B") if block % 2 == 0 else ("B", "A"):
            expected += [(block, side, "all_reduce"), (block, side, "all_gather")]
    assert order == expected
    assert block_order(0) == ("A", "B") and block_order(1) == ("B", "A") and block_order(2) == ("A", "B")
    b_points = [p for p in plan.points if p.settings[SIDE_VAR] == "B"]
    assert all(p.settings["OMPI_MCA_btl"] == "self,tcp" for p in b_points)
    assert all("OMPI_MCA_btl" not in p.settings for p in plan.points if p.settings[SIDE_VAR] == "A")


def test_identical_sides_never_share_a_point_id_and_ids_are_stable():
    a, b = _sides()
    plan = plan_canary(SPEC, a, b, blocks=3)
    ids = [p.point_id for p in plan.points]
    assert len(set(ids)) == len(ids) == 12
    again = plan_canary(SPEC, parse_side("A"), parse_side("B"), blocks=5)
    assert [p.point_id for p in again.points[:12]] == ids  # a resume (or a budget adding blocks) plans the same
    assert again.sweep_id == plan.sweep_id
    assert ids[0].startswith("all-reduce-a-b0-") and ids[2].startswith("all-reduce-b-b0-")


def test_what_a_side_runs_enters_the_ids_and_the_sweep_id_but_its_label_does_not():
    a, b = _sides()
    base = plan_canary(SPEC, a, b, blocks=2)
    other = plan_canary(SPEC, a, parse_side("B", env=("OMPI_MCA_btl=self,tcp",)), blocks=2)
    assert base.sweep_id != other.sweep_id
    assert {p.point_id for p in base.points if p.settings[SIDE_VAR] == "B"}.isdisjoint(
        p.point_id for p in other.points)
    labelled = plan_canary(SPEC, parse_side("A", label="2.28"), parse_side("B", label="2.29"), blocks=2)
    assert [p.point_id for p in labelled.points] == [p.point_id for p in base.points]


def test_side_settings_put_the_library_first_and_carry_the_prefix_as_json():
    side = parse_side("B", lib="/opt/nccl 2.29/lib", cmd_prefix="apptainer exec 'my image.sif'")
    settings = side_settings(side, "/usr/local/cuda/lib64")
    assert settings["LD_LIBRARY_PATH"] == "/opt/nccl 2.29/lib:/usr/local/cuda/lib64"
    assert json.loads(settings[PREFIX_VAR]) == ["apptainer", "exec", "my image.sif"]
    assert settings[SIDE_VAR] == "B"
    assert side_settings(parse_side("A", lib="/x"), None)["LD_LIBRARY_PATH"] == "/x"
    assert PREFIX_VAR not in side_settings(parse_side("A"), None)


def test_workload_sizes_are_measured_exactly_and_its_ops_chosen():
    text = json.dumps({"workload": [{"op": "all_reduce", "size_bytes": 3000000, "calls": 4, "nranks": 2},
                                    {"op": "all_reduce", "size_bytes": 65536, "calls": 10, "nranks": 2},
                                    {"op": "all_gather", "size_bytes": 131072, "calls": 2, "nranks": 2}]})
    workload = parse_workload(text, "job.json")
    a, b = _sides()
    request = CanaryRequest(out_dir=Path("x"), a=a, b=b, blocks=2, max_bytes=1 << 20)
    spec, sizes = canary_spec(request, workload)
    assert spec.ops == ("all_reduce", "all_gather")
    assert sizes == {"all_reduce": (65536,), "all_gather": (131072,)}  # 3 MB is above --max-bytes
    plan = plan_canary(spec, a, b, blocks=2, sizes=sizes)
    assert {p.sizes for p in plan.points} == {(65536,), (131072,)}
    with pytest.raises(ConfigError, match="no entry of op"):
        canary_spec(CanaryRequest(out_dir=Path("x"), a=a, b=b, blocks=2, ops=("alltoall",)), workload)


def test_planned_points_name_side_and_block():
    a, b = _sides()
    plan = plan_canary(SPEC, a, b, blocks=2)
    points = planned_points(plan)
    assert [(p.side, p.block) for p in points[:4]] == [("A", 0), ("A", 0), ("B", 0), ("B", 0)]
    assert [(p.side, p.block) for p in points[4:]] == [("B", 1), ("B", 1), ("A", 1), ("A", 1)]


@pytest.mark.parametrize("items, match", [
    (("NCCL_ALGO",), "expected NAME=VALUE"),
    (("1BAD=x",), "expected NAME=VALUE"),
    (("X=1", "X=2"), "sets X twice"),
    (("NCCL_ALGOO=Ring",), "did you mean NCCL_ALGO"),
])
def test_bad_side_variables_are_refused_before_anything_runs(items, match):
    with pytest.raises(ConfigError, match=match):
        parse_env_items(items, "--b-env")


def test_side_values_keep_commas_equals_and_spaces():
    env = parse_env_items(["OMPI_MCA_btl=self,tcp", "MY_FLAGS=a=b c;d"], "--b-env")
    assert env == {"OMPI_MCA_btl": "self,tcp", "MY_FLAGS": "a=b c;d"}


def test_bad_prefixes_and_libraries_are_refused():
    with pytest.raises(ConfigError, match="--b-cmd-prefix"):
        parse_side("B", cmd_prefix="apptainer exec 'unclosed")
    with pytest.raises(ConfigError, match="--a-lib"):
        parse_side("A", lib="/a:/b")
    with pytest.raises(ConfigError, match="canary's own variable"):
        parse_side("B", env=[f"{SIDE_VAR}=A"])
    with pytest.raises(ConfigError, match="not both"):
        parse_side("B", env=["LD_LIBRARY_PATH=/x"], lib="/y")


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("10m", 600), ("1h30m", 5400), ("2.5m", 150),
                                           ("600", 600), ("1h 5s", 3605)])
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "0s", "ten minutes", "10x", "-5m", "5m!"])
def test_bad_durations(text):
    with pytest.raises(ConfigError, match="duration"):
        parse_duration(text)


def test_blocks_for_a_budget():
    assert blocks_for_budget(600, 20) == 30  # 1 + 29 further blocks fit
    assert blocks_for_budget(600, 20, max_blocks=8) == 8
    assert blocks_for_budget(100, 30) == 3  # 1 + floor(70 / 30)
    assert blocks_for_budget(10, 30) == MIN_BLOCKS  # never fewer than two
    assert blocks_for_budget(100, 30, elapsed_s=70) == 2
    with pytest.raises(ConfigError):
        blocks_for_budget(100, 30, max_blocks=1)


def test_request_takes_a_budget_or_blocks():
    a, b = _sides()
    with pytest.raises(ConfigError, match="either --budget"):
        CanaryRequest(out_dir=Path("x"), a=a, b=b)
    with pytest.raises(ConfigError, match="--blocks 1"):
        CanaryRequest(out_dir=Path("x"), a=a, b=b, blocks=1)
    with pytest.raises(ConfigError, match="--max-loss"):
        CanaryRequest(out_dir=Path("x"), a=a, b=b, blocks=2, max_loss=1.5)


def test_canary_json_round_trip_and_damage(tmp_path):
    a, b = parse_side("A", label="today"), parse_side("B", env=["OMPI_MCA_btl=self,tcp"], cmd_prefix="numactl -N 0")
    meta = CanaryMeta(sweep_id="canary-x", a=a, b=b, blocks_planned=4, max_blocks=30, budget_s=600.0, block_s=12.5,
                      max_loss=0.01, workload=None, points=(PlannedPoint("p0", "A", 0, "all_reduce"),))
    write_canary(tmp_path, meta)
    assert read_canary(tmp_path) == meta
    assert meta.labels == {"A": "today", "B": "B"}
    (tmp_path / "canary.json").write_text('{"sweep_id": "x"}')
    with pytest.raises(ParseError, match="canary.json"):
        read_canary(tmp_path)
    with pytest.raises(ParseError, match="no such file"):
        read_canary(tmp_path / "nowhere")


def test_prefix_wrapper_execs_the_prefix_then_the_interpreter(tmp_path):
    env = {PREFIX_VAR: json.dumps(["env", "X=1 2"])}
    assert prefixed_argv(["-m", "collscope", "bench"], env, "/py") == ["env", "X=1 2", "/py", "-m", "collscope",
                                                                       "bench"]
    assert prefixed_argv(["-V"], {}, "/py") == ["/py", "-V"]
    with pytest.raises(ConfigError, match="JSON list"):
        prefixed_argv([], {PREFIX_VAR: '"env"'}, "/py")
    with pytest.raises(ConfigError, match="#! line"):
        wrapper_text("/opt/my python/bin/python")
    path = write_wrapper(tmp_path, sys.executable)
    assert os.access(path, os.X_OK) and path.read_text().startswith(f"#!{sys.executable}\n")


def test_the_wrapper_really_runs_the_program_under_the_prefix(tmp_path):
    from collscope import proc

    wrapper = write_wrapper(tmp_path, sys.executable)
    probe = "import os; print(os.environ.get('CANARY_PROBE'))"
    prefixed = proc.run([str(wrapper), "-c", probe], timeout_s=60,
                        extra_env={PREFIX_VAR: json.dumps(["env", "CANARY_PROBE=via prefix; not a shell"])})
    plain = proc.run([str(wrapper), "-c", probe], timeout_s=60)
    assert prefixed.stdout.strip() == "via prefix; not a shell"
    assert plain.stdout.strip() == "None"


def test_a_sides_nccl_debug_is_named_as_not_reaching_the_timed_runs():
    side = parse_side("B", env=["NCCL_DEBUG=INFO", "NCCL_ALGO=Ring"])
    torch = SweepSpec(name="canary", engine="torch", backend="nccl")
    notes = timed_run_notes(torch, parse_side("A"), side)
    assert len(notes) == 1 and notes[0].startswith("side B: NCCL_DEBUG=INFO is not used")
    assert timed_run_notes(SPEC, parse_side("A"), side) == []  # engine mpi runs no NCCL
