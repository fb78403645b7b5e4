"""Alpha-beta models: hand-computed values, identities, bounds, the Open MPI mapping, link parameters."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.analysis.model_types import LinkParams
from collscope.analysis.models import (
    ALPHA_BETA_MODELS,
    alpha_beta_predictions,
    alpha_beta_time_us,
    lower_bound_us,
    ring_bound_busbw_gbps,
)
from collscope.analysis.ompi_models import model_for_setting
from collscope.analysis.params import link_params
from collscope.errors import ConfigError
from collscope.topo.detect import load_captures
from collscope.topo.node import build_node
from collscope.topo.samples import sample_path

# 8 ranks, alpha 2 us, 10 GB/s, gamma 5 GB/s; n = 1e6 bytes:
#   n beta = 1e6 / (10 * 1e3) = 100 us;  n gamma = 1e6 / (5 * 1e3) = 200 us.
P8 = LinkParams(nranks=8, nnodes=1, alpha_us=2.0, bw_gbps=10.0, gamma_gbps=5.0)
N = 1e6

HAND = {
    # 2(p-1) a + 2(p-1)/p n b + (p-1)/p n g = 28 + 175 + 175
    ("all_reduce", "ring"): 378.0,
    # lg p (a + n b + n g) = 3 * (2 + 100 + 200)
    ("all_reduce", "recursive_doubling"): 906.0,
    # 2 lg p a + 2(p-1)/p n b + (p-1)/p n g = 12 + 175 + 175
    ("all_reduce", "rabenseifner"): 362.0,
    # 2 lg p (a + n b) + lg p n g = 6 * 102 + 3 * 200
    ("all_reduce", "binomial"): 1212.0,
    # 2(p-1)(a + n b) + (p-1) n g = 14 * 102 + 7 * 200
    ("all_reduce", "linear"): 2828.0,
    # one node: 2 (ppn-1) a + 2 n b + n g = 28 + 200 + 200
    ("all_reduce", "double_binary_tree"): 428.0,
    # (p-1) a + (p-1)/p n b = 14 + 87.5
    ("all_gather", "ring"): 101.5,
    # lg p a + (p-1)/p n b = 6 + 87.5
    ("all_gather", "recursive_doubling"): 93.5,
    ("all_gather", "bruck"): 93.5,
    # (p-1) a + (p-1)/p n (b + g) = 14 + 0.875 * 300
    ("reduce_scatter", "ring"): 276.5,
    # lg p a + (p-1)/p n (b + g) = 6 + 262.5
    ("reduce_scatter", "recursive_halving"): 268.5,
    # lg p (a + n b) = 3 * 102
    ("broadcast", "binomial"): 306.0,
    # (lg p + p - 1) a + 2(p-1)/p n b = 20 + 175
    ("broadcast", "scatter_allgather"): 195.0,
    # lg p (a + n b + n g) = 3 * 302
    ("reduce", "binomial"): 906.0,
    # 2 lg p a + 2(p-1)/p n b + (p-1)/p n g = 12 + 175 + 175
    ("reduce", "rabenseifner"): 362.0,
    # NCCL's pipelined Ring (issue 24 item 5): (p-1) a + n b = 14 + 100; reduce adds n g = 200
    ("broadcast", "ring"): 114.0,
    ("reduce", "ring"): 314.0,
    # one node, grouped point-to-point: (p-1) a + (p-1)/p n b = 14 + 87.5 (tests/analysis/test_op_models.py has
    # the multi-node forms)
    ("alltoall", "pairwise"): 101.5,
    ("gather", "linear"): 101.5,
    ("scatter", "linear"): 101.5,
    # binomial: lg p a + (p-1)/p n b = 6 + 87.5
    ("gather", "binomial"): 93.5,
    ("scatter", "binomial"): 93.5,
    # a + n b = 2 + 100
    ("sendrecv", "shift"): 102.0,
}


def test_every_model_has_a_hand_value():
    assert set(HAND) == {(op, a) for op, models in ALPHA_BETA_MODELS.items() for a in models}


@pytest.mark.parametrize(("op", "algo"), sorted(HAND))
def test_hand_computed(op, algo):
    assert alpha_beta_time_us(op, algo, P8, N) == pytest.approx(HAND[(op, algo)])


def test_rabenseifner_not_a_power_of_two():
    # p = 6: r = 2 extra ranks fold in (a + n b + n g = 302) and get the result back (a + n b = 102); the core
    # runs on p' = 4: RS halving (2 + 50 + 100) + (2 + 25 + 50) = 229, AG doubling (2 + 25) + (2 + 50) = 79.
    # alpha terms 2 floor(lg p) + 2 = 6 as in MPICH's comment; the core's volume uses p' (MPICH writes p).
    p6 = LinkParams(nranks=6, nnodes=1, alpha_us=2.0, bw_gbps=10.0, gamma_gbps=5.0)
    assert alpha_beta_time_us("all_reduce", "rabenseifner", p6, N) == pytest.approx(302 + 102 + 229 + 79)
    # recursive doubling, p = 6: fold (302), 2 core steps of 302, unfold (102)
    assert alpha_beta_time_us("all_reduce", "recursive_doubling", p6, N) == pytest.approx(302 + 2 * 302 + 102)
    # Bruck, p = 6: steps send 1, 2, 2 blocks of n/6: 3 a + 5/6 n b = 6 + 83.33
    assert alpha_beta_time_us("all_gather", "bruck", p6, N) == pytest.approx(6 + 500 / 6)


def test_gamma_none_ignores_reductions():
    p = LinkParams(nranks=8, nnodes=1, alpha_us=2.0, bw_gbps=10.0)
    assert alpha_beta_time_us("all_reduce", "ring", p, N) == pytest.approx(28 + 175)


def test_hierarchical_steps_and_ring_bound():
    # 2 nodes x 8: intra 300 GB/s, NICs 4 x 25 = 100 GB/s per node; alpha 2, between nodes 10.
    p = LinkParams(nranks=16, nnodes=2, alpha_us=2.0, alpha_inter_us=10.0, bw_gbps=100.0, intra_bw_gbps=300.0,
                   inter_bw_gbps=100.0, nics_per_node=4, nic_gbps=25.0)
    assert ring_bound_busbw_gbps(p) == 100.0  # min(300, 4 x 25)
    # recursive doubling: distances 1, 2, 4 inside the node (2 + 1e6/300e3 us each), 8 across
    # (10 + 1e6 / (min(300, 100/8) * 1e3) = 10 + 80)
    intra_step = 2 + 1e6 / 300e3
    assert alpha_beta_time_us("all_reduce", "recursive_doubling", p, N) == pytest.approx(3 * intra_step + 90)
    # ring: 2(p-1) = 30 steps at the slower alpha, 2 (15/16) n / 100 GB/s
    assert alpha_beta_time_us("all_reduce", "ring", p, N) == pytest.approx(30 * 10 + 2 * 15 / 16 * 10)
    big = alpha_beta_predictions("all_reduce", p, [10**12], ["ring"])[0]
    assert big.busbw_gbps == pytest.approx(100.0, rel=1e-3)


def test_busbw_uses_nccl_tests_factor():
    pred = alpha_beta_predictions("all_gather", P8, [10**6], ["ring"])[0]
    # algbw = 1e6 B / 101.5 us = 9.852 GB/s; x 7/8
    assert pred.busbw_gbps == pytest.approx(1e6 / 101.5e-6 / 1e9 * 7 / 8)
    assert pred.model == "alpha-beta" and pred.proto is None
    assert alpha_beta_predictions("all_reduce", P8, [0], ["ring"])[0].busbw_gbps == 0.0


def test_bad_inputs():
    with pytest.raises(ConfigError, match="valid: all_reduce"):
        alpha_beta_time_us("alltoall_v", "ring", P8, 1)
    with pytest.raises(ConfigError, match="valid: ring"):
        alpha_beta_time_us("all_gather", "pairwise", P8, 1)
    with pytest.raises(ConfigError, match="at least 2 ranks"):
        LinkParams(nranks=1, nnodes=1, alpha_us=1.0, bw_gbps=1.0)
    with pytest.raises(ConfigError, match="multiple of nnodes"):
        LinkParams(nranks=9, nnodes=2, alpha_us=1.0, bw_gbps=1.0)
    with pytest.raises(ConfigError, match="positive"):
        LinkParams(nranks=4, nnodes=1, alpha_us=1.0, bw_gbps=0.0)


# ---- identities (hypothesis) ---------------------------------------------------------------------------------
@st.composite
def link_params_st(draw: st.DrawFn) -> LinkParams:
    nnodes = draw(st.integers(1, 8))
    ppn = draw(st.integers(1, 16))
    if nnodes * ppn < 2:
        ppn = 2
    intra = draw(st.floats(0.5, 1000))
    inter = draw(st.none() | st.floats(0.5, 2000))
    ring = intra if nnodes == 1 or inter is None else min(intra, inter)
    return LinkParams(nranks=nnodes * ppn, nnodes=nnodes, alpha_us=draw(st.floats(0, 50)),
                      alpha_inter_us=draw(st.none() | st.floats(0, 50)), bw_gbps=ring, intra_bw_gbps=intra,
                      inter_bw_gbps=inter, gamma_gbps=draw(st.none() | st.floats(0.5, 500)))


sizes = st.integers(0, 10**11)


@given(st.integers(2, 512), st.floats(0.0, 100), st.floats(0.1, 1000), sizes)
def test_ring_bandwidth_terms_are_the_lower_bounds(p, alpha, bw, n):
    params = LinkParams(nranks=p, nnodes=1, alpha_us=alpha, bw_gbps=bw)
    beta_n = n / (bw * 1e3)  # n beta in us
    ar = alpha_beta_time_us("all_reduce", "ring", params, n) - alpha_beta_time_us("all_reduce", "ring", params, 0)
    ag = alpha_beta_time_us("all_gather", "ring", params, n) - alpha_beta_time_us("all_gather", "ring", params, 0)
    assert ar == pytest.approx(2 * (p - 1) / p * beta_n, rel=1e-9, abs=1e-9)
    assert ag == pytest.approx((p - 1) / p * beta_n, rel=1e-9, abs=1e-9)


@settings(max_examples=200)
@given(link_params_st(), sizes)
def test_every_model_is_at_least_the_lower_bound(params, n):
    for op, models in ALPHA_BETA_MODELS.items():
        bound = lower_bound_us(op, params, n)
        for algo in models:
            t = alpha_beta_time_us(op, algo, params, n)
            assert t >= bound * (1 - 1e-9) - 1e-9, (op, algo, params, n)


@settings(max_examples=200)
@given(link_params_st(), sizes, sizes)
def test_time_is_monotone_in_size(params, a, b):
    lo, hi = sorted((a, b))
    for op, models in ALPHA_BETA_MODELS.items():
        for algo in models:
            assert alpha_beta_time_us(op, algo, params, lo) <= alpha_beta_time_us(op, algo, params, hi) * (
                1 + 1e-12), (op, algo)


# ---- Open MPI ids --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("op", "key", "value", "model"), [
    ("all_reduce", "OMPI_MCA_coll_tuned_allreduce_algorithm", "1", "linear"),
    ("all_reduce", "OMPI_MCA_coll_tuned_allreduce_algorithm", "2", "binomial"),
    ("all_reduce", "OMPI_MCA_coll_tuned_allreduce_algorithm", "3", "recursive_doubling"),
    ("all_reduce", "OMPI_MCA_coll_tuned_allreduce_algorithm", "4", "ring"),
    ("all_reduce", "OMPI_MCA_coll_tuned_allreduce_algorithm", "5", "ring"),
    ("all_reduce", "OMPI_MCA_coll_tuned_allreduce_algorithm", "6", "rabenseifner"),
    ("all_reduce", "OMPI_MCA_coll_tuned_allreduce_algorithm", "segmented_ring", "ring"),
    ("all_reduce", "OMPI_MCA_coll_tuned_allreduce_algorithm", "0", None),
    ("all_gather", "OMPI_MCA_coll_tuned_allgather_algorithm", "2", "bruck"),
    ("all_gather", "OMPI_MCA_coll_tuned_allgather_algorithm", "3", "recursive_doubling"),
    ("all_gather", "OMPI_MCA_coll_tuned_allgather_algorithm", "4", "ring"),
    ("all_gather", "OMPI_MCA_coll_tuned_allgather_algorithm", "5", "ring"),
    ("all_gather", "OMPI_MCA_coll_tuned_allgather_algorithm", "1", None),
    ("reduce_scatter", "OMPI_MCA_coll_tuned_reduce_scatter_algorithm", "2", "recursive_halving"),
    ("broadcast", "OMPI_MCA_coll_tuned_bcast_algorithm", "6", "binomial"),
    ("all_gather", "OMPI_MCA_coll_tuned_allgather_algorithm", "99", None),
])
def test_model_for_setting(op, key, value, model):
    assert model_for_setting(op, {key: value}) == model
    if model is not None:
        assert model in ALPHA_BETA_MODELS[op]


def test_model_for_setting_without_a_setting():
    assert model_for_setting("all_reduce", {}) is None
    assert model_for_setting("alltoall", {"OMPI_MCA_coll_tuned_alltoall_algorithm": "2"}) is None
    assert model_for_setting("all_reduce", {"NCCL_ALGO": "Ring"}) is None


# ---- link parameters -----------------------------------------------------------------------------------------
def test_link_params_from_the_h100_sample():
    node = build_node(load_captures([sample_path()]))
    p = link_params(node, nranks=16, nnodes=2)
    # 18 links x 25 GB/s: nvidia-smi nvlink -s prints 26.562, the signalling rate, converted to the data rate;
    # 8 active 400 Gb/s NICs (the 100 Gb/s ones ignored)
    assert p.intra_bw_gbps == pytest.approx(18 * 25.0)
    assert (p.nics_per_node, p.nic_gbps, p.inter_bw_gbps) == (8, 50.0, 400.0)
    assert p.bw_gbps == 400.0  # min(450, 8 x 50)
    assert (p.alpha_us, p.alpha_inter_us) == (3.4, 14.0)
    assert (p.gpu, p.sm, p.intra_link, p.nvswitch, p.nvlinks_per_gpu) == ("H100", 90, "nvlink", True, 18)
    assert "NVLink per GPU from the topology" in p.source and "nvidia-smi nvlink" in p.source


def test_link_params_from_a_gpu_name_and_explicit_values():
    p = link_params(None, gpu="A100", nranks=8, nnodes=1)
    assert p.bw_gbps == 12 * 25.0 and "table rate" in p.source
    q = link_params(None, nranks=4, nnodes=1, alpha_us=1.5, bw_gbps=12.0)
    assert (q.alpha_us, q.bw_gbps, q.gpu) == (1.5, 12.0, None)
    assert "given" in q.source


@pytest.mark.parametrize(("gpu", "nvswitch", "nvls"), [
    ("H800", True, True),  # 8 NVLinks to the HGX board's NVSwitches (not 12 or more): NVLS, as NCCL runs it there
    ("A800", True, False),  # an NVSwitch board of sm80: no NVLS
    ("H100 NVL", False, False),  # 12 NVLinks through a bridge to one peer: no switch, no multicast
    ("A100 PCIe", False, False),
    ("H200 NVL", False, False),
    ("H100", True, True),
])
def test_the_gpu_tables_fabric_says_whether_a_switch_joins_the_gpus(gpu: str, nvswitch: bool, nvls: bool):
    """Without a topology the NVSwitch comes from the table's fabric (topo.gpus: nvswitch, bridge, mesh), not from
    the link count: an H100 NVL pair's bridge was read as a switch and offered NVLS, an H800 board's switch as none."""
    from collscope.analysis.nccl_model.search import graph_inputs_from_topology

    p = link_params(None, gpu=gpu, nranks=2, nnodes=1)
    assert p.nvswitch is nvswitch
    assert (graph_inputs_from_topology(p).nvls is not None) is nvls


def test_link_params_errors_say_what_to_pass():
    with pytest.raises(ConfigError, match="--topo PATH.*--gpu NAME.*--alpha-us"):
        link_params(None, nranks=8, nnodes=1)
    with pytest.raises(ConfigError, match="unknown GPU 'Z9000'"):
        link_params(None, gpu="Z9000", nranks=8, nnodes=1)
    with pytest.raises(ConfigError, match="NIC rates"):
        link_params(None, gpu="H100", nranks=16, nnodes=2)
    node = build_node(load_captures([sample_path()]))
    with pytest.raises(ConfigError, match="8 GPU"):
        link_params(node, nranks=16, nnodes=1)
    assert math.isclose(link_params(node, nranks=16, nnodes=2, bw_gbps=20.0).bw_gbps, 20.0)


_NIC_ON_X16 = 'link_speed="32.0 GT/s PCIe" link_width="16">\n        <nic>'


@pytest.mark.parametrize(("link", "port_mbps", "nic_gbps", "held"), [
    ('link_speed="32.0 GT/s PCIe" link_width="16">', "400000", 50.0, False),  # Gen5 x16 (64 GB/s) carries 400G
    ('link_speed="32.0 GT/s PCIe" link_width="4">', "200000", 12.0, True),  # a GB10 RoCE endpoint: Gen5 x4
    ('link_speed="16.0 GT/s PCIe" link_width="16">', "400000", 24.0, True),  # 400G in a Gen4 x16 slot
    ('link_speed="16.0 GT/s PCIe" link_width="16">', "200000", 25.0, False),  # Gen4 x16 (32 GB/s) carries 200G
    ('link_speed="8.0 GT/s PCIe" link_width="16">', "200000", 12.0, True),  # HDR in a Gen3 x16 slot
])
def test_a_nic_whose_pcie_link_carries_less_than_its_port_is_taken_at_the_links_rate(tmp_path, link, port_mbps,
                                                                                       nic_gbps, held):
    """NCCL's path to a NIC crosses the NIC's PCIe link, at width * speed / 80 (src/graph/topo.cc): where that link
    cannot carry the port (its signalling rate, 4/3 of NCCL's figure, is below the port rate), NCCL's bandwidth
    is the link's, and collscope's too."""
    from collscope.topo.load import load_topology

    xml = (Path(__file__).resolve().parents[1] / "fixtures" / "nccl-xml"
           / "h200-1gpu-4nvswitch-400g-nic-topo-dump-excerpt.xml").read_text()
    assert xml.count(_NIC_ON_X16) == 1 and xml.count('speed="400000"') == 1
    path = tmp_path / "topo.xml"
    path.write_text(xml.replace(_NIC_ON_X16, link + "\n        <nic>").replace('speed="400000"',
                                                                            f'speed="{port_mbps}"'))
    params = link_params(load_topology([str(path)]), nranks=2, nnodes=2)
    assert params.inter_bw_gbps == pytest.approx(nic_gbps)
    assert ("PCIe links that carry less" in params.source) == held
