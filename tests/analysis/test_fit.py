"""aggregate and the robust alpha-beta fit."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from conftest import SIZES, Planted
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from collscope.analysis.fit import CONFIG_KEYS, aggregate, fit_alpha_beta, fit_line
from collscope.analysis.load import load_results

LADDER = np.array([8 << i for i in range(28)], dtype=float)  # 8 B .. 1 GiB


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(0.5, 200.0), bw=st.floats(0.05, 900.0), sigma=st.floats(0.0, 0.05),
       seed=st.integers(0, 2**32 - 1), n_outliers=st.integers(0, 3))
def test_fit_recovers_planted_alpha_beta(alpha: float, bw: float, sigma: float, seed: int, n_outliers: int) -> None:
    n_half = alpha * bw * 1e3  # alpha / beta, bytes
    assume(512 <= n_half <= 4 << 20)  # enough sizes on both sides of n_1/2 to tell alpha and beta through outliers
    rng = np.random.default_rng(seed)
    beta = 1e-3 / bw
    times = (alpha + beta * LADDER) * rng.lognormal(0.0, sigma, len(LADDER))
    spots = rng.choice(len(LADDER), size=n_outliers, replace=False)
    times[spots] *= rng.choice([0.3, 2.5, 4.0], size=n_outliers)  # dips and slow sizes
    fit = fit_line(LADDER, times)
    tol = 0.05 + 4 * sigma
    assert abs(fit["alpha_us"] / alpha - 1) < tol
    assert abs(fit["beta_us_per_byte"] / beta - 1) < tol
    assert fit["n_sizes"] == len(LADDER)
    assert fit["alpha_lo_us"] <= fit["alpha_us"] <= fit["alpha_hi_us"]
    assert fit["beta_lo"] <= fit["beta_us_per_byte"] <= fit["beta_hi"]


def test_fit_is_exact_without_noise_and_intervals_shrink() -> None:
    fit = fit_line(LADDER, 7.0 + LADDER * 2e-5)
    assert math.isclose(fit["alpha_us"], 7.0, rel_tol=1e-6) and math.isclose(fit["beta_us_per_byte"], 2e-5,
                                                                               rel_tol=1e-6)
    assert fit["r2"] > 0.999999 and fit["mad_rel"] < 1e-9
    assert fit["alpha_hi_us"] - fit["alpha_lo_us"] < 1e-6


def test_fit_keeps_alpha_and_beta_non_negative() -> None:
    latency_only = fit_line([8, 16, 32, 64], [5.0, 5.1, 4.9, 5.0])
    assert latency_only["beta_us_per_byte"] == 0.0 and math.isclose(latency_only["alpha_us"], 5.0, rel_tol=0.05)
    bandwidth_only = fit_line([1e6, 2e6, 4e6, 8e6], [10.0, 20.0, 40.0, 80.0])
    assert bandwidth_only["alpha_us"] < 1e-9 and math.isclose(bandwidth_only["beta_us_per_byte"], 1e-5)


def test_fit_of_too_few_sizes_is_nan() -> None:
    one = fit_line([1024], [3.0])
    assert math.isnan(one["alpha_us"]) and one["n_sizes"] == 1
    two = fit_line([1024, 2048], [3.0, 4.0])
    assert math.isclose(two["alpha_us"], 2.0) and math.isnan(two["alpha_hi_us"])  # exact, no interval


def test_a_time_that_squares_to_zero_gives_a_fit_or_none_never_an_exception() -> None:
    """A damaged file's 1e-300 us (its square underflows, the weight 1 / time^2 was infinite and the solver raised
    LinAlgError): the fit returns, its figures finite or NaN."""
    sizes = [1024.0, 1 << 20, 1 << 24, 1 << 26]
    fit = fit_line(sizes, [1e-300, 60.0, 250.0, 900.0])
    assert all(math.isfinite(fit[k]) or math.isnan(fit[k]) for k in ("alpha_us", "beta_us_per_byte", "r2"))
    clean = fit_line(sizes[1:], [60.0, 250.0, 900.0])
    assert math.isfinite(clean["alpha_us"]) and clean["beta_us_per_byte"] > 0


def test_aggregate_planted(planted: Planted) -> None:
    df = load_results(planted.root)
    agg = aggregate(df)
    assert len(agg) == 4 * len(SIZES)
    assert list(agg.columns[: len(CONFIG_KEYS) + 1]) == [*CONFIG_KEYS, "size_bytes"]
    cell = agg[(agg["config"] == planted.tree) & (agg["size_bytes"] == planted.spread_size)].iloc[0]
    assert cell["n"] == 3 and math.isclose(cell["spread_range"], 2.0 * 1.01 / 0.99 - 1, rel_tol=1e-6)
    assert cell["time_min_us"] < cell["time_us"] < cell["time_max_us"]
    wrong = agg[(agg["config"] == planted.default) & (agg["size_bytes"] == planted.wrong_size)].iloc[0]
    assert wrong["n"] == 2 and wrong["n_total"] == 3 and wrong["n_not_ok"] == 1
    simple = agg[agg["config"] == planted.simple]
    assert (simple["n"] == 0).all() and (simple["n_not_applied"] == 3).all() and simple["time_us"].isna().all()
    assert set(simple["failure"]) == {"setting not applied"}


def test_fit_alpha_beta_planted(planted: Planted) -> None:
    fits = fit_alpha_beta(load_results(planted.root)).set_index("config")
    tree = fits.loc[planted.tree]
    assert math.isclose(tree["alpha_us"], 4.0, rel_tol=0.05) and math.isclose(tree["bw_gbps"], 50.0, rel_tol=0.05)
    assert math.isclose(tree["busbw_gbps"], tree["bw_gbps"] * 2 * 7 / 8)
    assert math.isclose(tree["n_half_bytes"], tree["alpha_us"] / tree["beta_us_per_byte"])
    assert tree["bw_lo_gbps"] <= tree["bw_gbps"] <= tree["bw_hi_gbps"]
    default = fits.loc[planted.default]  # the 8 MiB dip is an outlier, not a new line
    assert math.isclose(default["bw_gbps"], 100.0, rel_tol=0.05) and default["outliers"] >= 1
    assert default["residuals"][planted.dip_size] > 1.0
    assert fits.loc[planted.simple, "n_sizes"] == 0 and math.isnan(fits.loc[planted.simple, "alpha_us"])


def test_fit_of_real_sweep(mpi_results: Path) -> None:
    df = load_results(mpi_results)
    fits = fit_alpha_beta(df)
    assert len(fits) == df.groupby(list(CONFIG_KEYS), observed=True).ngroups == 9  # 7 forced + 2 defaults
    assert (fits["alpha_us"] > 0).all() and (fits["bw_gbps"] > 0).all()
    assert fits["n_sizes"].min() >= 10 and pd.notna(fits["r2"]).all()
    assert fits.equals(fit_alpha_beta(aggregate(df)))
