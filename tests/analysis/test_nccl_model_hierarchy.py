"""NCCL's model across NVLink domains (issue 24 item 1): an NVLink domain larger than a node (MNNVL, GB200/GB300
NVL72) is one NCCL node, domains are joined by all their trays' NICs, NVLS heads follow NCCL_MAX_NVLS_ARITY and
the NICs, Grace systems take NCCL's non-x86 rules, PAT needs one GPU per NCCL node."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from collscope.analysis.model_types import LinkParams
from collscope.analysis.nccl_model.choice import nccl_choice
from collscope.analysis.nccl_model.constants import model_version_for
from collscope.analysis.nccl_model.model import (
    nccl_bandwidth,
    nccl_latency_us,
    nccl_predictions,
    nccl_time_us,
)
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.params import link_params
from collscope.analysis.predict import predict
from collscope.collectives.nccl_tests import parse_nccl_tests
from collscope.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
NVL72_72R = FIXTURES / "all_reduce_perf-v2.19.6-gb200-nvl72-72r-last-rank-line-only.txt"
GIB8 = 8 << 30


def _published_busbw(path: Path, size: int) -> float:
    """The mean of the out-of-place and in-place busbw of one size of an nccl-tests output."""
    run = parse_nccl_tests(path.read_text())
    return statistics.mean(r.busbw_gbps for r in run.records if r.size_bytes == size)


def test_one_nvl72_rack_is_one_nccl_node_near_its_published_busbw() -> None:
    published = _published_busbw(NVL72_72R, GIB8)  # (886.08 + 836.58) / 2
    result = predict("all_reduce", gpu="GB200", nranks=72, nnodes=18, nvl_domain=72, sizes=[GIB8])
    choice = result.nccl_choice[0]
    assert choice.algo == "NVLS"  # one NCCL node: NVLS, no NVLSTree, no NIC
    assert abs(choice.busbw_gbps / published - 1) < 0.15


def test_two_nvl72_racks_take_the_trays_nics_from_the_table() -> None:
    """Before: '36 nodes need the NIC rates' (no model for a 2-rack run without captures)."""
    params = link_params(None, gpu="GB200", nranks=144, nnodes=36, nvl_domain=72)
    assert (params.nics_per_node, params.nic_gbps) == (4, 50.0)
    assert "ConnectX-7" in params.source
    inputs = graph_inputs_from_topology(params)
    assert inputs.nnodes == 2 and inputs.ppn == 72  # NCCL's nNodes counts NVLink domains
    assert "x 72 NIC(s)" in inputs.source  # every tray's NICs join the domain (before: x 4)
    result = predict("all_reduce", gpu="GB200", nranks=144, nnodes=36, nvl_domain=72, sizes=[GIB8])
    algos = {p.algo for p in result.predictions if p.model == "nccl"}
    assert "NVLSTree" in algos and "NVLS" not in algos  # multi-node NVLS needs CollNet (tuning.cc)
    published_one_rack = _published_busbw(NVL72_72R, GIB8)
    assert abs(result.nccl_choice[0].busbw_gbps / published_one_rack - 1) < 0.15


def test_nvls_heads_follow_nccl_max_nvls_arity_and_the_nics() -> None:
    rack = link_params(None, gpu="GB200", nranks=72, nnodes=18, nvl_domain=72)
    assert graph_inputs_from_topology(rack).nvls.n_channels == 32  # NCCL_MAX_NVLS_ARITY 32 (2.30)
    assert graph_inputs_from_topology(rack, version="2.19").nvls.n_channels == 8  # 8 in 2.19.4
    # one NIC per 4-GPU tray: a 72-GPU domain has 18 NIC:GPU heads at most
    few_nics = LinkParams(nranks=144, nnodes=36, nvl_domain=72, alpha_us=3.4, alpha_inter_us=14.0, bw_gbps=450.0,
                          intra_bw_gbps=900.0, inter_bw_gbps=50.0, nics_per_node=1, nic_gbps=50.0, gpu="GB200",
                          sm=100, intra_link="nvlink", nvlinks_per_gpu=18, nvswitch=True, pcie_gen=6)
    inputs = graph_inputs_from_topology(few_nics)
    assert inputs.nvls.n_channels == 18 and "x 18 NIC(s)" in inputs.source


def test_grace_systems_take_nccls_non_x86_rules() -> None:
    """getNetOverhead is 1 us off x86 and the NVLSTree tree correction is x86-only (tuning.cc)."""
    params = link_params(None, gpu="GB200", nranks=144, nnodes=36, nvl_domain=72)
    inputs = graph_inputs_from_topology(params)
    assert inputs.cpu_vendor == "other"
    size = 16 << 20  # logSize 18: Simple correction 0.7 on x86
    bw = nccl_bandwidth(inputs, "all_reduce", "NVLSTree", "Simple")
    lat = nccl_latency_us(inputs, "all_reduce", "NVLSTree", "Simple")
    assert nccl_time_us(inputs, "all_reduce", "NVLSTree", "Simple", size) == pytest.approx(lat + size / (1000 * bw))
    h100 = graph_inputs_from_topology(link_params(None, gpu="H100", nranks=8, nnodes=1))
    assert h100.cpu_vendor == "intel"


@pytest.mark.parametrize(("nnodes", "nvl_domain", "has_pat"), [
    (16, None, True),   # one GPU per node: PAT (NCCL >= 2.23)
    (8, None, False),   # two per node: no PAT
    (16, 16, False),    # one MNNVL domain: one NCCL node of 16 ranks, no PAT
])
def test_pat_needs_one_gpu_per_nccl_node(nnodes: int, nvl_domain: int | None, has_pat: bool) -> None:
    params = LinkParams(nranks=16, nnodes=nnodes, nvl_domain=nvl_domain, alpha_us=3.4, alpha_inter_us=14.0,
                        bw_gbps=50.0, intra_bw_gbps=900.0, inter_bw_gbps=50.0 * (16 // nnodes),
                        nics_per_node=16 // nnodes, nic_gbps=50.0, gpu="GB200", sm=100, intra_link="nvlink",
                        nvlinks_per_gpu=18, nvswitch=True, pcie_gen=6)
    inputs = graph_inputs_from_topology(params)
    algos = {p.algo for p in nccl_predictions(inputs, "all_gather", [1 << 20])}
    assert ("PAT" in algos) is has_pat
    assert "PAT" not in {p.algo for p in nccl_predictions(inputs, "all_gather", [1 << 20], version="2.19")}
    assert nccl_choice(inputs, "all_gather", 1 << 20).time_us > 0


@pytest.mark.parametrize(("release", "tables"), [
    ("2.18.5", "2.19"), ("2.19.4", "2.19"),
    ("2.20.5", "2.19"),  # 2.20.5 has 2.19.4's constants (Hopper llMaxBws 87.7, Ring LL x 1/4 or 1/3)
    ("2.21.5", "2.30"), ("2.27.3+cuda12.9", "2.30"), ("2.30.7", "2.30"), (None, "2.30"), ("unknown", "2.30"),
])
def test_model_version_for_a_release(release: str | None, tables: str) -> None:
    assert model_version_for(release) == tables


def test_an_nccl_220_log_is_modelled_with_the_219_tables() -> None:
    """The Ring LL bandwidth of one 8 x H100 node: min(llMaxBw, x) with llMaxBw 87.7 up to 2.20, 141 after."""
    inputs = graph_inputs_from_topology(link_params(None, gpu="H100", nranks=8, nnodes=1))
    ll_220 = nccl_bandwidth(inputs, "all_reduce", "Ring", "LL", version=model_version_for("2.20.5"))
    ll_221 = nccl_bandwidth(inputs, "all_reduce", "Ring", "LL", version=model_version_for("2.21.5"))
    assert ll_220 == pytest.approx(87.7 * 8 / 14) and ll_221 == pytest.approx(141.0 * 8 / 14)


def test_a_job_filling_two_racks_unevenly_is_two_nccl_nodes() -> None:
    """128 ranks on two 72-GPU racks (before: 'does not split 128 ranks ... into domains of whole nodes'): NCCL's
    model sees nNodes = 2 of nRanks / nNodes = 64 ranks, and so does collscope's, saying so."""
    params = link_params(None, gpu="GB200", nranks=128, nnodes=32, nvl_domain=72)
    assert (params.domain_ranks, params.ndomains) == (64, 2)
    assert "2 domains of 64 ranks (16 nodes each) assumed" in params.source
    inputs = graph_inputs_from_topology(params)
    assert (inputs.nnodes, inputs.ppn) == (2, 64)
    assert nccl_choice(inputs, "all_reduce", GIB8).algo == "NVLSTree"
    with pytest.raises(ConfigError, match="domains of whole nodes"):
        link_params(None, gpu="GB200", nranks=16, nnodes=4, nvl_domain=6)  # 6 GPUs hold no whole 4-GPU trays


