"""Issue 11, finding 1: recommendations judged by the time they save on a workload, not by a mean of per-size
percentages (test_noise.py holds finding 2).

Planted data: a default whose time is 10 us + size / 100 GB/s, 8 B .. 1 GiB by factors of 2 (28 sizes), 3 repeats
per cell with +-1% of seeded noise, and configs that beat or lose against it in known size ranges.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.recommend.core import recommend, render_json
from collscope.analysis.recommend.env import render_env
from collscope.analysis.recommend.tuner import render_tuner, tuner_rules
from collscope.cli import main
from collscope.errors import ParseError
from tests.analysis.recommend_frames import (
    KIB,
    RING_SIMPLE,
    SIZES_1G,
    frame,
    ll_rows,
    noisy,
    planted_rows,
    write_results,
)


def exports(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("export ")]


def rules_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


# ---- finding 1: a global export that halves bandwidth where the time goes --------------------------------------
def test_ll_small_wins_large_losses_exports_nothing_and_says_why_in_time():
    rec = recommend(frame(*ll_rows()))
    assert rec.env == ()
    (cand,) = rec.env_candidates
    # the time the default spends per step, one call per size, and what LL costs on it
    t_def = sum(10.0 + s / 100e3 for s in SIZES_1G)
    t_ll = sum((10.0 + s / 100e3) / (1.4 if s <= 512 * KIB else 0.5) for s in SIZES_1G)
    assert cand.time_saved_us == pytest.approx(t_def - t_ll, rel=0.03) and cand.time_saved_us < -10_000
    assert cand.workload_time_us == pytest.approx(t_def, rel=0.02)
    text = render_env(rec)
    assert exports(text) == []
    assert "# workload: one call per measured size" in text
    assert "no single setting fits every size" in text and "--format tuner" in text
    why = next(line for line in text.splitlines() if line.startswith("# NCCL_PROTO=LL: "))
    assert "saves" in why and "at all_reduce (8 ranks, 1 node) 8..512K" in why
    assert "costs" in why and "1M..1G" in why and "per step" in why and "%" in why


def test_ll_protocol_only_win_is_a_tuner_rule_with_its_assumed_algorithm():
    text = render_tuner(recommend(frame(*ll_rows())))
    assert rules_of(text) == ["allreduce,8,524288,ring,ll,-1,1,8,-1,-1"]
    assert "assumed algorithm ring" in text and "NCCL_PROTO=LL" in text
    assert any("saves" in line and "us per step" in line for line in text.splitlines() if line.startswith("#"))


def test_protocol_only_rule_uses_the_algorithm_nccl_logged():
    rec = recommend(frame(*ll_rows()), algorithms={"NCCL_PROTO=LL": {"all_reduce": "Tree"}})
    rules, _ = tuner_rules(rec)
    assert [r.line() for r in rules] == ["allreduce,8,524288,tree,ll,-1,1,8,-1,-1"]
    assert "assumed algorithm" not in render_tuner(rec)


def test_planted_ranges_env_exports_nothing_and_tuner_has_exactly_the_two_ranges():
    rec = recommend(frame(*planted_rows()))
    text = render_env(rec)
    assert exports(text) == []
    ring = next(c for c in rec.env_candidates if c.config == "NCCL_ALGO=Ring;NCCL_PROTO=Simple")
    assert ring.time_saved_us > 0  # it saves time overall, but loses beyond noise at 128 MiB (> 5% of the time)
    assert "loses beyond noise" in ring.reason and "128M" in ring.reason
    assert "no single setting fits every size" in text
    tuner = render_tuner(rec)
    assert rules_of(tuner) == ["allreduce,8,65536,tree,ll,-1,1,8,-1,-1",
                               "allreduce,268435456,1073741824,ring,simple,-1,1,8,-1,-1"]
    assert tuner.count("us per step") >= 2


def test_a_setting_that_wins_where_the_time_goes_is_exported_with_its_time_saved():
    df = frame(noisy({}, lambda s: 1.0, 6), noisy(RING_SIMPLE, lambda s: 0.8 if s <= 4 * KIB else 1.25, 7))
    rec = recommend(df)
    (choice,) = rec.env
    assert choice.time_saved_us > 0 and choice.workload_time_us > choice.time_saved_us
    text = render_env(rec)
    assert [e.split("  #")[0] for e in exports(text)] == ["export NCCL_ALGO=Ring", "export NCCL_PROTO=Simple"]
    pct = choice.time_saved_us / choice.workload_time_us * 100
    assert f"saves {choice.time_saved_us:.0f} us per step ({pct:.1f}%)" in text


# ---- the workload --------------------------------------------------------------------------------------------
def test_a_workload_of_small_sizes_makes_ll_worth_exporting():
    from collscope.analysis.recommend.workload import parse_workload

    workload = parse_workload(json.dumps({"workload": [
        {"op": "all_reduce", "size_bytes": 4096, "calls": 100, "nranks": 8},
        {"op": "all_reduce", "size_bytes": 3000, "calls": 10, "nranks": 8},  # between 2 KiB and 4 KiB
        {"op": "all_reduce", "size_bytes": 2 << 30, "calls": 1, "nranks": 8},  # beyond 1 GiB
    ]}), "job.json")
    rec = recommend(frame(*ll_rows()), workload=workload)
    (choice,) = rec.env
    assert choice.config == "NCCL_PROTO=LL" and choice.time_saved_us > 0
    t4k, t2k = 10.0 + 4096 / 100e3, 10.0 + 2048 / 100e3
    t3000 = t2k + (t4k - t2k) * 0.5507  # log2(3000/2048)/log2(2)
    assert choice.workload_time_us == pytest.approx(100 * t4k + 10 * t3000, rel=0.02)
    text = render_env(rec)
    assert "# workload: job.json" in text and len(exports(text)) == 1 and exports(text)[0].startswith(
        "export NCCL_PROTO=LL  # ")
    assert "interpolated linearly in log2(size)" in text and "not covered" in text and "2G x 1" in text


@pytest.mark.parametrize("text, message", [
    ('{"workload": [{"op": "all_reduce", "size_bytes": 8, "calls": 1, "nranks": 8},'
     ' {"op": "all_reduce", "size_bytes": "8", "calls": 1, "nranks": 8}]}',
     "job.json: expected workload[1].size_bytes: Expected `int`, got `str`"),
    ('{"workload": [{"op": "all_reduce", "size_bytes": 8, "calls": 1.5, "nranks": 8}]}',
     "job.json: expected workload[0].calls: Expected `int`, got `float`"),
    ('{"workload": [{"op": "all_reduce", "size_bytes": 8, "calls": 1, "nranks": 8, "x": 1}]}',
     "job.json: expected workload[0].x"),
    ("op,size_bytes,calls,nranks\nall_reduce,8,1,8\nall_reduce,8,many,8\n",
     "job.json:3: expected calls: an integer, found 'many'"),
    ("op,size,calls\n", "job.json:1: expected the CSV header op,size_bytes,calls,nranks"),
    ('{"workload": []}', "job.json: expected at least one workload entry"),
    ('{"workload": [{"op": "allreduce", "size_bytes": 8, "calls": 1, "nranks": 8}]}',
     "job.json: expected workload[0].op: one of all_reduce, "),
    ("op,size_bytes,calls,nranks\nall_reduce,0,1,8\n", "job.json:2: expected size_bytes: an integer >= 1, found '0'"),
])
def test_workload_decoding_is_strict(text, message):
    from collscope.analysis.recommend.workload import parse_workload

    with pytest.raises(ParseError) as info:
        parse_workload(text, "job.json")
    assert str(info.value).startswith(message)


def test_cli_workload_option(tmp_path: Path):
    root = write_results(tmp_path / "sweep", *ll_rows())
    job = tmp_path / "job.csv"
    job.write_text("op,size_bytes,calls,nranks\nall_reduce,4096,100,8\n")
    result = CliRunner().invoke(main, ["recommend", str(root), "--workload", str(job)])
    assert result.exit_code == 0, result.output
    assert exports(result.stdout)[0].startswith("export NCCL_PROTO=LL")
    bad = tmp_path / "bad.csv"
    bad.write_text("op,size_bytes,calls,nranks\nall_reduce,4096,x,8\n")
    result = CliRunner().invoke(main, ["recommend", str(root), "--workload", str(bad)])
    assert result.exit_code == 2 and f"{bad}:2: expected calls: an integer" in result.stderr
    doc = json.loads(CliRunner().invoke(main, ["recommend", str(root), "--workload", str(job), "--format",
                                               "json"]).stdout)
    assert doc["workload"]["source"] == str(job) and doc["env"][0]["time_saved_us"] > 0


def test_json_states_the_workload_and_the_time_figures():
    doc = json.loads(render_json(recommend(frame(*ll_rows()))))
    assert doc["workload"]["per_measured_size"] is True and len(doc["workload"]["entries"]) == 28
    (cand,) = doc["env_candidates"]
    assert cand["time_saved_us"] < 0 and cand["workload_time_us"] > 0 and cand["total_gain"] > 0


def _point_log(algos: list[str]) -> str:
    lines = ["host:1:1 [0] NCCL INFO NCCL version 2.27.5+cuda12.4", "host:1:1 [0] NCCL INFO NCCL_PROTO set by "
             "environment to LL"]
    lines += [f"host:1:1 [0] NCCL INFO AllReduce: {s} Bytes -> Algo {algo} proto LL channel{{Lo..Hi}}={{0..0}}"
              for s, algo in zip((8, 4096, 524288), algos, strict=True)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("algos, rule", [
    (["TREE", "TREE", "TREE"], "allreduce,8,524288,tree,ll,-1,1,8,-1,-1"),  # NCCL logged Tree for every call
    (["TREE", "TREE", "RING"], "allreduce,8,524288,ring,ll,-1,1,8,-1,-1"),  # two algorithms: Ring assumed
])
def test_cli_protocol_only_rule_takes_the_algorithm_from_the_point_logs(tmp_path: Path, algos, rule):
    root = write_results(tmp_path / "sweep", *ll_rows())
    ll_points = sorted(p for p in (root / "points").glob("*.jsonl") if "NCCL_PROTO" in p.name)
    assert ll_points
    for point in ll_points:
        point.with_suffix(".log").write_text(_point_log(algos))
    result = CliRunner().invoke(main, ["recommend", str(root), "--format", "tuner"])
    assert result.exit_code == 0, result.output
    assert rules_of(result.stdout) == [rule]
    assert ("assumed algorithm ring" in result.stdout) == (rule.split(",")[3] == "ring")
