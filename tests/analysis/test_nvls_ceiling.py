"""NVLS's own rate inside one NVLink domain (collscope/analysis/nccl_model/model.py nvls_graph_cap): NCCL's NVLS
table is nChannels x min(intra term, the graph's bwInter), and on 8 sm100 GPUs bwInter stops at the top of NCCL's
sm100 speed array (90 GB/s, src/graph/search.cc) below the intra term (80 x 0.74 x 7/8 x 2 = 103.6 GB/s a channel,
src/graph/tuning.cc). The expected measurement stays NCCL's table (the scorecard's prediction); analyze calls a
measurement suspicious only beyond the margin of the intra term's, which healthy published systems reach.

The fixture is written in the shape of the published 8-GPU B200 curves (GCP A4, OCI B300): 725-737 GB/s at 1-4 GiB,
then a step to 838-844 at 8-16 GiB."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.nccl_model.choice import nccl_choice
from collscope.analysis.nccl_model.model import nvls_graph_cap
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.params import link_params
from collscope.cli import main
from collscope.collectives.record import Measurement, write_jsonl
from collscope.topo.gpus import gpu_generation
from tests.scripts import load_bench

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
RUN = FIXTURES / "all_reduce_perf-b200-8gpu-nvls-step-at-8g.txt"
GIB = 1 << 30


def _inputs(gpu: str, nranks: int, nnodes: int, **kw: object):  # type: ignore[no-untyped-def]
    return graph_inputs_from_topology(link_params(None, gpu=gpu, nranks=nranks, nnodes=nnodes, **kw))  # type: ignore[arg-type]


def test_the_nvls_graph_holds_8_sm100_gpus_below_the_intra_term_and_nothing_else() -> None:
    b200 = _inputs("B200", 8, 1)
    assert (b200.nvls.n_channels, b200.nvls.bw_intra, b200.nvls.bw_inter) == (8, 80.0, 90.0)
    assert nvls_graph_cap(b200, "all_reduce") == pytest.approx(80 * 0.74 * 7 / 8 * 2 / 90)
    assert nvls_graph_cap(b200, "all_reduce", version="2.19") == 1.0  # 2.19's rule: min(bwIntra, bwInter)
    assert nvls_graph_cap(b200, "all_gather") == 1.0  # intra term 80 x 0.74 x 7/8 x 7/8 < 90
    assert nvls_graph_cap(_inputs("H100", 8, 1), "all_reduce") == 1.0  # 40 x 0.85 x 7/8 x 2 = 59.5 < 60
    assert nvls_graph_cap(_inputs("GB200", 72, 18, nvl_domain=72), "all_reduce") == 1.0  # 32 heads at 20/40
    assert nvls_graph_cap(_inputs("GB300", 8, 2, nvl_domain=72), "all_reduce") > 1.1  # 2 trays, one domain
    assert nvls_graph_cap(_inputs("B200", 16, 2, nic_gbit=400), "all_reduce") == 1.0  # across domains


def test_the_ceiling_is_above_the_expected_measurement_by_the_bandwidth_term_only() -> None:
    b200 = _inputs("B200", 8, 1)
    big = nccl_choice(b200, "all_reduce", 16 * GIB)
    assert big.algo == "NVLS" and 700 < big.expected_busbw_gbps < 730
    assert big.ceiling_busbw_gbps == pytest.approx(big.expected_busbw_gbps * 1.15, rel=0.02)
    small = nccl_choice(b200, "all_reduce", 1 << 20)  # latency-bound: the same
    assert small.ceiling_busbw_gbps == 0.0 or small.ceiling_busbw_gbps < small.expected_busbw_gbps * 1.05
    assert nccl_choice(_inputs("H100", 8, 1), "all_reduce", 16 * GIB).ceiling_busbw_gbps == 0.0


def test_published_8_gpu_sm100_nvls_runs_sit_above_the_table_and_within_the_ceiling() -> None:
    """The claimed scorecard rows of NVLS all_reduce on 8 sm100 GPUs of one NVLink domain at 4 GiB and more: the
    table's expected measurement is 14-20% below several of them, the ceiling's margin holds all of them."""
    scorecard = load_bench("scorecard", "scorecard_for_nvls_ceiling")
    rows = [r for r in scorecard.read_published()
            if r.op == "all_reduce" and r.nranks == 8 and r.size_bytes >= 4 * GIB and not r.off_reason
            and (gen := gpu_generation(r.gpu)) is not None and gen.sm >= 100 and r.nvl_domain >= 8]
    checked = above_table = 0
    for r in rows:
        choice = nccl_choice(_inputs(r.gpu, 8, r.nnodes, nvl_domain=r.nvl_domain), "all_reduce", r.size_bytes)
        if choice.algo != "NVLS":
            continue
        checked += 1
        assert r.busbw_gbps <= choice.ceiling_busbw_gbps * 1.15, r
        above_table += r.busbw_gbps > choice.expected_busbw_gbps * 1.15
    assert checked >= 8 and above_table >= 4


def test_analyze_calls_the_healthy_step_normal_and_says_why() -> None:
    result = analyze(load_results([RUN], nnodes=1), params=link_params(None, gpu="B200", nranks=8, nnodes=1))
    rows = result.sizes[~result.sizes["in_place"]]
    assert set(rows["verdict"]) == {"normal"}
    big = rows[rows["size_bytes"] == 16 * GIB].iloc[0]
    assert big["efficiency"] > 1.15  # above the table's margin: suspicious before the ceiling
    (note,) = [n for n in result.notes if n.startswith("all_reduce default at 8G-16G: above the")]
    assert "bwInter stops at the top of NCCL's speed array, 90 GB/s on sm100" in note
    assert "judged normal" in note and "835-892 GB/s" in note


def _one_point(tmp_path: Path, gpu: str, busbw: float) -> Path:
    size = 8 * GIB
    time_us = size * 1.75 / (busbw * 1e3)
    path = tmp_path / f"{gpu}.jsonl"
    write_jsonl(path, [Measurement(engine="nccl-tests", backend="nccl", op="all_reduce", size_bytes=size,
                                   count=size // 4, dtype="float", redop="sum", root=None, in_place=False, nranks=8,
                                   nnodes=1, time_us=time_us, algbw_gbps=size / time_us / 1e3, busbw_gbps=busbw,
                                   ok=True, iters=20, warmup=5, repeat=0, hosts=("n1",), gpu=gpu)])
    return path


@pytest.mark.parametrize(("gpu", "busbw"), [("B200", 1000.0), ("H100", 560.0)])
def test_beyond_the_ceiling_or_without_one_a_measurement_is_still_suspicious(tmp_path: Path, gpu: str,
                                                                            busbw: float) -> None:
    path = _one_point(tmp_path, gpu, busbw)
    result = analyze(load_results([path], nnodes=1), params=link_params(None, gpu=gpu, nranks=8, nnodes=1))
    assert list(result.sizes["verdict"]) == ["suspicious"]
    assert not [n for n in result.notes if "judged normal" in n]


def test_predict_names_the_ceiling() -> None:
    out = CliRunner().invoke(main, ["predict", "--gpu", "B200", "--op", "all_reduce", "--nranks", "8", "--nnodes",
                                    "1", "--sizes", "16G"])
    assert out.exit_code == 0, out.output
    assert "NVLS of all_reduce at 16G: the expected measurement is NCCL's NVLS table" in out.output
    h100 = CliRunner().invoke(main, ["predict", "--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes",
                                     "1", "--sizes", "16G"])
    assert h100.exit_code == 0 and "NVLS's own rate" not in h100.output
