"""The models' published accuracy per size band and scope (collscope.analysis.model_accuracy): the table, what
predict says with it, and analyze's verdict margins widened by it (the shipped table is checked against the
scorecard in test_scorecard.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from collscope.analysis.efficiency import Margins, add_expected
from collscope.analysis.model_accuracy import (
    AccuracySample,
    BandAccuracy,
    accuracy_table,
    parse_accuracy_csv,
    published_accuracy,
    render_accuracy_csv,
)
from collscope.analysis.params import link_params
from collscope.analysis.predict import predict, render_predict_text
from collscope.errors import ConfigError

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def _samples(family: str, across: bool, size: int, ratios: list[float]) -> list[AccuracySample]:
    return [AccuracySample(family=family, across_domains=across, size_bytes=size,  # type: ignore[arg-type]
                           measured_over_model=r) for r in ratios]


def test_bands_split_at_their_edges_and_drop_figures_below_64_bytes() -> None:
    samples = (_samples("nccl", True, 8 * MIB - 1, [1.0]) + _samples("nccl", True, 8 * MIB, [0.5, 2.0])
               + _samples("nccl", True, 512 * KIB, [9.0]) + _samples("nccl", True, 16 * GIB, [1.1])
               + _samples("nccl", True, 64 * KIB, [0.7, 1.4]) + _samples("nccl", True, 32, [5.0]))
    table = accuracy_table(samples)
    assert [(b.lo_bytes, b.hi_bytes, b.rows) for b in table] == [
        (64, 128 * KIB, 2), (128 * KIB, MIB, 1), (MIB, 8 * MIB, 1), (8 * MIB, 64 * MIB, 2), (512 * MIB, None, 1)]
    assert table[0].band == "64-128K" and table[3].band == "8M-64M" and table[4].band == ">= 512M"


def test_percentiles_and_the_within_count_are_of_measured_over_model() -> None:
    # eleven figures 0.70, 0.75, ..., 1.20 of the model: the 10th percentile is 0.75, the 90th 1.15; within 15%
    # is judged as the scorecard judges it (model / published within 15%): 0.90 .. 1.15 (1/0.87 = 1.149 counts)
    ratios = [0.70 + 0.05 * i for i in range(11)]
    (band,) = accuracy_table(_samples("nccl", False, 4 * MIB, ratios))
    assert (band.measured_over_model_p10, band.measured_over_model_p50, band.measured_over_model_p90) == (
        0.75, 0.95, 1.15)
    assert band.within_15pct == sum(abs(1 / r - 1) <= 0.15 for r in ratios) == 6
    assert band.margins is None  # eleven figures are too few to widen a margin
    wide = accuracy_table(_samples("nccl", False, 4 * MIB, ratios * 2))[0]
    assert wide.rows == 22 and wide.margins is not None
    below, above = wide.margins
    assert math.isclose(below, 0.25) and math.isclose(above, 0.15)


def test_the_csv_round_trips_and_a_bad_line_is_named() -> None:
    table = accuracy_table(_samples("p2p", True, GIB, [0.9, 1.0, 1.1]) + _samples("nccl", False, MIB, [1.0]))
    text = render_accuracy_csv(table)
    assert parse_accuracy_csv(text) == table
    broken = text.replace("p2p,1,", "p2p,yes,")
    with pytest.raises(ConfigError, match=r"model_accuracy.csv:3: expected 9 fields .*across_domains 0\|1"):
        parse_accuracy_csv(broken)
    with pytest.raises(ConfigError, match=r":1: expected the header"):
        parse_accuracy_csv("size,busbw\n1,2\n")


def test_the_shipped_table_answers_by_op_family_size_and_scope() -> None:
    assert published_accuracy("all_reduce", across_domains=True, size_bytes=512 * KIB) is None
    nccl = published_accuracy("all_reduce", across_domains=True, size_bytes=4 * MIB)
    p2p = published_accuracy("alltoall", across_domains=True, size_bytes=4 * MIB)
    assert isinstance(nccl, BandAccuracy) and isinstance(p2p, BandAccuracy)
    assert (nccl.family, p2p.family) == ("nccl", "p2p")
    assert published_accuracy("reduce_scatter", across_domains=True, size_bytes=4 * MIB) == nccl
    inside = published_accuracy("all_reduce", across_domains=False, size_bytes=4 * MIB)
    assert inside is not None and inside != nccl


def test_predict_states_the_band_of_each_size_and_its_scope() -> None:
    across = predict("all_reduce", gpu="H100", nranks=16, nnodes=2, nic_gbit=400,
                     sizes=[64 * KIB, 256 * KIB, 4 * MIB])
    assert across.params.ndomains == 2
    small = across.accuracy[0]  # the published curves' own small sizes
    assert small is not None and small.across_domains and (small.lo_bytes, small.hi_bytes) == (64, 128 * KIB)
    assert across.accuracy[1] is None  # nothing published at 128 KiB-1 MiB
    band = across.accuracy[2]
    assert band is not None and band.across_domains and band.lo_bytes == MIB
    text = render_predict_text(across)
    assert "published: no figure in collscope's scorecard at this size and scope" in text
    assert f"published figures at 64-128K, across NVLink domains (the network): {small.within_15pct} of " in text
    assert f"published figures at 1M-8M, across NVLink domains (the network): {band.within_15pct} of {band.rows}" \
        in text
    one_rack = predict("all_reduce", gpu="GB200", nranks=72, nnodes=18, nvl_domain=72, sizes=[4 * MIB])
    assert one_rack.params.ndomains == 1 and one_rack.accuracy[0] is not None
    assert not one_rack.accuracy[0].across_domains


def _one_row(size: int, fraction: float, published: bool) -> pd.Series:
    """analyze's sizes row for 2 x 8 H100 (8 x 400G per node) measuring ``fraction`` of the model at ``size``."""
    params = link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=400)
    expected = predict("all_reduce", gpu="H100", nranks=16, nnodes=2, nic_gbit=400, sizes=[size])
    model = expected.nccl_choice[0].expected_busbw_gbps
    sizes = pd.DataFrame([{"op": "all_reduce", "nranks": 16, "nnodes": 2, "size_bytes": size, "config": "default",
                           "backend": "nccl", "busbw_gbps": fraction * model}])
    add_expected(sizes, {}, params, Margins(nccl=0.15, alpha_beta=0.10, link=0.05, published=published), [], {})
    row = sizes.iloc[0]
    assert math.isclose(row["model_busbw_gbps"], model, rel_tol=1e-9)
    return row


def test_a_mid_size_as_far_below_the_model_as_published_systems_is_normal_not_low() -> None:
    band = published_accuracy("all_reduce", across_domains=True, size_bytes=4 * MIB)
    assert band is not None and band.margins is not None and band.margins[0] > 0.15
    fraction = 1 - (0.15 + band.margins[0]) / 2  # below the flat 15%, within the published spread
    row = _one_row(4 * MIB, fraction, published=True)
    assert row["verdict"] == "normal" and math.isclose(row["margin"], band.margins[0])
    assert _one_row(4 * MIB, fraction, published=False)["verdict"] == "low"
    assert _one_row(4 * MIB, 1 - band.margins[0] - 0.03, published=True)["verdict"] == "low"


def test_at_large_sizes_the_published_spread_is_narrow_and_the_flat_margin_stays() -> None:
    band = published_accuracy("all_reduce", across_domains=True, size_bytes=GIB)
    assert band is not None and band.margins is not None and band.margins[0] < 0.15
    row = _one_row(GIB, 0.82, published=True)
    assert row["verdict"] == "low" and math.isclose(row["margin"], 0.15)
