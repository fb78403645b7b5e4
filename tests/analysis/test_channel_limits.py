"""A configuration that bounds NCCL's channels (NCCL_MIN_CTAS/NCCL_MAX_CTAS, NCCL_MIN/MAX_NCHANNELS) runs on
another channel count than the model assumes: its channels follow NCCL's rules, and analyze does not judge those
sizes against the model (it said "low" for a sweep's deliberate 4- and 8-channel points)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_types import LinkParams
from collscope.analysis.nccl_model.channel_limits import bound_channels, channel_bound_note
from collscope.analysis.nccl_model.measured import runtime_channels
from collscope.analysis.nccl_model.model import NcclGraphInputs
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.params import link_params
from tests.analysis.recommend_frames import write_all_reduce_points


def _h100(nranks: int, nnodes: int) -> LinkParams:
    if nnodes == 1:
        return link_params(None, gpu="H100", nranks=nranks, nnodes=1)
    return link_params(None, gpu="H100", nranks=nranks, nnodes=nnodes, nic_gbit=400, nics_per_node=8)


@pytest.fixture(scope="module")
def one_node() -> NcclGraphInputs:
    return graph_inputs_from_topology(_h100(8, 1))


@pytest.fixture(scope="module")
def two_nodes() -> NcclGraphInputs:
    return graph_inputs_from_topology(_h100(16, 2))


def test_the_bounds_clamp_each_algorithms_channels_as_nccl_does(one_node: NcclGraphInputs,
                                                                 two_nodes: NcclGraphInputs) -> None:
    ring, nvls = runtime_channels(one_node, "Ring"), runtime_channels(one_node, "NVLS")
    assert nvls == 16 and ring > 8  # NVLS_NCHANNELS_SM90; the ring's search channels doubled
    four = {"NCCL_MIN_CTAS": "4", "NCCL_MAX_CTAS": "4"}
    for algo, model in (("Ring", ring), ("Tree", ring), ("NVLS", nvls), ("NVLSTree", nvls)):
        bound = bound_channels(one_node, algo, four)
        assert bound is not None and (bound.channels, bound.model_channels) == (4, model)
        assert bound.settings == ("NCCL_MIN_CTAS=4", "NCCL_MAX_CTAS=4")
    # NCCL_MAX_NCHANNELS bounds the collective channels, not NVLS's own (src/transport/nvls.cc clamps to the CTAs)
    assert bound_channels(one_node, "Ring", {"NCCL_MAX_NCHANNELS": "8"}).channels == 8  # type: ignore[union-attr]
    assert bound_channels(one_node, "NVLS", {"NCCL_MAX_NCHANNELS": "8"}) is None
    # ... but a multi-node NVLS call runs on at most the collective channels (src/enqueue.cc)
    across = bound_channels(two_nodes, "NVLS", {"NCCL_MAX_NCHANNELS": "8"})
    assert across is not None and across.channels == 8
    # more than NCCL's own count, a minimum above the maximum (NCCL sets both to the maximum), a bound that leaves
    # the count as it is, and values NCCL ignores
    assert bound_channels(one_node, "NVLS", {"NCCL_MIN_CTAS": "24"}).channels == 24  # type: ignore[union-attr]
    assert bound_channels(one_node, "Ring", {"NCCL_MIN_CTAS": "32", "NCCL_MAX_CTAS": "2"}).channels == 2  # type: ignore[union-attr]
    assert bound_channels(one_node, "NVLS", {"NCCL_MAX_CTAS": "64"}) is None
    assert bound_channels(one_node, "Ring", {"NCCL_MAX_CTAS": "0"}) is None
    assert bound_channels(one_node, "Ring", {"NCCL_MAX_CTAS": "four"}) is None
    assert bound_channels(one_node, "Ring", {"NCCL_ALGO": "Ring"}) is None


def _sweep(root: Path, points: dict[str, tuple[dict[str, str], float]]) -> Path:
    """One point per configuration, 8 H100 of one node, all_reduce at 64 MiB-4 GiB with the given busbw."""
    return write_all_reduce_points(root, points, nranks=8, nnodes=1, sizes=(64 << 20, 1 << 30, 4 << 30),
                                   sweep_id="ctas")


def test_analyze_does_not_judge_sizes_run_on_bounded_channels(tmp_path: Path) -> None:
    root = _sweep(tmp_path / "r", {
        "default-r0": ({}, 470.0),
        "ctas4-r0": ({"NCCL_MIN_CTAS": "4", "NCCL_MAX_CTAS": "4"}, 120.0),
        "ctas64-r0": ({"NCCL_MAX_CTAS": "64"}, 470.0),
    })
    result = analyze(load_results([root]), params=_h100)
    sizes = result.sizes.set_index(["config", "size_bytes"])
    default = sizes.xs("default")
    assert default.loc[1 << 30, "verdict"] == "normal"
    bounded = sizes.xs("NCCL_MAX_CTAS=4;NCCL_MIN_CTAS=4")
    # the model is still shown (NCCL's choice at its own count); the verdict is not given
    assert (bounded["model"] == "NVLS/Simple").all()
    assert bounded["verdict"].isna().all()
    assert (bounded["efficiency"] < 0.35).all()  # 120 GB/s against 346-472
    # a maximum above NCCL's own count bounds nothing: judged as the default
    assert sizes.xs("NCCL_MAX_CTAS=64").loc[1 << 30, "verdict"] == "normal"
    notes = [n for n in result.notes if "not judged" in n]
    assert len(notes) == 1
    assert notes[0].startswith("all_reduce NCCL_MAX_CTAS=4;NCCL_MIN_CTAS=4: NCCL_MIN_CTAS=4, NCCL_MAX_CTAS=4 run "
                               "NVLS on 4 channels where the model assumes NCCL's own 16: not judged at 64M-4G")
    assert "collscope recommend" in notes[0]


def test_a_bound_on_grouped_point_to_point_leaves_it_unjudged(one_node: NcclGraphInputs) -> None:
    bound = bound_channels(one_node, "P2P", {"NCCL_MAX_CTAS": "2"})
    assert bound is not None and bound.channels is None and bound.settings == ("NCCL_MAX_CTAS=2",)
    assert "which the model counts by NCCL's own rule: not judged at 1M" in channel_bound_note(
        "NCCL_MAX_CTAS=2", "alltoall", bound, [1 << 20])
    assert bound_channels(one_node, "P2P", {}) is None