def test_an_nvl72_domain_has_no_nvls_allgather_and_no_collnet() -> None:
    """updateCollCostTable (enqueue.cc, 2.30): NVLS only for AllReduce above 32 local ranks, CollNet not above 8."""
    rack = graph_inputs_from_topology(link_params(None, gpu="GB200", nranks=72, nnodes=18, nvl_domain=72))
    algos = {op: {p.algo for p in nccl_predictions(rack, op, [1 << 30])} for op in ("all_reduce", "all_gather")}
    assert "NVLS" in algos["all_reduce"] and "NVLS" not in algos["all_gather"]
    assert nccl_choice(rack, "all_gather", 1 << 30).algo == "Ring"
    racks = graph_inputs_from_topology(link_params(None, gpu="GB200", nranks=144, nnodes=36, nvl_domain=72),
                                       collnet=True)
    assert not {"CollNetDirect", "CollNetChain"} & {p.algo for p in nccl_predictions(racks, "all_reduce", [1 << 30])}
    hgx = LinkParams(nranks=16, nnodes=2, alpha_us=3.4, alpha_inter_us=14.0, bw_gbps=400.0, intra_bw_gbps=450.0,
                     inter_bw_gbps=400.0, nics_per_node=8, nic_gbps=50.0, gpu="H100", sm=90, intra_link="nvlink",
                     nvlinks_per_gpu=18, nvswitch=True, pcie_gen=5)
    sharp = graph_inputs_from_topology(hgx, collnet=True)  # 8 local ranks: CollNet is in the table
    assert {"CollNetDirect", "CollNetChain"} <= {p.algo for p in nccl_predictions(sharp, "all_reduce", [1 << 30])}


