"""analyze judges a measurement by the busbw its time gives (collscope/analysis/efficiency.py measured_busbw):
nccl-tests prints busbw with two decimals, so its smallest sizes print 0.00-0.99 while the time keeps four digits.
Before, a 64-byte reduce_scatter on 4 GPUs (18.2 us, busbw printed 0.00) read efficiency 0% and 'low'."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from collscope.analysis.compare import analyze
from collscope.analysis.efficiency import measured_busbw
from collscope.analysis.load import load_results
from collscope.analysis.params import link_params

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
RUN = FIXTURES / "reduce_scatter_perf-g4-h100-one-process-18us-floor.txt"


def test_the_time_gives_the_busbw_the_print_rounds_away():
    # reduce_scatter of 64 B on 4 ranks in 17.32 us: algbw 64 / 17.32 us = 0.003695 GB/s, busbw x 3/4
    assert measured_busbw("reduce_scatter", 4, 64, 17.32, 0.00) == pytest.approx(0.0027714, rel=1e-4)
    assert measured_busbw("all_reduce", 8, 1 << 20, 18.35, 100.00) == pytest.approx(100.0, rel=2e-3)
    # a time that does not give the printed busbw leaves it (another formula made that busbw)
    assert measured_busbw("all_reduce", 8, 1 << 20, 18.35, 57.14) == 57.14
    assert measured_busbw("all_reduce", 8, 1 << 20, math.nan, 57.14) == 57.14  # no time


def test_a_run_s_smallest_size_is_judged_by_its_time_not_a_printed_zero():
    result = analyze(load_results([RUN], nnodes=1), params=link_params(None, gpu="H100", nranks=4, nnodes=1))
    sizes = result.sizes
    smallest = sizes[(sizes["size_bytes"] == 64) & (~sizes["in_place"])].iloc[0]
    assert smallest["busbw_gbps"] == 0.0  # as printed
    one_k = sizes[(sizes["size_bytes"] == 1024) & (~sizes["in_place"])].iloc[0]
    # the same per-call floor (17-18 us) from 64 B to 1 KiB: the same efficiency, not 0% at 64 B
    assert smallest["efficiency"] == pytest.approx(one_k["efficiency"], rel=0.1)
    assert smallest["efficiency"] > 0.3


def test_a_healthy_runs_small_sizes_are_judged_within_what_published_runs_show():
    """Published one-node curves take 0.44-0.98 of the model's busbw at 64 B-64 KiB (their own small sizes,
    bench/scorecard/small_sizes.csv): analyze's margin there widens to that band, so this healthy one-process run
    (55-57% of the model) reads normal; at the bare 15% it read low."""
    from collscope.analysis.analyze_options import AnalyzeOptions

    frame = load_results([RUN], nnodes=1)
    params = link_params(None, gpu="H100", nranks=4, nnodes=1)
    small = analyze(frame, params=params).sizes
    small = small[small["size_bytes"] <= 64 * 1024]
    assert len(small) >= 20 and set(small["verdict"]) == {"normal"} and (small["margin"] > 0.5).all()
    bare = analyze(frame, params=params, options=AnalyzeOptions(published_margins=False)).sizes
    bare = bare[bare["size_bytes"] <= 64 * 1024]
    assert (bare["verdict"] == "low").sum() >= 18
