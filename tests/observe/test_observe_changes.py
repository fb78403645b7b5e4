"""observe changes (issue 27 item 4): change points per series and size range through the real path (Measurement
JSONL -> observe ingest -> the store -> DuckDB -> the detector), outliers apart, coincides_with, the CLI's exit
codes, and the detector's false-alarm and detection rates over generated histories."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collscope.cli import main
from collscope.errors import ConfigError
from collscope.observe import Change, connect, find_changes, ingest
from collscope.observe.changes import detect
from collscope.observe.segmentation import MIN_GAIN, MIN_RUNS, binary_segmentation, noise_of, split_threshold
from collscope.observe.series import changes_report, parse_since
from tests.observe.history import (
    BAD_NIGHT,
    PLANTED,
    PLANTED_NIGHT,
    QUIET,
    SIZES,
    ClusterPlan,
    Shift,
    busbw_matrix,
    night_time,
    write_history,
)

NOW = night_time(60)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The done-when history: 60 nights of two clusters (PLANTED: -10 % at 64 MiB..1 GiB with NCCL 2.28.9 ->
    2.29.2 at night 35; QUIET: an NCCL upgrade that costs nothing at night 22 and one bad night, 41)."""
    root = tmp_path_factory.mktemp("history")
    write_history(root / "nightly", [PLANTED, QUIET])
    report = ingest([root / "nightly"], root / "store")
    assert report.problems == [] and report.runs == 120
    return root / "store"


def test_the_planted_regression_and_nothing_else(store: Path) -> None:
    report = changes_report(store, since=night_time(0), now=NOW)
    [change] = report.changes
    assert (change.cluster, change.op, change.nranks, change.nnodes, change.settings, change.dtype) == (
        "alpha", "all_reduce", 16, 2, "default", "float")
    assert (change.size_min_bytes, change.size_max_bytes) == (64 << 20, 1 << 30)
    assert change.sizes_bytes == tuple(s for s in SIZES if 64 << 20 <= s <= 1 << 30)
    assert abs(change.at - night_time(PLANTED_NIGHT)) <= timedelta(days=2)
    assert change.kind == "regression"
    assert -11.5 < change.change_pct < -8.5
    assert change.ci_low_pct < change.change_pct < change.ci_high_pct < 0
    assert change.after_busbw_gbps / change.before_busbw_gbps == pytest.approx(0.90, abs=0.02)
    assert change.coincides_with == {"nccl_version": ("2.28.9", "2.29.2")}
    assert change.runs_before >= MIN_RUNS and change.runs_after >= MIN_RUNS
    # the other cluster: its NCCL upgrade cost nothing; its bad night is one outlier, not a change
    [outlier] = report.outliers
    assert outlier.cluster == "beta" and outlier.at == night_time(BAD_NIGHT)
    assert outlier.deviation_pct == pytest.approx(-45, abs=5)
    assert outlier.source is not None and outlier.source.endswith(f"beta/night-{BAD_NIGHT:03d}.jsonl")
    assert (outlier.size_min_bytes, outlier.size_max_bytes) == (SIZES[0], SIZES[-1])


def test_find_changes_takes_a_connection_a_cluster_and_a_window(store: Path) -> None:
    con = connect(store)
    assert [c.cluster for c in find_changes(con, since=night_time(0), now=NOW)] == ["alpha"]
    assert find_changes(con, since=night_time(0), cluster="beta", now=NOW) == []
    # a window starting after the change: not reported (its baseline is read, the change is older)
    assert find_changes(con, since=night_time(PLANTED_NIGHT + 3), now=NOW) == []
    [change] = find_changes(store, since=night_time(PLANTED_NIGHT - 5), now=NOW)
    assert isinstance(change, Change) and change.cluster == "alpha"
    con.close()


def test_cli_exit_1_on_a_regression_text_and_json(store: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["observe", "changes", "--store", str(store), "--since", "all"])
    assert result.exit_code == 1, result.output
    assert "REGRESSION alpha all_reduce 16 ranks 2 nodes float settings default: 64M..1G at 2026-10-0" in result.output
    assert "coincides with: nccl_version 2.28.9 -> 2.29.2" in result.output
    assert f"beta/night-{BAD_NIGHT:03d}.jsonl" in result.output.split("outlying runs (")[1]
    result = runner.invoke(main, ["observe", "changes", "--store", str(store), "--since", "all", "--json"])
    doc = json.loads(result.output)
    assert result.exit_code == 1 and doc["regressions"] == 1 and doc["series"] == 2 and doc["runs"] == 120
    assert doc["changes"][0]["coincides_with"] == {"nccl_version": ["2.28.9", "2.29.2"]}
    assert [o["cluster"] for o in doc["outliers"]] == ["beta"]
    result = runner.invoke(main, ["observe", "changes", "--store", str(store), "--since", "all", "--cluster", "beta"])
    assert result.exit_code == 0 and result.output.startswith("0 changes (0 regressions) and 1 outlying runs")
    for bad in (["--since", "yesterday"], ["--cluster", "a b"]):
        result = runner.invoke(main, ["observe", "changes", "--store", str(store), *bad])
        assert result.exit_code == 2 and result.output.startswith("error: ") and "valid" in result.output


