"""collscope.analysis.recommend.core on planted synthetic results, its three renderers, and `collscope recommend`.

Golden files: ``tests/analysis/golden/*`` hold rendered outputs. After an intended change, regenerate them with
``COLLSCOPE_UPDATE_GOLDEN=1 python -m pytest tests/analysis/test_recommend.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collscope.analysis.load import load_results
from collscope.analysis.recommend.core import RecommendOptions, recommend, render_json
from collscope.analysis.recommend.env import percent, render_env
from collscope.analysis.recommend.tuner import TUNER_COLUMNS, render_tuner, tuner_rules
from collscope.cli import main
from collscope.collectives.record import Measurement, write_jsonl
from collscope.errors import ConfigError
from collscope.units import format_size
from tests.analysis.recommend_frames import cell_rows, frame, write_results

GOLDEN = Path(__file__).parent / "golden"
SIZES = [8 * 8**i for i in range(9)]  # 8 B .. 128 MiB
RING_SIMPLE = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
NOISY = (0.96, 1.0, 1.04)  # spread 8%


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("COLLSCOPE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        pytest.skip(f"rewrote {path}; review the diff")
    assert path.exists(), f"{path} missing; run with COLLSCOPE_UPDATE_GOLDEN=1 to record it"
    assert text == path.read_text(), f"{name} changed; if intended, rerun with COLLSCOPE_UPDATE_GOLDEN=1"


def exports(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("export ")]


def one_winner_rows() -> list[list[dict[str, Any]]]:
    """Ring/Simple: -12% up to 4 KiB, +1% at 32 KiB (below min gain), +35% from 256 KiB; default 10 GB/s."""
    def ring(size: int) -> float:
        return 8.8 if size <= 4096 else (10.1 if size == 32768 else 13.5)
    return [cell_rows(sizes=SIZES, busbw=10.0), cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=ring)]


def one_winner() -> pd.DataFrame:
    return frame(*one_winner_rows())


# ---- (1) a clear winner in one range --------------------------------------------------------------------
def test_clear_winner_ranges():
    rec = recommend(one_winner())
    (group,) = rec.groups
    assert [(r.config, r.min_bytes, r.max_bytes) for r in group.ranges] == [
        ("default", 8, 32768), ("NCCL_ALGO=Ring;NCCL_PROTO=Simple", 262144, 134217728)]
    win = group.ranges[1]
    assert win.sizes == (262144, 2097152, 16777216, 134217728) and win.repeats_min == 3
    assert round(win.gain_min, 6) == round(win.gain_max, 6) == 0.35
    verdicts = [s.candidates[0].verdict for s in group.sizes]
    assert verdicts == ["loses"] * 4 + ["below min gain"] + ["wins"] * 4
    (choice,) = rec.env
    assert choice.config == "NCCL_ALGO=Ring;NCCL_PROTO=Simple" and choice.settings == RING_SIMPLE
    assert [(r.min_bytes, r.max_bytes) for _, r in choice.losses] == [(8, 4096)]


def test_clear_winner_env_evidence_and_cost():
    text = render_env(recommend(one_winner()))
    evidence = "all_reduce (8 ranks, 1 node) +35% busbw at 256K..128M (4 sizes, 3 repeats, noise <= 4%)"
    assert exports(text) == [f"export NCCL_ALGO=Ring  # {evidence}", f"export NCCL_PROTO=Simple  # {evidence}"]
    assert "# cost: all_reduce (8 ranks, 1 node) loses 12% at 8..4K (4 sizes) with " \
           "NCCL_ALGO=Ring;NCCL_PROTO=Simple; 0.0638 us per step on the workload" in text.splitlines()
    assert "disables a loaded NCCL tuner plugin" in text and "--format tuner" in text
    assert 'NCCL_ALGO="allreduce:ring"' in text  # the per-collective alternative
    golden("env-one-winner.sh", text)


def test_clear_winner_tuner_golden():
    text = render_tuner(recommend(one_winner()))
    lines = text.splitlines()
    rules = [line for line in lines if not line.startswith("#")]
    assert rules == ["allreduce,262144,134217728,ring,simple,-1,1,8,-1,-1"]
    assert f"# {TUNER_COLUMNS}" in lines
    golden("tuner-one-winner.conf", text)


def test_clear_winner_json_has_everything():
    doc = json.loads(render_json(recommend(one_winner())))
    assert doc["min_gain"] == 0.03 and doc["range_edges"] == "measured sizes, inclusive"
    (group,) = doc["groups"]
    assert group["sizes"][0]["baseline"]["median_gbps"] == 10.0
    cand = group["sizes"][-1]["candidates"][0]
    assert cand["verdict"] == "wins" and round(cand["gain"], 6) == 0.35 and cand["repeats"] == 3
    assert doc["env"][0]["losses"][0]["min_bytes"] == 8 and doc["env_candidates"][0]["reason"] == "chosen"
    assert doc["tuner_rules"] == ["allreduce,262144,134217728,ring,simple,-1,1,8,-1,-1"]


# ---- (2) nothing beats the default, (3) a gain within noise ---------------------------------------------
def test_nothing_beats_default():
    df = frame(cell_rows(sizes=SIZES, busbw=10.0), cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=10.1),
               cell_rows(knobs={"NCCL_ALGO": "Tree"}, sizes=SIZES, busbw=7.0))
    rec = recommend(df)
    assert rec.env == () and not rec.any_winner
    text = render_env(rec)
    assert "# nothing beats the default beyond noise (min gain 3%)" in text.splitlines()
    assert exports(text) == []
    tuner = render_tuner(rec)
    assert [line for line in tuner.splitlines() if not line.startswith("#")] == []
    assert "# no rules: nothing beats the default beyond noise (min gain 3%)" in tuner.splitlines()


def test_gain_within_noise_is_not_recommended():
    df = frame(cell_rows(sizes=SIZES, busbw=10.0),
               cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=10.5, repeats=NOISY))
    rec = recommend(df)
    cands = [s.candidates[0] for s in rec.groups[0].sizes]
    assert all(c.verdict == "within noise" for c in cands)
    assert round(cands[0].gain, 6) == 0.05 and round(cands[0].noise, 6) == 0.1
    assert rec.env == () and exports(render_env(rec)) == []
    # the same 5% with quiet repeats wins
    quiet = recommend(frame(cell_rows(sizes=SIZES, busbw=10.0), cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=10.5)))
    assert quiet.env and quiet.env[0].config == "NCCL_ALGO=Ring;NCCL_PROTO=Simple"
    # and a higher --min-gain turns it down again
    assert recommend(frame(cell_rows(sizes=SIZES, busbw=10.0), cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=10.5)),
                     RecommendOptions(min_gain=0.06)).env == ()


# ---- (4) two ops wanting different NCCL_ALGO ------------------------------------------------------------
def test_two_ops_different_algo_use_per_collective_syntax():
    df = frame(cell_rows(op="all_reduce", sizes=SIZES, busbw=10.0),
               cell_rows(op="all_reduce", knobs={"NCCL_ALGO": "Tree"}, sizes=SIZES, busbw=12.0),
               cell_rows(op="all_gather", sizes=SIZES, busbw=10.0),
               cell_rows(op="all_gather", knobs={"NCCL_ALGO": "Ring"}, sizes=SIZES, busbw=11.0))
    text = render_env(recommend(df))
    (line,) = exports(text)
    assert line.startswith('export NCCL_ALGO="allgather:ring;allreduce:tree"  # all_gather (8 ranks, 1 node) +10%')
    assert "all_reduce (8 ranks, 1 node) +20%" in line
    assert "NCCL >= 2.24" in text and "tuner plugin" in text
    # tuner: NCCL_PROTO is not forced, so not a rule
    rules, skipped = tuner_rules(recommend(df))
    assert rules == [] and all("NCCL_PROTO is not forced" in s for s in skipped) and len(skipped) == 2


def test_one_op_forced_while_another_measured_op_keeps_default():
    df = frame(cell_rows(op="all_reduce", sizes=SIZES, busbw=10.0),
               cell_rows(op="all_reduce", knobs={"NCCL_ALGO": "Tree"}, sizes=SIZES, busbw=12.0),
               cell_rows(op="all_gather", sizes=SIZES, busbw=10.0),
               cell_rows(op="all_gather", knobs={"NCCL_ALGO": "Ring"}, sizes=SIZES, busbw=9.0))
    (line,) = exports(render_env(recommend(df)))
    assert line.startswith('export NCCL_ALGO="allreduce:tree"  #')


def test_single_op_tree_warns_about_collectives_that_cannot_run_it():
    df = frame(cell_rows(sizes=SIZES, busbw=10.0), cell_rows(knobs={"NCCL_ALGO": "Tree"}, sizes=SIZES, busbw=12.0))
    text = render_env(recommend(df))
    assert exports(text)[0].startswith("export NCCL_ALGO=Tree  #")
    assert "Broadcast, Reduce, AllGather, ReduceScatter cannot run Tree" in text


# ---- (5) applied == False and (6) ok == False are excluded ---------------------------------------------
@pytest.mark.parametrize("bad, reason", [
    ({"applied": False, "failure": "setting not applied: NCCL ran Ring"}, "setting not applied: NCCL ran Ring"),
    ({"applied": False}, "setting not applied"),
    ({"ok": False}, "ok=false (wrong values or out of bounds)"),
])
def test_bad_rows_never_win(bad, reason):
    df = frame(cell_rows(sizes=SIZES, busbw=10.0),
               cell_rows(knobs={"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}, sizes=SIZES, busbw=20.0, **bad))
    rec = recommend(df)
    assert rec.env == () and not rec.any_winner
    assert len(rec.excluded) == len(SIZES)
    assert {(x.config, x.rows, x.reason) for x in rec.excluded} == {("NCCL_ALGO=Tree;NCCL_PROTO=LL", 3, reason)}
    text = render_env(rec)
    assert exports(text) == [] and f"8: 3 rows, {reason}" in text
    assert "excluded" in render_tuner(rec) and json.loads(render_json(rec))["excluded"][0]["reason"] == reason


def test_one_bad_repeat_excludes_the_cell_only():
    good = cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=13.0)
    good[-1]["ok"] = False  # last repeat of 128 MiB
    rec = recommend(frame(cell_rows(sizes=SIZES, busbw=10.0), good))
    assert [(x.size_bytes, x.rows) for x in rec.excluded] == [(134217728, 1)]
    assert [(r.config, r.max_bytes) for r in rec.groups[0].ranges] == [
        ("NCCL_ALGO=Ring;NCCL_PROTO=Simple", 16777216), ("default", 134217728)]
    # env needs a usable cell at every size
    assert rec.env == () and "not usable at 1 of 9" in rec.env_candidates[0].reason


def test_default_not_measured_recommends_nothing():
    rec = recommend(frame(cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=13.0)))
    assert rec.env == () and rec.groups[0].ranges == () and not rec.groups[0].default_measured
    text = render_env(rec)
    assert "all_reduce (8 ranks, 1 node): the default (nothing forced) was not measured" in text
    assert exports(text) == []


# ---- (7) Open MPI --------------------------------------------------------------------------------------
def test_open_mpi_configs_give_ompi_exports():
    ring = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}
    common = dict(backend="mpi", engine="mpi", nranks=4, nnodes=1, nccl_version=None)
    df = frame(cell_rows(sizes=SIZES, busbw=2.0, **common), cell_rows(knobs=ring, sizes=SIZES, busbw=2.6, **common))
    rec = recommend(df)
    text = render_env(rec)
    assert exports(text) == [
        "export OMPI_MCA_coll_tuned_use_dynamic_rules=1  # Open MPI reads the coll_tuned_*_algorithm variables only "
        "with dynamic rules on",
        "export OMPI_MCA_coll_tuned_allreduce_algorithm=4  # allreduce algorithm 4 (ring); all_reduce (4 ranks, "
        "1 node) +30% busbw at 8..128M (9 sizes, 3 repeats, noise <= 4%)"]
    assert "mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4" in text
    assert "NCCL_ALGO/NCCL_PROTO disables" not in text
    rules, skipped = tuner_rules(rec)
    assert rules == [] and "Open MPI settings: the NCCL tuner plugin only chooses NCCL algorithms" in skipped[0]


# ---- tuner details ------------------------------------------------------------------------------------
def test_tuner_channels_several_winners_and_not_expressible():
    small = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL", "NCCL_MIN_CTAS": "4", "NCCL_MAX_CTAS": "4"}
    buff = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": "8388608"}
    df = frame(cell_rows(sizes=SIZES, busbw=10.0, nranks=16, nnodes=2),
               cell_rows(knobs=small, sizes=SIZES, busbw=lambda s: 12.0 if s <= 512 else 5.0, nranks=16, nnodes=2),
               cell_rows(knobs=buff, sizes=SIZES, busbw=lambda s: 12.0 if s >= 2097152 else 5.0, nranks=16, nnodes=2))
    text = render_tuner(recommend(df))
    assert [line for line in text.splitlines() if not line.startswith("#")] == ["allreduce,8,512,tree,ll,4,2,16,-1,-1"]
    assert "# not expressible: all_reduce (16 ranks, 2 nodes) 2M..128M NCCL_ALGO=Ring;NCCL_BUFFSIZE=8388608;" \
           "NCCL_PROTO=Simple: NCCL_BUFFSIZE has no tuner column" in text.splitlines()


def test_in_place_records_are_chosen_explicitly():
    df = frame(cell_rows(sizes=SIZES, busbw=10.0), cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=10.0),
               cell_rows(sizes=SIZES, busbw=10.0, in_place=True),
               cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=15.0, in_place=True))
    assert recommend(df).env == () and "in-place record(s) ignored" in recommend(df).notes[0]
    assert recommend(df, RecommendOptions(in_place=True)).env[0].config == "NCCL_ALGO=Ring;NCCL_PROTO=Simple"


def test_bad_options_and_input():
    df = one_winner()
    with pytest.raises(ConfigError, match="no records of op 'broadcast'; ops in the results: all_reduce"):
        recommend(df, RecommendOptions(op="broadcast"))
    with pytest.raises(ConfigError, match="min gain -0.1 is invalid"):
        RecommendOptions(min_gain=-0.1)
    with pytest.raises(ConfigError, match="lack column"):
        recommend(df.drop(columns=["config"]))
    with pytest.raises(ConfigError, match="no records"):
        recommend(df.iloc[0:0])


def test_hostile_values_stay_inside_comments():
    evil = {"NCCL_BUFFSIZE": "1\nrm -rf /; echo"}
    df = frame(cell_rows(sizes=SIZES, busbw=10.0), cell_rows(knobs=evil, sizes=SIZES, busbw=13.0))
    text = render_env(recommend(df))
    assert all(line.startswith(("#", "export ")) for line in text.splitlines())
    assert exports(text) == [] and "not exported" in text


def test_text_helpers():
    assert [format_size(n) for n in (8, 1024, 1536, 4 << 20, 3 << 30)] == ["8", "1K", "1.5K", "4M", "3G"]
    assert [percent(x) for x in (0.03, 0.125, 0.35, 1.0)] == ["3%", "12.5%", "35%", "100%"]


# ---- invariants ---------------------------------------------------------------------------------------
_CONFIGS = [{}, {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}, {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"},
            {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128"}]


@st.composite
def _results(draw: st.DrawFn) -> pd.DataFrame:
    sizes = draw(st.lists(st.integers(1, 1 << 30), min_size=1, max_size=12, unique=True))
    parts = []
    for knobs in _CONFIGS:
        for size in sizes:
            if knobs and not draw(st.booleans()) or not knobs and draw(st.integers(0, 9)) == 0:
                continue  # sometimes unmeasured, the default rarely
            bw = draw(st.floats(1.0, 20.0))
            reps = tuple(draw(st.lists(st.floats(0.9, 1.1), min_size=1, max_size=4)))
            parts.append(cell_rows(knobs=knobs, sizes=[size], busbw=bw, repeats=reps, ok=draw(st.booleans()) or
                                   draw(st.booleans())))
    return frame(*parts) if parts else frame(cell_rows(sizes=sizes, busbw=1.0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=_results(), min_gain=st.sampled_from([0.0, 0.03, 0.2]))
def test_ranges_never_overlap_and_are_covered_by_measured_sizes(df, min_gain):
    rec = recommend(df, RecommendOptions(min_gain=min_gain))
    for group in rec.groups:
        winners = {s.size_bytes: s.winner for s in group.sizes}
        previous = -1
        for r in group.ranges:
            assert previous < r.min_bytes <= r.max_bytes
            previous = r.max_bytes
            assert r.min_bytes in winners and r.max_bytes in winners
            inside = [size for size in winners if r.min_bytes <= size <= r.max_bytes]
            assert inside == list(r.sizes) and all(winners[size] == r.config for size in inside)
    rules, _ = tuner_rules(rec)
    for a, b in zip(rules, rules[1:], strict=False):
        if (a.collective, a.nnodes, a.nranks) == (b.collective, b.nnodes, b.nranks):
            assert a.max_bytes < b.min_bytes
    json.loads(render_json(rec))
    env = render_env(rec)
    assert all(line.startswith(("#", "export ")) for line in env.splitlines())


# ---- the command --------------------------------------------------------------------------------------
def _invoke(tmp_path: Path, dirs: dict[str, list[list[dict[str, Any]]]], *args: str):
    """`collscope recommend DIR...` on results directories written from planted rows (the real loader reads them)."""
    paths = [write_results(tmp_path / name, *parts) for name, parts in dirs.items()]
    return CliRunner().invoke(main, ["recommend", *(str(p) for p in paths), *args])


def test_planted_frames_have_the_loaders_shape(tmp_path):
    """The frames the library tests plant recommend exactly what the loader's frame of the same records does."""
    rows = one_winner_rows()
    root = write_results(tmp_path / "sweep; planted", *rows)
    assert json.loads(render_json(recommend(load_results([root])))) == json.loads(render_json(recommend(frame(*rows))))