def test_trays_of_an_nvl72_gpu_with_no_nvlink_domain_given_get_a_caveat() -> None:
    """GB200/GB300 trays may share one NVLink domain (NVL72) or not (MNNVL off, NVL4 boards): with no
    --nvl-domain, each node is its own domain, and predict/analyze say so instead of assuming either way."""
    trays = link_params(None, gpu="GB200", nranks=72, nnodes=18, nic_gbit=400)
    (caveat,) = trays.caveats
    assert "GB200 NVL72: up to 72 GPUs" in caveat and "each of the 18 nodes is modelled as its own" in caveat
    assert "--nvl-domain N" in caveat
    assert trays.ndomains == 18  # what the caveat says is what is modelled
    assert link_params(None, gpu="GB200", nranks=72, nnodes=18, nvl_domain=72).caveats == ()
    assert link_params(None, gpu="GB200", nranks=72, nnodes=18, nvl_domain=4, nic_gbit=400).caveats == ()
    assert link_params(None, gpu="GB200", nranks=4, nnodes=1).caveats == ()
    assert link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=400).caveats == ()
    result = predict("all_reduce", gpu="GB300", nranks=8, nnodes=2, nic_gbit=800, sizes=[1 << 30])
    assert any("GB300 NVL72: up to 72 GPUs" in n for n in result.notes)