def test_coincides_with_names_every_provenance_that_differs(tmp_path: Path) -> None:
    """A node set change with the NCCL upgrade: both named; an improvement exits 0."""
    plan = ClusterPlan(cluster="gamma", nights=30, nccl=((0, "2.27.7"), (15, "2.28.3")), bad_nights={},
                       shifts=(Shift(night=15, factor=1.15),), seed=5)
    write_history(tmp_path / "in", [plan])
    later = ClusterPlan(cluster="gamma", nights=30, hosts=("node003", "node004"), seed=6)
    for path in sorted((tmp_path / "in" / "gamma").iterdir())[15:]:  # nights 15.. on another node pair
        path.write_text(path.read_text().replace('"node001","node002"', '"node003","node004"'))
    assert later.hosts[0] in (tmp_path / "in" / "gamma" / "night-020.jsonl").read_text()
    ingest([tmp_path / "in"], tmp_path / "store")
    [change] = find_changes(tmp_path / "store", now=night_time(30))
    assert change.kind == "improvement" and change.change_pct == pytest.approx(15, abs=2.5)
    assert (change.size_min_bytes, change.size_max_bytes) == (SIZES[0], SIZES[-1])
    assert change.coincides_with == {"nccl_version": ("2.27.7", "2.28.3"),
                                     "hosts": (("node001", "node002"), ("node003", "node004"))}
    result = CliRunner().invoke(main, ["observe", "changes", "--store", str(tmp_path / "store"), "--since", "all"])
    assert result.exit_code == 0 and "IMPROVEMENT gamma" in result.output


def _plan(**kw: object) -> ClusterPlan:
    base: dict[str, object] = dict(cluster="x", nights=60, noise=0.02, seed=3)
    return ClusterPlan(**{**base, **kw})  # type: ignore[arg-type]


def test_short_excursions_are_outliers_sustained_ones_are_changes() -> None:
    two = detect(busbw_matrix(_plan(bad_nights={30: 0.8, 31: 0.8})))
    assert two.shifts == [] and sorted(s.row for s in two.spikes) == [30, 31]
    three = detect(busbw_matrix(_plan(bad_nights={30: 0.8, 31: 0.8, 32: 0.8})))
    assert [(s.row, s.log_change < 0) for s in three.shifts] == [(30, True), (33, False)]
    # a change with only 2 runs after it is not sustained yet: nothing (and no outliers either)
    late = detect(busbw_matrix(_plan(shifts=(Shift(night=58, factor=0.8),))))
    assert late.shifts == [] and late.spikes == []
    at_three = detect(busbw_matrix(_plan(shifts=(Shift(night=57, factor=0.8),))))
    assert [s.row for s in at_three.shifts] == [57]


def test_small_shifts_below_the_minimum_gain_or_the_noise_are_not_changes() -> None:
    # 2 % at 0.2 % noise: certain, but below the 3 % minimum gain
    assert detect(busbw_matrix(_plan(noise=0.002, shifts=(Shift(night=30, factor=0.98),)))).shifts == []
    # 4 % at 5 % noise, 300 runs (so the estimate is close): above the minimum gain, not above the noise
    one = (1 << 30,)
    assert detect(busbw_matrix(_plan(noise=0.05, nights=300, sizes=one, shifts=(Shift(night=150, factor=0.96),)))
                  ).shifts == []
    # 4 % at 1.2 % noise: reported
    [shift] = detect(busbw_matrix(_plan(noise=0.012, nights=300, sizes=one,
                                        shifts=(Shift(night=150, factor=0.96),)))).shifts
    assert shift.row == pytest.approx(150, abs=2) and math.expm1(shift.log_change) == pytest.approx(-0.04, abs=0.01)
    assert MIN_GAIN == 0.03


def test_noise_estimate_ignores_a_level_shift_and_an_outlier() -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(0, 0.02, 200)
    values[100:] -= 0.3
    values[50] += 1.0
    assert noise_of(values) == pytest.approx(0.02, rel=0.15)


