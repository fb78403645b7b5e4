"""NCCL's cost model: the worked examples of nccl-facts 1.6, bandwidth rules, enable rules, the search
approximation, and the predicted large-message busbw against published nccl-tests numbers (nccl-facts 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collscope.analysis.model_types import LinkParams
from collscope.analysis.nccl_model.choice import nccl_choice
from collscope.analysis.nccl_model.constants import nccl_constants
from collscope.analysis.nccl_model.model import (
    NcclGraph,
    NcclGraphInputs,
    nccl_bandwidth,
    nccl_latency_us,
    nccl_predictions,
    nccl_time_us,
)
from collscope.analysis.nccl_model.search import graph_inputs_from_topology, search_channels
from collscope.analysis.params import link_params
from collscope.errors import ConfigError
from collscope.topo.detect import load_captures
from collscope.topo.node import build_node
from collscope.topo.samples import sample_path

RING = NcclGraph(n_channels=12, bw_intra=30.0, bw_inter=30.0, type_intra="NVL")
TREE = NcclGraph(n_channels=12, bw_intra=30.0, bw_inter=30.0, type_intra="NVL", pattern="balanced_tree")
NVLS = NcclGraph(n_channels=8, bw_intra=40.0, bw_inter=60.0, type_intra="NVL", pattern="nvls", same_channels=False)
H100_1N = NcclGraphInputs(nranks=8, nnodes=1, sm=90, ring=RING, tree=TREE, nvls=NVLS, nvswitch=True)
H100_2N = NcclGraphInputs(nranks=16, nnodes=2, sm=90, ring=RING, tree=TREE, nvls=NVLS, nvswitch=True)


# ---- nccl-facts 1.6 worked examples ------------------------------------------------------------------------
@pytest.mark.parametrize(("algo", "proto", "expected"), [
    ("Ring", "LL", 15.0),      # 6.6 + 14 x 0.6
    ("Ring", "LL128", 40.6),   # 14.0 + 14 x 1.9
    ("Ring", "Simple", 56.0),  # 8.4 + 14 x 3.4
    ("Tree", "LL", 15.2),      # 6.8 + 2 x 7 x 0.6
    ("Tree", "Simple", 64.4),  # 8.4 + 2 x 7 x 4.0
])
def test_worked_examples_8_gpus_nvlink(algo, proto, expected):
    assert nccl_latency_us(H100_1N, "all_reduce", algo, proto) == pytest.approx(expected)


def test_worked_example_2x8_ring_simple_and_plateau():
    # nsteps 30, nInter 2(N-1) = 2, intraLat = max(3.4, 3 x 1.0 net overhead) -> 8.4 + 28 x 3.4 + 2 x 14 = 131.6
    assert nccl_latency_us(H100_2N, "all_reduce", "Ring", "Simple") == pytest.approx(131.6)
    bw = nccl_bandwidth(H100_2N, "all_reduce", "Ring", "Simple")
    big = 1 << 30  # nBytes / (nChannels x nRanks) >= 64: latency x 1.4 (sm80+)
    assert nccl_time_us(H100_2N, "all_reduce", "Ring", "Simple", big) == pytest.approx(131.6 * 1.4 + big / (1000 * bw))
    small = 64 * 12 * 16 - 1
    assert nccl_time_us(H100_2N, "all_reduce", "Ring", "Simple", small) == pytest.approx(131.6 + small / (1000 * bw))


def test_nccl_219_differences():
    # Tree Simple: base 0, hw 28 per hop: 2 x 7 x 28 = 392
    assert nccl_latency_us(H100_1N, "all_reduce", "Tree", "Simple", version="2.19") == pytest.approx(392.0)
    # ring inter-node steps 2N = 4: 8.4 + 26 x 3.4 + 4 x 14 = 152.8
    assert nccl_latency_us(H100_2N, "all_reduce", "Ring", "Simple", version="2.19") == pytest.approx(152.8)
    # Ring LL factor 1/4 for AllReduce (2.30: 1/2): min(87.7, 360 / 4) = 87.7 bus -> x 8/14 alg
    assert nccl_bandwidth(H100_1N, "all_reduce", "Ring", "LL", version="2.19") == pytest.approx(87.7 * 8 / 14)
    assert nccl_bandwidth(H100_1N, "all_reduce", "Ring", "LL") == pytest.approx(141.0 * 8 / 14)
    assert "PAT" not in nccl_constants("2.19").algos
    with pytest.raises(ValueError, match="valid: 2.30, 2.19"):
        nccl_constants("2.18")


def test_nccl_219_rules_as_its_source_writes_them():
    """src/graph/tuning.cc at v2.19.4-1 (and v2.20.5-1): Ring LL x 1/4 across nodes or for AllReduce/Reduce, else
    x 1/3; NVLS's bandwidth x 5/6 for AllGather/ReduceScatter too; NVLSTree's NVLink latency 23 us; Tree's network
    latency for one rank per node arrives only in 2.23."""
    slow = NcclGraph(n_channels=2, bw_intra=30.0, bw_inter=30.0, type_intra="NVL")  # 60 GB/s bus: under llMaxBw
    one_node = NcclGraphInputs(nranks=8, nnodes=1, sm=90, ring=slow, tree=slow, nvls=NVLS, nvswitch=True)
    assert nccl_bandwidth(one_node, "all_reduce", "Ring", "LL", version="2.19") == pytest.approx(60 / 4 * 8 / 14)
    assert nccl_bandwidth(one_node, "all_gather", "Ring", "LL", version="2.19") == pytest.approx(60 / 3 * 8 / 7)
    assert nccl_bandwidth(one_node, "all_gather", "NVLS", "Simple", version="2.19") == pytest.approx(
        8 * 40.0 * 5 / 6)  # nChannels x min(bwIntra, bwInter) x 5/6
    assert nccl_constants("2.19").hw_latency_us["NVLINK"]["NVLSTree"][2] == 23.0
    one_per_node = NcclGraphInputs(nranks=4, nnodes=4, sm=90, ring=RING, tree=TREE, nvls=None, nvswitch=False)
    ring_ll = {v: nccl_latency_us(one_per_node, "all_gather", "Ring", "LL", version=v) for v in ("2.19", "2.30")}
    assert ring_ll["2.19"] == pytest.approx(6.6 + 3 * 2.7)  # the Ring's own NET latency, 2.7 us per step
    assert ring_ll["2.30"] == pytest.approx(6.6 + 3 * 5.0)  # Tree's, 5.0 us


@pytest.mark.parametrize(("sm", "on_219"), [(70, True), (80, True), (90, True), (86, False), (89, False),
                                             (100, False)])
def test_ll128_by_compute_capability_in_nccl_219(sm, on_219):
    """NCCL 2.19.4-2.24.3 enable LL128 by default on sm 70, 80 and 90 only (src/graph/tuning.cc); from 2.27.3 on
    every sm >= 70 (the 2.30 tables)."""
    gpus = NcclGraphInputs(nranks=2, nnodes=1, sm=sm, ring=RING, tree=TREE, nvls=None, nvswitch=False)
    assert (nccl_bandwidth(gpus, "all_reduce", "Ring", "LL128", version="2.19") > 0) == on_219
    assert nccl_bandwidth(gpus, "all_reduce", "Ring", "LL128", version="2.30") > 0


# ---- bandwidths ------------------------------------------------------------------------------------------------
def test_bandwidths_of_an_8_gpu_h100():
    # Ring Simple: busBw 12 x 30 = 360; table algBw = 360 x n / nsteps = 360 x 8 / 14
    assert nccl_bandwidth(H100_1N, "all_reduce", "Ring", "Simple") == pytest.approx(360 * 8 / 14)
    # Ring LL128: min(0.92 x 360, 12 x 36.7) = 331.2
    assert nccl_bandwidth(H100_1N, "all_reduce", "Ring", "LL128") == pytest.approx(331.2 * 8 / 14)
    # Tree Simple AllReduce: min(0.92 x 360, 12 x 38.7) = 331.2, algBw x 0.5
    assert nccl_bandwidth(H100_1N, "all_reduce", "Tree", "Simple") == pytest.approx(331.2 * 0.5)
    # Tree LL: min(331.2 / 3.8, 141) = 87.16; Tree LL128: min(331.2 x 7/9, 12 x 36.7) = 257.6
    assert nccl_bandwidth(H100_1N, "all_reduce", "Tree", "LL") == pytest.approx(331.2 / 3.8 * 0.5)
    assert nccl_bandwidth(H100_1N, "all_reduce", "Tree", "LL128") == pytest.approx(331.2 * 7 / 9 * 0.5)
    # NVLS: 8 x min(40 x 0.85 x 7/8 x 2 = 59.5, 60) = 476 busBw; algBw x 8/14
    assert nccl_bandwidth(H100_1N, "all_reduce", "NVLS", "Simple") == pytest.approx(476 * 8 / 14)
    # Ring AllGather: busBw 360 x n / (n-1)
    assert nccl_bandwidth(H100_1N, "all_gather", "Ring", "Simple") == pytest.approx(360 * 8 / 7)


def test_tree_correction_factor():
    size = 64 << 11  # logSize 11: Simple factor 0.5
    bw = nccl_bandwidth(H100_1N, "all_reduce", "Tree", "Simple")
    expected = 64.4 + size / (1000 * bw * 0.5)
    assert nccl_time_us(H100_1N, "all_reduce", "Tree", "Simple", size) == pytest.approx(expected)


# ---- enable rules ----------------------------------------------------------------------------------------------
def test_enable_rules():
    assert nccl_bandwidth(H100_1N, "all_reduce", "NVLSTree", "Simple") == 0  # one node
    assert nccl_bandwidth(H100_2N, "all_reduce", "NVLS", "Simple") == 0  # multi-node NVLS needs CollNet
    assert nccl_bandwidth(H100_2N, "all_reduce", "NVLSTree", "Simple") > 0
    assert nccl_bandwidth(H100_1N, "all_reduce", "NVLS", "LL") == 0  # NVLS is Simple only
    assert nccl_bandwidth(H100_1N, "all_reduce", "CollNetDirect", "Simple") == 0  # CollNet off
    assert nccl_bandwidth(H100_1N, "broadcast", "Tree", "Simple") == 0  # Broadcast: Ring only
    assert nccl_bandwidth(H100_1N, "all_gather", "PAT", "Simple") == 0  # PAT needs 1 GPU per node
    one_per_node = NcclGraphInputs(nranks=4, nnodes=4, sm=90, ring=RING, tree=TREE)
    assert nccl_bandwidth(one_per_node, "all_gather", "PAT", "Simple") > 0
    pcie = NcclGraph(n_channels=2, bw_intra=12.0, bw_inter=12.0, type_intra="PXB")
    on_pcie = NcclGraphInputs(nranks=4, nnodes=1, sm=89, ring=pcie, tree=pcie)
    assert nccl_bandwidth(on_pcie, "all_reduce", "Ring", "LL128") == 0  # LL128 needs typeIntra <= NVB
    assert nccl_latency_us(on_pcie, "all_reduce", "Ring", "Simple") == pytest.approx(8.4 + 6 * 5.7)  # PCI hw
    with pytest.raises(ConfigError, match="not an NCCL path type"):
        NcclGraph(n_channels=1, bw_intra=1, bw_inter=1, type_intra="NVLINK")


def test_choice_and_restrictions():
    assert (c := nccl_choice(H100_1N, "all_reduce", 1024)).algo == "Ring" and c.proto == "LL"  # 15.0 < 15.2
    assert nccl_choice(H100_1N, "all_reduce", 1 << 30).algo == "NVLS"
    forced = nccl_choice(H100_1N, "all_reduce", 1 << 30, algos=["Ring"], protos=["Simple"])
    assert (forced.algo, forced.proto) == ("Ring", "Simple")
    with pytest.raises(ConfigError, match="unknown NCCL algorithm 'Rings'"):
        nccl_choice(H100_1N, "all_reduce", 1, algos=["Rings"])
    with pytest.raises(ConfigError, match="valid: all_reduce"):
        nccl_choice(H100_1N, "alltoall", 1)
    preds = nccl_predictions(H100_1N, "all_reduce", [1 << 20])
    assert {(p.algo, p.proto) for p in preds} == {("Tree", "LL"), ("Tree", "LL128"), ("Tree", "Simple"),
                                                  ("Ring", "LL"), ("Ring", "LL128"), ("Ring", "Simple"),
                                                  ("NVLS", "Simple")}


# ---- the search approximation -------------------------------------------------------------------------------
def test_search_channels_rules():
    # H100 (sm90 intra list): 60 x 6 = 360 best (ties later), duplicated to 12 x 30; 40 x 12 > 370.8 in pass 2.
    assert search_channels((60.0, 50.0, 40.0, 30.0, 24.0), max_bw=370.8, total_bw=370.8, sm=90) == (12, 30.0)
    # A100 (sm<90 list): 40 x 6 = 240 reaches the total; duplicated to 12 x 20.
    assert search_channels((40.0, 30.0, 20.0), max_bw=240.0, total_bw=240.0, sm=80) == (12, 20.0)
    # sm90 with bw < 50 and > 4 channels is not duplicated.
    assert search_channels((45.0,), max_bw=400.0, total_bw=400.0, sm=90) == (8, 45.0)


def _a100_node(tmp_path: Path):
    gpus = [f"GPU{i}" for i in range(8)]
    rows = ["\t" + "\t".join(gpus) + "\tCPU Affinity\tNUMA Affinity"]
    for i, g in enumerate(gpus):
        rows.append(g + "\t" + "\t".join(" X " if i == j else "NV12" for j in range(8)) + "\t0-63\t0")
    text = "\n".join(rows) + "\n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    path = tmp_path / "a100 topo.txt"
    path.write_text(text)
    return build_node(load_captures([path]), gpu="A100")


def _ring_simple_busbw(inputs: NcclGraphInputs) -> float:
    [pred] = nccl_predictions(inputs, "all_reduce", [8 << 30], algos=["Ring"], protos=["Simple"])
    return pred.busbw_gbps


def test_a100_nv12_predicted_vs_published(tmp_path):
    params = link_params(_a100_node(tmp_path), nranks=8, nnodes=1)
    inputs = graph_inputs_from_topology(params)
    assert (inputs.ring.n_channels, inputs.ring.bw_intra, inputs.nvls) == (12, 20.0, None)
    # published: 231.58 GB/s at 8 GB (Azure ND A100 v4), 232.54 (nccl-tests#175); model 12 x 20 = 240 minus latency
    busbw = _ring_simple_busbw(inputs)
    assert busbw == pytest.approx(230.0, rel=0.15)
    assert nccl_choice(inputs, "all_reduce", 8 << 30).algo == "Ring"


def test_h100_nv18_predicted_vs_published():
    params = link_params(build_node(load_captures([sample_path()])), nranks=8, nnodes=1)
    inputs = graph_inputs_from_topology(params)
    assert (inputs.ring.n_channels, inputs.ring.bw_intra) == (12, 30.0)
    assert inputs.nvls is not None and (inputs.nvls.n_channels, inputs.nvls.bw_intra, inputs.nvls.bw_inter) == (
        8, 40.0, 60.0)
    # published: ring ~370 GB/s, NVLS ~480 GB/s (nccl-tests#212)
    assert _ring_simple_busbw(inputs) == pytest.approx(370.0, rel=0.15)
    choice = nccl_choice(inputs, "all_reduce", 8 << 30)
    assert choice.algo == "NVLS" and choice.busbw_gbps == pytest.approx(480.0, rel=0.15)


def test_a100_two_nodes_4_hdr_predicted_vs_published():
    # 2 x 8 A100, 4 x 200 Gb/s per node: published 86 GB/s (theoretical 100, nccl-tests#175).
    # NIC path min(25, Gen4 24) = 24: 4 channels x 24 = 96 busBw.
    params = LinkParams(nranks=16, nnodes=2, alpha_us=3.4, alpha_inter_us=14.0, bw_gbps=100.0, intra_bw_gbps=300.0,
                        inter_bw_gbps=100.0, nics_per_node=4, nic_gbps=25.0, gpu="A100", sm=80, intra_link="nvlink",
                        nvlinks_per_gpu=12, nvswitch=True, pcie_gen=4)
    inputs = graph_inputs_from_topology(params)
    assert (inputs.ring.n_channels, inputs.ring.bw_inter) == (4, 24.0)
    assert _ring_simple_busbw(inputs) == pytest.approx(86.0, rel=0.15)


def test_one_gpu_per_node_reaches_its_nics_through_its_own_pcie_link():
    """A channel reaches a NIC through its GPU's PCIe link: one H100 per node of eight 400G NICs carries 48 GB/s
    (NCCL's Gen5 x16), not 8 x 48 (the reporter of nccl-tests#232: about 50 GB/s with one H100 and four NICs).
    Eight GPUs on 32 NICs of 100G (AWS p5) are bound by the NICs, as before."""
    one = link_params(build_node(load_captures([sample_path()])), gpu="H100", nranks=2, nnodes=2)
    inputs = graph_inputs_from_topology(one)
    assert inputs.ring.n_channels * inputs.ring.bw_inter <= 48.0
    assert _ring_simple_busbw(inputs) == pytest.approx(48.0, rel=0.1)
    assert "1 GPU(s) per node for 8 NICs: each GPU's own PCIe link (48 GB/s)" in inputs.source
    p5 = link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=100, nics_per_node=32)
    ring = graph_inputs_from_topology(p5).ring
    assert (ring.n_channels, ring.bw_inter) == (30, 12.0)  # bound by the NVLink total (370.8 / 12), not the GPUs


def test_graph_inputs_need_a_gpu():
    with pytest.raises(ConfigError, match="--gpu NAME"):
        graph_inputs_from_topology(LinkParams(nranks=4, nnodes=1, alpha_us=1.0, bw_gbps=10.0))
    pcie = graph_inputs_from_topology(LinkParams(nranks=4, nnodes=1, alpha_us=1.0, bw_gbps=24.0), "L40S")
    assert pcie.ring.type_intra == "PXB" and pcie.nvls is None
