"""The statistics under the canary verdict: t quantiles, the interval's coverage, the A/A noise, more blocks,
and the shape of the ranges table (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.canary.verdict import judge
from collscope.canary.verdict_sim import synthetic_frame
from collscope.canary.verdict_stats import (
    MORE_BLOCKS_CAP,
    boot_change,
    expanded_levels,
    more_blocks_needed,
    successive_noise,
    t_quantile,
)


@pytest.mark.parametrize(("p", "df", "expected"), [
    (0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 3, 3.1824), (0.975, 7, 2.3646), (0.975, 30, 2.0423),
    (0.95, 5, 2.0150), (0.995, 10, 3.1693), (0.9975, 18, 3.1966),
])
def test_t_quantiles_match_the_tables(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, rel=2e-3)


def test_the_expanded_levels_widen_the_percentile_interval_more_for_fewer_blocks() -> None:
    low8, high8 = expanded_levels(8, 0.95)
    low30, _ = expanded_levels(30, 0.95)
    assert low8 < low30 < 0.025 and high8 == pytest.approx(1 - low8)


@pytest.mark.parametrize("n", [3, 5, 8, 16])
def test_the_paired_interval_covers_the_true_change_about_95pct_of_the_time(n: int) -> None:
    rng = np.random.default_rng(n)
    true, hits, trials = 0.03, 0, 400
    for i in range(trials):
        a = rng.normal(0.0, 0.04, (n, 1))
        b = a + true + rng.normal(0.0, 0.04, (n, 1))
        _, lo, hi = boot_change(a, b, paired=True, confidence=0.95, n_boot=1000, seed=i)
        hits += bool(lo[0] <= true <= hi[0])
    assert 0.91 <= hits / trials <= 0.99, hits / trials


def test_the_unpaired_interval_covers_the_true_change() -> None:
    rng = np.random.default_rng(1)
    hits, trials = 0, 300
    for i in range(trials):
        a, b = rng.normal(0.0, 0.03, (8, 1)), rng.normal(0.05, 0.03, (6, 1))
        _, lo, hi = boot_change(a, b, paired=False, confidence=0.95, n_boot=1000, seed=i)
        hits += bool(lo[0] <= 0.05 <= hi[0])
    assert 0.91 <= hits / trials <= 0.99, hits / trials


def test_the_aa_noise_of_consecutive_runs_ignores_a_linear_drift() -> None:
    rng = np.random.default_rng(2)
    noise = rng.normal(0.0, 0.02, (400, 1))
    drifting = noise + np.linspace(0.0, 2.0, 400)[:, None]
    plain = float(drifting.std(ddof=1))
    assert successive_noise(drifting)[0] == pytest.approx(0.02 * math.sqrt(2), rel=0.1)
    assert plain > 10 * successive_noise(drifting)[0]
    assert np.isnan(successive_noise(noise[:2])).all()


def test_more_blocks_follow_the_square_root_rule_and_stop_at_the_boundary() -> None:
    boundary = math.log1p(0.01)
    # estimate -1%, half-width 4% at 8 blocks, 2% to the boundary: the half-width must halve; t(7) = 2.36
    # shrinks to t(22) = 2.07 on the way, so 23 blocks in all (not the 32 of 1/sqrt(n) alone)
    assert more_blocks_needed(-0.01, -0.05, 0.03, 8, boundary, 0.95) == 15
    assert more_blocks_needed(boundary, boundary - 0.03, boundary + 0.03, 8, boundary, 0.95) is None
    assert more_blocks_needed(0.0099, -0.03, 0.05, 8, boundary, 0.95) is None  # needs far more than the cap
    assert more_blocks_needed(0.05, 0.0, 0.10, 8, boundary, 0.95) is not None  # on the losing side too
    assert MORE_BLOCKS_CAP == 64


@settings(max_examples=25, deadline=None)
@given(lo=st.integers(0, 7), width=st.integers(0, 7), factor=st.sampled_from([0.7, 1.0, 1.25]),
       blocks=st.integers(3, 8), seed=st.integers(0, 2**16))
def test_the_ranges_partition_the_measured_sizes(lo: int, width: int, factor: float, blocks: int,
                                                 seed: int) -> None:
    sizes = tuple(1024 * 4**k for k in range(8))
    hi = min(lo + width, 7)
    frame = synthetic_frame(blocks=blocks, sizes=sizes, noise=0.02,
                            effect=lambda s: factor if sizes[lo] <= s <= sizes[hi] else 1.0, seed=seed)
    v = judge(frame, n_boot=400)
    covered = [s for r in v.ranges for s in sizes if r.min_bytes <= s <= r.max_bytes]
    assert covered == list(sizes)  # every size once, in order
    assert sum(r.time_share for r in v.ranges) == pytest.approx(1.0)
    assert all(a.verdict != b.verdict for a, b in zip(v.ranges, v.ranges[1:], strict=False))  # neighbours differ
    for r in v.ranges:
        c = r.busbw_change
        assert c.low <= c.estimate <= c.high
        assert r.verdict != "loses" or c.high < 0
        assert r.verdict != "gains" or c.low > 0
    if factor == 1.0:
        assert v.decision != "no-go" or v.workload_change.low > 0.01