def test_split_threshold_is_calibrated_on_stationary_series() -> None:
    """Stationary Gaussian series at one size: about 0.2 % get a split (the calibration); a 3-sigma shift in the
    middle of 60 runs is always found, nearly always within a run of where it is."""
    rng = np.random.default_rng(7)
    for runs in (30, 90, 400):
        split = sum(bool(binary_segmentation(x, noise_of(x))) for x in rng.standard_normal((1000, runs)))
        assert split / 1000 < 0.008, (runs, split)
    assert split_threshold(60) == pytest.approx(5.59, abs=0.01)
    where = []
    for _ in range(200):
        x = rng.standard_normal(60)
        x[30:] += 3
        [cut] = binary_segmentation(x, noise_of(x))
        where.append(abs(cut - 30))
    assert sum(w <= 1 for w in where) >= 190 and sum(w <= 3 for w in where) >= 198
    x = rng.standard_normal(90)
    x[40:43] -= 6  # 3 runs off between two long stretches: found (plain binary segmentation misses it)
    assert binary_segmentation(x, noise_of(x)) == [40, 43]


def test_parse_since() -> None:
    now = datetime(2026, 12, 2, 8, 0, tzinfo=timezone.utc)
    assert parse_since("30d", now) == now - timedelta(days=30)
    assert parse_since("12h", now) == now - timedelta(hours=12)
    assert parse_since("2w", now) == now - timedelta(days=14)
    assert parse_since("2026-11-01", now) == datetime(2026, 11, 1, tzinfo=timezone.utc)
    assert parse_since("2026-11-01T02:00:00Z", now) == datetime(2026, 11, 1, 2, tzinfo=timezone.utc)
    assert parse_since("all", now) is None
    with pytest.raises(ConfigError, match="'30 days'.*valid: a span"):
        parse_since("30 days", now)


_OUTCOMES: list[dict[str, float]] = []


@settings(max_examples=80, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(noise=st.floats(0.01, 0.05), change=st.floats(0.0, 0.20), night=st.integers(10, 80),
       lo=st.integers(0, len(SIZES) - 1), width=st.integers(1, 6), worse=st.booleans(), bad=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def _one_history(noise: float, change: float, night: int, lo: int, width: int, worse: bool, bad: bool,
                 seed: int) -> None:
    """One generated 90-night series (17 sizes) twice: stationary (with one bad night half the time) and with a
    shift of ``change`` at ``night`` over ``width`` adjacent sizes."""
    hi = min(lo + width - 1, len(SIZES) - 1)
    bad_nights = {1 + int(seed % 88): 0.6} if bad else {}  # not the first or last night: no neighbours there
    quiet = detect(busbw_matrix(ClusterPlan(cluster="p", nights=90, noise=noise, bad_nights=bad_nights, seed=seed)))
    factor = 1 - change if worse else 1 + change
    planted = ClusterPlan(cluster="p", nights=90, noise=noise, seed=seed,
                          shifts=(Shift(night=night, factor=factor, lo_bytes=SIZES[lo], hi_bytes=SIZES[hi]),))
    found = detect(busbw_matrix(planted)).shifts
    hit = [s for s in found if abs(s.row - night) <= 2 and (s.log_change < 0) == worse
           and s.first_col <= hi and s.last_col >= lo]
    _OUTCOMES.append({"noise": noise, "change": abs(math.log(factor)), "false": len(quiet.shifts),
                      "bad_missed": float(bad and not any(s.row == 1 + seed % 88 for s in quiet.spikes)),
                      "hit": float(bool(hit)), "extra": len(found) - len(hit[:1])})


def test_false_alarm_and_detection_rates_over_generated_histories() -> None:
    _OUTCOMES.clear()
    _one_history()
    n = len(_OUTCOMES)
    false_rate = sum(o["false"] for o in _OUTCOMES) / n  # per series of 90 nights
    big = [o for o in _OUTCOMES if o["change"] >= 3 * o["noise"] and math.expm1(o["change"]) >= 1.2 * MIN_GAIN]
    all_big = [o for o in _OUTCOMES if o["change"] >= 3 * o["noise"]]
    detection = sum(o["hit"] for o in big) / max(len(big), 1)
    print(f"\nobserve changes over {n} generated 90-night histories (17 sizes, noise 1-5 %, changes 0-20 %): "
          f"false alarms {false_rate:.3f} per stationary series per 90 nights (target < 1); detection "
          f"{detection:.1%} of {len(big)} changes >= 3x the noise and >= 1.2x the 3 % minimum gain (target >= 90 %),"
          f" {sum(o['hit'] for o in all_big) / max(len(all_big), 1):.1%} of all {len(all_big)} >= 3x the noise; "
          f"extra changes in planted series {sum(o['extra'] for o in _OUTCOMES) / n:.3f}; bad nights not listed "
          f"as outliers {sum(o['bad_missed'] for o in _OUTCOMES):.0f}")
    assert len(big) >= 10
    assert false_rate < 1.0 and detection >= 0.90
