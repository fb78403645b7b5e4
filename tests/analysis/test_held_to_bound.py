"""NCCL's model held to the links: an expected measurement never beats the algorithm's bound.

NCCL's tuning tables rank algorithms; they can rate one above what the wires carry. NVLSTree all_reduce on 2 x 8
H100 with eight 200 Gb/s NICs per node is 460 GB/s in them, while each node's NICs carry S each way, so busbw <=
1.875 x 8 x 25 = 375 GB/s. predict, analyze (and so report and trace) hold the model's bandwidth term to that
bound and keep its latency, ramp and network terms.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.bounds import algorithm_bound, held_time_us
from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.params import link_params
from collscope.analysis.params_source import job_params_source
from collscope.analysis.predict import predict, render_predict_text
from collscope.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "all_reduce_perf-h100-2x8-200g-nics-shape.txt"
"""Mine, in nccl-tests' shape: 16 H100 ranks on 2 hosts, 292-333 GB/s from 1 to 8 GiB (a node's eight 200 Gb/s
NICs carry at most 375)."""


def _choices(nic_gbit: float) -> dict[int, object]:
    result = predict("all_reduce", gpu="H100", nranks=16, nnodes=2, nic_gbit=nic_gbit, sizes=[1 << 20, 1 << 30,
                                                                                               8 << 30])
    return {c.size_bytes: c for c in result.nccl_choice}


def test_nvlstree_over_200g_nics_is_held_to_what_the_nics_carry() -> None:
    params = link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=200)
    bound = algorithm_bound("all_reduce", "NVLSTree", params)
    assert bound.busbw_gbps == pytest.approx(1.875 * 8 * 25) and bound.limited_by == "NICs"
    big = _choices(200)[8 << 30]
    assert big.algo == "NVLSTree" and big.busbw_gbps > 455  # NCCL's own table: above the NICs
    assert 360 < big.expected_busbw_gbps <= 375
    assert "held to the NVLSTree bound on the NICs, 375.0 GB/s" in big.held_to_bound
    one_g = _choices(200)[1 << 30]
    assert one_g.expected_busbw_gbps < big.expected_busbw_gbps  # the latency and ramp stay: still a curve


def test_the_bound_does_not_touch_a_model_within_the_links() -> None:
    for size, choice in _choices(400).items():  # 8 x 400G: NVLink binds, 750 GB/s over the NICs
        assert choice.held_to_bound == "", size
    small = _choices(200)[1 << 20]
    assert small.held_to_bound == ""  # 1 MiB: far from any bandwidth bound on these links


def test_held_time_adds_only_the_bandwidth_difference() -> None:
    params = link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=200)
    inputs = graph_inputs_from_topology(params)
    size = 8 << 30
    time, bound = held_time_us("all_reduce", "NVLSTree", "Simple", size, 1000.0, params, inputs)
    assert bound is not None
    # S f / 375 - S f / (NCCL's asymptotic busbw) added to the given time
    assert time - 1000.0 == pytest.approx(1.875 * size / 1e3 * (1 / 375 - 1 / 460.7), rel=0.01)
    same, none = held_time_us("all_reduce", "Ring", "Simple", size, 1000.0, params, inputs)
    assert (same, none) == (1000.0, None)  # the ring's table (191 GB/s) is within the ring bound (200)


def test_predict_says_when_it_held_the_model() -> None:
    text = render_predict_text(predict("all_reduce", gpu="H100", nranks=16, nnodes=2, nic_gbit=200,
                                       sizes=[8 << 30]))
    assert "its bandwidth held to the NVLSTree bound on the NICs, 375.0 GB/s, which NCCL's model exceeds" in text


def test_analyze_judges_a_run_near_the_nic_bound_against_the_bound() -> None:
    frame = load_results([FIXTURE])
    rows = analyze(frame, params=job_params_source(frame, nic_gbit=200)).sizes
    eight = rows[(rows["size_bytes"] == 8 << 30) & ~rows["in_place"]].iloc[0]
    assert eight["model_busbw_gbps"] <= 375 and eight["verdict"] == "normal"  # 333 of at most 375
    fast = analyze(frame, params=job_params_source(frame, nic_gbit=400)).sizes
    eight = fast[(fast["size_bytes"] == 8 << 30) & ~fast["in_place"]].iloc[0]
    assert eight["model_busbw_gbps"] > 440 and eight["verdict"] == "low"  # the same figure on 400G NICs: low


def test_report_and_analyze_agree_on_the_held_model(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    result = CliRunner().invoke(main, ["report", str(FIXTURE), "--out", str(out), "--nic-gbit", "200"])
    assert result.exit_code == 0, result.output
    text = CliRunner().invoke(main, ["analyze", str(FIXTURE), "--nic-gbit", "200"]).output
    assert "| 2G-8G | 311-333 | NVLSTree/Simple | modelled |" in (out / "report.md").read_text()
    assert "2G-8G  311-333  NVLSTree/Simple  modelled" in text
