"""NCCL_NET_GDR_LEVEL and NCCL_PXN_DISABLE move where NCCL's graphs leave a node, and the models follow them.

- with a capture: the crossing under the setting (src/graph/paths.cc: GPUDirect RDMA by the level, PXN relays only
  with NCCL_PXN_DISABLE not 1), so a level that turns GPUDirect RDMA off takes LL128 away across nodes on Hopper;
- without one: only a level of LOC decides (no GPU has GPUDirect RDMA), any other setting is said to need the paths;
- analyze judges each configuration of a sweep against its own crossing, and predict --setting does the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_settings import MODELLED_SETTINGS, model_settings
from collscope.analysis.model_types import LinkParams, NetSettings
from collscope.analysis.params import link_params
from collscope.analysis.predict import predict
from collscope.errors import ConfigError
from collscope.topo.crossing import node_crossing
from collscope.topo.load import load_topology
from collscope.topo.model import NodeTopology
from collscope.vocab.knobs import validate_env
from tests.analysis.recommend_frames import write_all_reduce_points

EVEN_PIX = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / \
    "topo-tab-8gpu-nv18-4nic-pix-even-gpus-2nic-sys.txt"
"""8 H100 (NV18), mlx5_0..3 at PIX to the even GPUs, mlx5_4/5 at SYS to all (nccl#1357 / nccl-tests#232 shape)."""
MIB = 1 << 20


@pytest.fixture(scope="module")
def node() -> NodeTopology:
    return load_topology([str(EVEN_PIX)], gpu="H100")  # type: ignore[return-value]


def _params(node: NodeTopology | None, net: NetSettings | None = None) -> LinkParams:
    return link_params(node, gpu="H100", nranks=16, nnodes=2, nic_gbit=400, net=net)


def test_the_settings_are_read_and_no_longer_listed_as_unmodelled() -> None:
    read = model_settings({"NCCL_NET_GDR_LEVEL": "PHB", "NCCL_PXN_DISABLE": "1", "NCCL_BUFFSIZE": "1048576"},
                          "all_reduce")
    assert read.net == NetSettings(gdr_level="PHB", pxn_disable=True)
    assert read.unmodelled == ("NCCL_BUFFSIZE=1048576",)
    assert {"NCCL_NET_GDR_LEVEL", "NCCL_PXN_DISABLE"} <= MODELLED_SETTINGS
    # NCCL keeps PXN for any value but 1 (paths.cc: ncclPxnDisable(comm) != 1)
    assert model_settings({"NCCL_PXN_DISABLE": "2"}, "all_reduce").net.pxn_disable is False
    assert model_settings({"NCCL_PXN_DISABLE": "0"}, "all_reduce").net.is_set is False


def test_pxn_disable_sends_each_gpu_through_its_own_path(node: NodeTopology) -> None:
    default = node_crossing(node, gpus_per_node=8)
    off = node_crossing(node, gpus_per_node=8, pxn=False)
    assert default is not None and off is not None
    assert {g.gpu: g.path for g in default.gpus}["GPU1"] == "PXN"
    assert {g.gpu: g.path for g in off.gpus}["GPU1"] == "SYS" and not any(g.relays for g in off.gpus)
    # the graphs still cross at the even GPUs' PIX, and leave through their four NICs only (not mlx5_4/5 at SYS)
    assert off.path == default.path == "PIX"
    assert off.nics == default.nics == ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
    params = _params(node, NetSettings(pxn_disable=True))
    assert params.nic_path == "PIX" and params.nics_per_node == 4
    assert any(c.startswith("NCCL_PXN_DISABLE=1: NCCL's graphs cross nodes at PIX, as without it")
               for c in params.caveats)


def test_gdr_off_moves_the_crossing_to_phb_and_takes_ll128_away(node: NodeTopology) -> None:
    assert _params(node).nic_path == "PIX"
    params = _params(node, NetSettings(gdr_level="LOC"))
    assert params.nic_path == "PHB"
    caveats = " ".join(params.caveats)
    assert "NCCL_NET_GDR_LEVEL=LOC: NCCL's graphs cross nodes at PHB, at PIX without it" in caveats
    assert "GPUDirect RDMA is off for GPU0, GPU2, GPU4, GPU6 at NCCL_NET_GDR_LEVEL=LOC" in caveats
    assert "only up to PXN on H100" in caveats
    # the legacy integer reads the same (paths.cc levelsOldToNew: 0 is LOC)
    assert _params(node, NetSettings(gdr_level="0")).nic_path == "PHB"
    # a level that keeps GDR where the default has it changes nothing in the crossing
    assert _params(node, NetSettings(gdr_level="SYS")).nic_path == "PIX"


def test_without_a_capture_only_loc_decides() -> None:
    loc = _params(None, NetSettings(gdr_level="LOC"))
    assert loc.nic_path == "PHB"
    assert any("GPUDirect RDMA off for every GPU" in c for c in loc.caveats)
    phb = _params(None, NetSettings(gdr_level="PHB"))
    assert phb.nic_path is None
    assert any("depends on the GPU-NIC paths, which the input does not give (pass --topo" in c for c in phb.caveats)
    # one node: nothing crosses, nothing said
    one = link_params(None, gpu="H100", nranks=8, nnodes=1, net=NetSettings(gdr_level="LOC"))
    assert one.nic_path is None and not any("NCCL_NET_GDR_LEVEL" in c for c in one.caveats)


def test_a_level_nccl_does_not_read_is_ignored_as_nccl_ignores_it(node: NodeTopology) -> None:
    """src/graph/paths.cc ncclGetLevel matches the names exactly (or an integer): 'phb' leaves the level unset.
    predict --setting validates the value first (the knob's check refuses a word that names no level)."""
    for topo in (node, None):
        params = _params(topo, NetSettings(gdr_level="phb"))
        assert params.nic_path == _params(topo).nic_path
        assert any(c.startswith("NCCL_NET_GDR_LEVEL=phb is not a level NCCL reads") for c in params.caveats)
    with pytest.raises(ConfigError, match="NCCL_NET_GDR_LEVEL='PCIE' is invalid"):
        predict("all_reduce", gpu="H100", nranks=16, nnodes=2, nic_gbit=400, sizes=[MIB],
                settings=validate_env({"NCCL_NET_GDR_LEVEL": "PCIE"}))


def test_predict_setting_follows_the_crossing(node: NodeTopology) -> None:
    def choice(settings: dict[str, str]) -> str:
        result = predict("all_reduce", topology=node, gpu="H100", nranks=16, nnodes=2, nic_gbit=400,
                         sizes=[MIB], settings=settings)
        return f"{result.nccl_choice[0].algo}/{result.nccl_choice[0].proto}"

    assert choice({}).endswith("/LL128")
    assert not choice({"NCCL_NET_GDR_LEVEL": "LOC"}).endswith("LL128")
    assert choice({"NCCL_PXN_DISABLE": "1"}) == choice({})


def _sweep(root: Path) -> Path:
    return write_all_reduce_points(root, {"default-r0": ({}, 20.0), "nogdr-r0": ({"NCCL_NET_GDR_LEVEL": "LOC"}, 20.0)},
                                   nranks=16, nnodes=2, sizes=(MIB, 4 * MIB), sweep_id="gdr")


def test_analyze_judges_each_configuration_against_its_own_crossing(node: NodeTopology, tmp_path: Path) -> None:
    frame = load_results([_sweep(tmp_path / "r")])

    def source(nranks: int, nnodes: int, *, net: NetSettings | None = None) -> LinkParams:
        return link_params(node, gpu="H100", nranks=nranks, nnodes=nnodes, nic_gbit=400, net=net)

    result = analyze(frame, params=source)
    models = result.sizes.set_index(["config", "size_bytes"])["model"]
    assert models[("default", MIB)].endswith("/LL128")
    assert not models[("NCCL_NET_GDR_LEVEL=LOC", MIB)].endswith("LL128")
    assert "NCCL_NET_GDR_LEVEL=LOC: NCCL's graphs cross nodes at PHB, at PIX without it" in " ".join(result.notes)
    # the notes that only the configuration has name it; those every configuration shares do not repeat
    assert any(n.startswith("16 ranks on 2 node(s) with NCCL_NET_GDR_LEVEL=LOC: GPUDirect RDMA is off")
               for n in result.notes)
    # parameters given whole cannot follow the setting: NCCL's default crossing, said
    fixed = analyze(frame, params=source(16, 2))
    assert fixed.sizes.set_index(["config", "size_bytes"])["model"][("NCCL_NET_GDR_LEVEL=LOC", MIB)].endswith(
        "/LL128")
    assert any("the link parameters were given whole, so the model takes NCCL's default crossing for "
               "NCCL_NET_GDR_LEVEL=LOC" in n for n in fixed.notes)


def test_nccl_log_model_takes_the_runs_gdr_level() -> None:
    from collscope.analysis.log_model import choices_against_model
    from collscope.collectives.nccl_log import parse_nccl_log
    from collscope.topo.samples import sample_path

    log_path = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-debug" / \
        "nccl2.24.3-2node-16rank-pxn-gdr-tuning-blocks.log"
    text = log_path.read_text()
    line = "gpu-node-01:41000:41000 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to bond0\n"
    assert line in text
    topology = load_topology([sample_path()], gpu="H100")
    plain = choices_against_model(parse_nccl_log(text), topology=topology)
    assert not any("NCCL_NET_GDR_LEVEL" in n for n in plain.notes)
    gdr_off = text.replace(line, line + line.replace("NCCL_SOCKET_IFNAME", "NCCL_NET_GDR_LEVEL").replace(
        "bond0", "LOC"), 1)
    result = choices_against_model(parse_nccl_log(gdr_off), topology=topology)
    assert "NCCL_NET_GDR_LEVEL=LOC set in the run: the model's graphs cross nodes at PHB, the topology's paths " \
           "under it" in result.notes