@pytest.mark.parametrize("fmt, expected", [
    ("env", "export NCCL_ALGO=Ring  # all_reduce (8 ranks, 1 node) +35%"),
    ("tuner", "allreduce,262144,134217728,ring,simple,-1,1,8,-1,-1"),
    ("json", '"tuner_rules": [\n    "allreduce,262144,134217728,ring,simple,-1,1,8,-1,-1"'),
])
def test_cli_formats(tmp_path, fmt, expected):
    result = _invoke(tmp_path, {"sweep": one_winner_rows()}, "--format", fmt)
    assert result.exit_code == 0, result.output
    assert expected in result.stdout
    if fmt == "json":
        assert json.loads(result.stdout)["groups"][0]["op"] == "all_reduce"


def test_cli_options_reach_the_library(tmp_path):
    dirs = {"a": [cell_rows(sizes=SIZES, busbw=10.0), cell_rows(knobs=RING_SIMPLE, sizes=SIZES, busbw=10.5)],
            "b": [cell_rows(op="all_gather", sizes=SIZES, busbw=10.0)]}
    result = _invoke(tmp_path, dirs, "--min-gain", "0.1", "--op", "all_reduce", "--out-of-place")
    assert result.exit_code == 0, result.output
    assert "# nothing beats the default beyond noise (min gain 10%)" in result.stdout
    assert exports(result.stdout) == []


