"""The canary verdict on synthetic canary frames with a known truth (collscope.canary.verdict_sim)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from collscope.analysis.recommend.workload import Workload, WorkloadEntry
from collscope.canary.verdict import EXIT_CODES, Interval, RangeChange, Verdict, judge, render_verdict
from collscope.canary.verdict_sim import synthetic_frame
from collscope.errors import ConfigError

K, M = 1024, 1024**2
SIZES = tuple(4**k * K for k in range(8))  # 1K .. 16M by x4
"""With one call per size, 16M carries ~75% of the time and 64K-4M ~25%."""


def _slower(factor: float, lo: int, hi: int):
    return lambda s: factor if lo <= s <= hi else 1.0


def _workload(*entries: tuple[int, int], op: str = "all_reduce", nranks: int = 2) -> Workload:
    return Workload(entries=tuple(WorkloadEntry(op=op, size_bytes=s, calls=c, nranks=nranks) for s, c in entries),
                    source="job.json")


def _losing(v: Verdict) -> list[tuple[str, int, int]]:
    return [(r.op, r.min_bytes, r.max_bytes) for r in v.ranges if r.verdict == "loses"]


@pytest.mark.parametrize("seed", range(5))
def test_a_clear_30pct_loss_at_64k_4m_is_no_go_naming_exactly_that_range(seed: int) -> None:
    frame = synthetic_frame(blocks=8, sizes=SIZES, noise=0.03, effect=_slower(1.30, 64 * K, 4 * M), seed=seed)
    v = judge(frame)
    assert v.decision == "no-go" and v.exit_code == 1
    assert _losing(v) == [("all_reduce", 64 * K, 4 * M)]
    (lost,) = [r for r in v.ranges if r.verdict == "loses"]
    assert lost.busbw_change.high < 0 and -0.27 < lost.busbw_change.estimate < -0.19  # 1/1.3 - 1 = -23%
    assert 0.15 < lost.time_share < 0.35 and lost.b_busbw_gbps < lost.a_busbw_gbps
    assert all(r.verdict == "same" for r in v.ranges if r.max_bytes < 64 * K or r.min_bytes > 4 * M)
    assert any("64K-4M loses" in reason and "more than 5%" in reason for reason in v.reasons)


def test_identical_sides_are_judged_no_go_at_most_5pct_of_200_canaries() -> None:
    rng = np.random.default_rng(2028)
    decisions = []
    for i in range(200):
        frame = synthetic_frame(blocks=8, sizes=SIZES, noise=0.02 + 0.01 * (i % 2), seed=rng)
        decisions.append(judge(frame, seed=i).decision)
    false_no_go = decisions.count("no-go")
    assert false_no_go <= 10, f"{false_no_go} of 200 A/A canaries judged no-go"


def test_a_tiny_change_with_low_noise_and_many_blocks_is_go() -> None:
    frame = synthetic_frame(blocks=16, sizes=SIZES, noise=0.003, effect=lambda s: 1.002, seed=3)
    v = judge(frame)
    assert v.decision == "go" and v.exit_code == 0 and v.more_blocks is None
    c = v.workload_change
    assert c.low < 0.002 < c.high <= 0.01 and abs(c.estimate - 0.002) < 0.002
    assert 0 < v.aa_noise < 0.01 and v.blocks == 16
    assert "entirely below the 1% max loss" in v.reasons[0]


def test_a_clear_improvement_is_go() -> None:
    frame = synthetic_frame(blocks=8, sizes=SIZES, noise=0.01, effect=lambda s: 0.8, seed=4)
    v = judge(frame)
    assert v.decision == "go" and v.workload_change.high < -0.15
    assert {r.verdict for r in v.ranges} == {"gains"}


def test_high_noise_and_few_blocks_is_inconclusive_saying_how_many_more_blocks() -> None:
    verdicts = [judge(synthetic_frame(blocks=4, sizes=SIZES, noise=0.05, effect=lambda s: 0.97, seed=seed))
                for seed in range(20)]
    unsure = [v for v in verdicts if v.decision == "inconclusive"]
    assert len(unsure) >= 12 and all(v.exit_code == 3 for v in unsure)
    assert not [v for v in verdicts if v.decision == "no-go"]
    counted = [v for v in unsure if v.more_blocks is not None]
    assert len(counted) >= 6 and all(0 < v.more_blocks <= 64 for v in counted)  # type: ignore[operator]
    for v in unsure:
        if v.more_blocks is None:
            assert "no practical number of more blocks" in v.reasons[-1]
        else:
            assert f"about {v.more_blocks} more blocks" in v.reasons[-1]


def test_a_loss_the_workload_never_calls_is_go_and_at_its_heavy_size_no_go() -> None:
    workload = _workload((4 * M, 10), (16 * M, 2))
    light = synthetic_frame(blocks=12, sizes=SIZES, noise=0.005, effect=_slower(1.3, K, 16 * K), seed=5)
    v = judge(light, workload)
    assert v.decision == "go"
    (lost,) = [r for r in v.ranges if r.verdict == "loses"]
    assert (lost.min_bytes, lost.max_bytes) == (K, 16 * K) and lost.time_share < 0.05
    assert v.workload_source == "workload file job.json"
    assert any("carries only" in r for r in v.reasons)
    heavy = synthetic_frame(blocks=12, sizes=SIZES, noise=0.005, effect=_slower(1.3, 4 * M, 4 * M), seed=5)
    v = judge(heavy, workload)
    assert v.decision == "no-go" and _losing(v) == [("all_reduce", 4 * M, 4 * M)]
    assert v.ranges[-2].time_share > 0.5


def test_time_share_is_the_workload_time_fraction_and_sums_to_one() -> None:
    v = judge(synthetic_frame(blocks=6, sizes=SIZES, noise=0.02, effect=_slower(1.3, 64 * K, 4 * M), seed=6),
              _workload((64 * K, 1000), (16 * M, 1)))
    assert sum(r.time_share for r in v.ranges) == pytest.approx(1.0)
    for r in v.ranges:
        calls = r.min_bytes <= 64 * K <= r.max_bytes or r.min_bytes <= 16 * M <= r.max_bytes
        assert (r.time_share > 0) == calls


@pytest.mark.parametrize("seed", range(3))
def test_a_drift_hitting_both_sides_does_not_make_a_verdict_when_interleaved(seed: int) -> None:
    kw = dict(blocks=8, sizes=SIZES, noise=0.003, drift=0.01, seed=seed)
    v = judge(synthetic_frame(**kw))
    assert v.decision != "no-go" and _losing(v) == []
    assert abs(v.workload_change.estimate) < 0.01
    # the same drift with A's runs all before B's (not interleaved) looks like a 8% loss: the pairing is what helps
    unpaired = judge(synthetic_frame(interleaved=False, **kw), interleaved=False)
    assert unpaired.decision == "no-go" and unpaired.workload_change.estimate > 0.05
    assert not unpaired.interleaved and any("not interleaved" in c for c in unpaired.caveats)


def test_existing_results_are_compared_unpaired_with_the_caveat() -> None:
    frame = synthetic_frame(blocks=6, sizes=SIZES, noise=0.02, effect=_slower(1.3, 64 * K, 4 * M),
                            interleaved=False, seed=7)
    v = judge(frame, interleaved=False)
    assert v.decision == "no-go" and _losing(v) == [("all_reduce", 64 * K, 4 * M)]
    assert "not interleaved" in v.reasons[0] and v.caveats[0].startswith("the two sides were not interleaved")


def test_in_place_records_are_ignored_when_out_of_place_ones_exist() -> None:
    frame = synthetic_frame(blocks=8, sizes=SIZES, noise=0.005, seed=8)
    b_in_place = (frame["side"] == "B") & frame["in_place"]
    frame.loc[b_in_place, "time_us"] *= 1.5
    frame.loc[b_in_place, "busbw_gbps"] /= 1.5
    v = judge(frame)
    assert _losing(v) == [] and abs(v.workload_change.estimate) < 0.01
    only_in_place = frame[frame["in_place"]]  # without out-of-place records, the in-place ones are the data
    assert _losing(judge(only_in_place)) == [("all_reduce", K, 16 * M)]


def test_a_workload_size_between_measured_sizes_is_interpolated_in_log_size() -> None:
    frame = synthetic_frame(blocks=6, sizes=SIZES, noise=0.0, seed=9)
    at_2m = judge(frame, _workload((2 * M, 4)))
    a = frame[(frame["side"] == "A") & ~frame["in_place"]].groupby("size_bytes")["time_us"].median()
    assert at_2m.a_time_us == pytest.approx(4 * (a[M] + a[4 * M]) / 2, rel=0.02)
    shares = {r.min_bytes: r.time_share for r in at_2m.ranges}
    assert set(shares) == {K}  # one range of "same" over every size


@pytest.mark.parametrize(("entry", "words"), [
    (WorkloadEntry(op="all_reduce", size_bytes=64 * M, calls=1, nranks=2), ["64M", "1K-16M", "--max-bytes 64M"]),
    (WorkloadEntry(op="all_reduce", size_bytes=512, calls=1, nranks=2), ["512", "--min-bytes 512"]),
    (WorkloadEntry(op="all_gather", size_bytes=M, calls=1, nranks=2),
     ["all_gather", "side A and B", "--op all_gather"]),
    (WorkloadEntry(op="all_reduce", size_bytes=M, calls=1, nranks=8), ["8 ranks", "--nranks 8"]),
])
def test_a_workload_entry_the_sides_did_not_measure_is_refused(entry: WorkloadEntry, words: list[str]) -> None:
    frame = synthetic_frame(blocks=4, sizes=SIZES, seed=10)
    with pytest.raises(ConfigError) as err:
        judge(frame, Workload(entries=(entry,), source="w.csv"))
    assert all(w in str(err.value) for w in words), str(err.value)


def test_an_op_measured_by_one_side_only_is_named() -> None:
    frame = synthetic_frame(blocks=4, sizes=SIZES, seed=11)
    other = synthetic_frame(blocks=4, sizes=SIZES, op="all_gather", seed=12)
    frame = pd.concat([frame, other[other["side"] == "A"]], ignore_index=True)
    with pytest.raises(ConfigError, match="side B did not measure all_gather with 2 ranks"):
        judge(frame, _workload((M, 1), op="all_gather"))
    assert {r.op for r in judge(frame).ranges} == {"all_reduce"}  # without a workload: the common ops only


@pytest.mark.parametrize(("change", "message"), [
    (lambda f: f.drop(columns=["block"]), "lacks the column(s) block"),
    (lambda f: f.iloc[:0], "no records"),
    (lambda f: f[f["side"] == "A"], "side B has no records"),
    (lambda f: f.assign(side=f["side"].replace({"B": "candidate"})), "'candidate'"),
])
def test_bad_frames_are_refused_with_what_was_expected(change, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        judge(change(synthetic_frame(blocks=3, sizes=SIZES, seed=13)))


@pytest.mark.parametrize(("option", "value"), [("max_loss", -0.1), ("range_share", 2.0), ("confidence", 1.0),
                                               ("n_boot", 10)])
def test_bad_options_are_refused(option: str, value: float) -> None:
    with pytest.raises(ConfigError, match=option):
        judge(synthetic_frame(blocks=3, sizes=SIZES, seed=14), **{option: value})


def test_fewer_than_two_complete_blocks_is_inconclusive_and_an_incomplete_block_is_left_out() -> None:
    frame = synthetic_frame(blocks=2, sizes=SIZES, seed=15)
    v = judge(frame[~((frame["block"] == 1) & (frame["side"] == "B"))])
    assert v.decision == "inconclusive" and v.blocks == 1 and v.more_blocks is None and v.ranges == ()
    assert "at least 2 are needed" in v.reasons[0]
    assert any("block 1 (side B did not measure every size)" in c for c in v.caveats)
    json.dumps(v.to_dict(), allow_nan=False)
    frame = synthetic_frame(blocks=3, sizes=SIZES, seed=15)
    v = judge(frame[~((frame["block"] == 2) & (frame["side"] == "B") & (frame["size_bytes"] == 16 * M))])
    assert v.blocks == 2 and v.decision == "inconclusive"  # two blocks: a t interval of 1 degree of freedom
    assert any("block 2 (side B did not measure every size)" in c for c in v.caveats)


def test_to_dict_round_trips_through_json_with_stable_keys() -> None:
    v = judge(synthetic_frame(blocks=8, sizes=SIZES, noise=0.03, effect=_slower(1.3, 64 * K, 4 * M), seed=16))
    d = json.loads(json.dumps(v.to_dict(), allow_nan=False))
    assert d == v.to_dict()
    assert list(d) == ["decision", "exit_code", "workload_change", "a_time_us", "b_time_us", "aa_noise", "blocks",
                       "more_blocks", "max_loss", "ranges", "reasons", "caveats", "workload_source", "interleaved"]
    assert list(d["workload_change"]) == ["estimate", "low", "high", "confidence"]
    assert list(d["ranges"][0]) == ["op", "min_bytes", "max_bytes", "busbw_change", "time_share", "verdict",
                                    "a_busbw_gbps", "b_busbw_gbps"]
    assert d["decision"] == "no-go" and d["exit_code"] == 1
    assert EXIT_CODES == {"go": 0, "no-go": 1, "inconclusive": 3}


def test_the_verdict_is_reproducible_for_a_seed() -> None:
    frame = synthetic_frame(blocks=6, sizes=SIZES, noise=0.03, seed=17)
    assert judge(frame, seed=3) == judge(frame, seed=3)
    other = judge(frame, seed=4).workload_change  # another seed moves the edges by resampling noise only
    assert other.low == pytest.approx(judge(frame, seed=3).workload_change.low, abs=0.003)


def test_render_puts_the_decision_first_then_change_noise_ranges_reasons_caveats() -> None:
    v = judge(synthetic_frame(blocks=8, sizes=SIZES, noise=0.03, effect=_slower(1.3, 64 * K, 4 * M), seed=18))
    text = render_verdict(v)
    lines = text.splitlines()
    assert lines[0].startswith("NO-GO (exit 1): workload time B against A +")
    order = [text.index(w) for w in ("time per step:", "A/A noise", "ranges (B against A):", "reasons:", "caveats:")]
    assert order == sorted(order)
    (row,) = [ln for ln in lines if ln.startswith("  all_reduce") and "64K-4M" in ln]
    assert row.endswith("loses")
    assert "%" in row


def test_dataclasses_hold_the_contract_fields() -> None:
    iv = Interval(0.1, 0.05, 0.15)
    assert iv.confidence == 0.95
    r = RangeChange(op="all_reduce", min_bytes=K, max_bytes=M, busbw_change=iv, time_share=0.5, verdict="gains",
                    a_busbw_gbps=1.0, b_busbw_gbps=1.1)
    assert r.to_dict()["busbw_change"] == {"estimate": 0.1, "low": 0.05, "high": 0.15, "confidence": 0.95}


def test_categorical_columns_as_load_results_makes_them_give_the_same_verdict() -> None:
    frame = synthetic_frame(blocks=6, sizes=SIZES, noise=0.02, effect=_slower(1.3, 64 * K, 4 * M), seed=19)
    typed = frame.astype({"op": "category", "side": "category", "in_place": "boolean", "nnodes": "Int64"})
    assert judge(typed) == judge(frame)