@pytest.mark.parametrize("args, message", [
    (["--min-gain", "-1"], "error: min gain -1.0 is invalid"),
    (["--op", "alltoall"], "error: no records of op 'alltoall'; ops in the results: all_reduce"),
    (["--in-place"], "error: no in-place records"),
])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, args, message):
    result = _invoke(tmp_path, {"sweep": one_winner_rows()}, *args)
    assert result.exit_code == 2
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1 and result.stderr.startswith(message)


# ---- through the real loader -------------------------------------------------------------------------
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "results" / "mpi-algos-2rank"


def test_cli_missing_directory(tmp_path):
    result = CliRunner().invoke(main, ["recommend", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: {tmp_path / 'nope'}: expected an existing results directory or file"]


def test_cli_on_the_example_results_directory():
    """A real mpi-algos sweep on a 2-core VM: no Open MPI algorithm beats the default beyond noise."""
    result = CliRunner().invoke(main, ["recommend", str(EXAMPLE), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {(g["op"], g["backend"], g["nranks"]) for g in doc["groups"]} == {("all_gather", "mpi", 2),
                                                                            ("all_reduce", "mpi", 2)}
    assert all(g["default_measured"] and len(g["sizes"]) == 20 for g in doc["groups"])
    assert {c["config"] for c in doc["env_candidates"]} >= {"OMPI_MCA_coll_tuned_allreduce_algorithm=4"}
    assert all(s["baseline"]["repeats"] == 3 for g in doc["groups"] for s in g["sizes"])
    env = CliRunner().invoke(main, ["recommend", str(EXAMPLE)])
    assert env.exit_code == 0 and exports(env.stdout) == []
    assert "# nothing beats the default beyond noise (min gain 3%)" in env.stdout.splitlines()


def _write_point(root: Path, point_id: str, settings: dict[str, str], busbw: float, *, applied: bool | None = None,
                 ok: bool = True) -> None:
    records = [Measurement(engine="nccl-tests", backend="nccl", op="all_reduce", size_bytes=size, count=size // 4,
                           dtype="float", redop="sum", root=None, in_place=False, nranks=8, nnodes=1, time_us=10.0,
                           algbw_gbps=busbw, busbw_gbps=busbw * factor, ok=ok, iters=20, warmup=5, repeat=i,
                           settings=settings, point_id=f"{point_id}-r{i}", sweep_id="sw-real", nccl_version="2.27.5")
               for size in (1 << 20, 1 << 24) for i, factor in enumerate((0.99, 1.0, 1.01))]
    for i in range(3):
        write_jsonl(root / "points" / f"{point_id}-r{i}.jsonl", [r for r in records if r.repeat == i])
        if applied is not None:
            (root / "points" / f"{point_id}-r{i}.check.json").write_text(json.dumps({"applied": applied}))


def test_load_results_directory_with_unapplied_and_failed_points(tmp_path):
    root = tmp_path / "sweep dir; with spaces"
    (root / "points").mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"sweep_id": "sw-real", "plan": {"points": [
        {"point_id": "lost", "op": "all_reduce", "settings": {"NCCL_ALGO": "NVLS"}}]}}))
    failure = {"point_id": "lost", "reason": "timeout", "detail": "600 s"}
    (root / "failures.jsonl").write_text(json.dumps(failure) + "\n")
    _write_point(root, "default", {}, 100.0)
    _write_point(root, "ring", {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}, 130.0, applied=True)
    _write_point(root, "tree", {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"}, 200.0, applied=False)
    rec = recommend(load_results([root]))
    assert [(r.config, r.min_bytes, r.max_bytes) for r in rec.groups[0].ranges] == [
        ("NCCL_ALGO=Ring;NCCL_PROTO=Simple", 1 << 20, 1 << 24)]
    assert {(x.config, x.rows, x.reason) for x in rec.excluded} == {("NCCL_ALGO=Tree;NCCL_PROTO=LL128", 3,
                                                                     "setting not applied")}
    assert rec.failed_points[0]["point_id"] == "lost" and rec.failed_points[0]["reason"] == "timeout"
    result = CliRunner().invoke(main, ["recommend", str(root), "--format", "tuner"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    rules = [line for line in lines if not line.startswith("#")]
    assert rules == ["allreduce,1048576,16777216,ring,simple,-1,1,8,-1,-1"]
    assert "# failed, no records: point lost (all_reduce, NCCL_ALGO=NVLS): timeout" in lines
    assert any(line.startswith("# excluded, may not win: all_reduce (8 ranks, 1 node) NCCL_ALGO=Tree;NCCL_PROTO=LL128")
               for line in lines)


def test_single_repeat_wins_are_not_claimed():
    rows = []
    for config, bw in (("default", 10.0), ("NCCL_ALGO=Tree", 20.0)):
        for size in (1024, 2048, 4096):
            rows.append({"engine": "nccl-tests", "backend": "nccl", "op": "all_reduce", "size_bytes": size,
                         "in_place": False, "nranks": 8, "nnodes": 1, "busbw_gbps": bw, "time_us": 1.0,
                         "repeat": 0, "ok": True, "applied": pd.NA, "failure": pd.NA, "config": config,
                         "NCCL_ALGO": "Tree" if config != "default" else pd.NA, "sweep_id": "s",
                         "nccl_version": "2.24.3", "point_id": f"{config}-p"})
    rec = recommend(pd.DataFrame(rows))
    assert not rec.any_winner and rec.env == ()
    assert {c.verdict for s in rec.groups[0].sizes for c in s.candidates} == {"too few repeats"}
    text = render_env(rec)
    assert exports(text) == []
    assert "# 3 size(s) where a config gains more than 3% on fewer than 3 repeats: noise unknown, not counted; " \
           "measure again with 3 repeats (`collscope sweep run --repeats 3`)" in text.splitlines()
