"""A configuration's NCCL_IB_HCA leaves NCCL fewer NICs across nodes (the rails sweep runs one rail at a time):
the model of that configuration counts only those, read from the node's NIC names or an exact list; analyze read a
single-rail point as 'low' against all eight NICs before."""

from __future__ import annotations

from pathlib import Path

import pytest

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_types import LinkParams, NetSettings
from collscope.analysis.params import link_params
from collscope.errors import ConfigError
from collscope.topo.load import load_topology
from collscope.topo.model import NodeTopology
from collscope.topo.samples import sample_path
from collscope.vocab.knob_values import ib_hca_exact_names, ib_hca_listed_names, ib_hca_permits
from tests.analysis.recommend_frames import write_all_reduce_points


@pytest.fixture(scope="module")
def hgx() -> NodeTopology:
    """The bundled HGX H100 capture: compute NICs mlx5_0..mlx5_7 at 400G, mlx5_10/mlx5_11 slower front-end ones."""
    return load_topology([sample_path()], gpu="H100")  # type: ignore[return-value]


def test_ib_hca_matching_follows_nccls_list_rules() -> None:
    assert ib_hca_permits("mlx5_1", "mlx5_10") and not ib_hca_permits("=mlx5_1", "mlx5_10")
    assert not ib_hca_permits("^mlx5_0,mlx5_1", "mlx5_1") and ib_hca_permits("^mlx5_0,mlx5_1", "mlx5_2")
    assert ib_hca_permits("=mlx5_0:1", "mlx5_0:1") and not ib_hca_permits("=mlx5_0:1", "mlx5_0:2")
    assert ib_hca_exact_names("=mlx5_0:1,mlx5_0:2,mlx5_3") == ("mlx5_0", "mlx5_3")
    assert ib_hca_exact_names("mlx5_0") is None and ib_hca_exact_names("^=mlx5_0") is None
    assert ib_hca_listed_names("mlx5_0,mlx5_1:1,bnxt_re3") == ("mlx5_0", "mlx5_1", "bnxt_re3")
    assert all(ib_hca_listed_names(spec) is None for spec in ("mlx5", "mlx5_0,mlx5", "^mlx5_0", "=mlx5_0"))


@pytest.mark.parametrize(("spec", "nics"), [
    (None, 8), ("=mlx5_0", 1), ("mlx5_1", 1), ("^mlx5_0,mlx5_1", 6), ("=mlx5_0:1,mlx5_3", 2),
])
def test_the_nics_a_setting_leaves_are_counted_from_the_captures(hgx: NodeTopology, spec: str | None,
                                                                  nics: int) -> None:
    params = link_params(hgx, gpu="H100", nranks=16, nnodes=2, net=NetSettings(ib_hca=spec))
    assert params.nics_per_node == nics and params.inter_bw_gbps == pytest.approx(50.0 * nics)
    if spec is not None:
        assert f"NCCL_IB_HCA={spec} leaves {nics} of them" in params.source


def test_a_setting_without_names_to_match_or_that_leaves_none_is_refused(hgx: NodeTopology) -> None:
    with pytest.raises(ConfigError, match=r"NCCL_IB_HCA==ib9 leaves none of the node's compute NICs \(mlx5_0, "):
        link_params(hgx, gpu="H100", nranks=16, nnodes=2, net=NetSettings(ib_hca="=ib9"))
    given = link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=400,
                        net=NetSettings(ib_hca="=mlx5_0,mlx5_1"))
    assert given.nics_per_node == 2
    # a prefix list that spells out whole device names counts them (NVIDIA/nccl-tests#232's
    # NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_4,mlx5_5), never above the NICs the node is given
    listed = link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=400,
                         net=NetSettings(ib_hca="mlx5_0,mlx5_1,mlx5_4,mlx5_5"))
    assert listed.nics_per_node == 4 and "spells out 4 device name(s): 4 NIC(s) per node" in listed.source
    one_gpu = link_params(None, gpu="H100", nranks=2, nnodes=2, nic_gbit=400,
                          net=NetSettings(ib_hca="mlx5_0,mlx5_1,mlx5_4,mlx5_5"))
    assert one_gpu.nics_per_node == 1  # the list narrows; how many NICs one GPU reaches is the topology's
    for family in ("mlx5", "^mlx5_0"):
        with pytest.raises(ConfigError, match="by a family prefix or an exclusion: how many it leaves needs the "
                                              "node's NIC names"):
            link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=400, net=NetSettings(ib_hca=family))
    # one node: no NIC carries the collective, the setting changes nothing
    assert link_params(hgx, gpu="H100", nranks=8, nnodes=1, net=NetSettings(ib_hca="=ib9")) == link_params(
        hgx, gpu="H100", nranks=8, nnodes=1)


def _rails_sweep(root: Path) -> Path:
    return write_all_reduce_points(root, {"default-r0": ({}, 460.0), "rail0-r0": ({"NCCL_IB_HCA": "=mlx5_0"}, 80.0)},
                                   nranks=16, nnodes=2, sizes=(1 << 30, 4 << 30), sweep_id="rails")


def test_analyze_models_a_single_rail_point_with_its_one_nic(hgx: NodeTopology, tmp_path: Path) -> None:
    frame = load_results([_rails_sweep(tmp_path / "r")])

    def source(nranks: int, nnodes: int, *, net: NetSettings | None = None) -> LinkParams:
        return link_params(hgx, gpu="H100", nranks=nranks, nnodes=nnodes, net=net)

    result = analyze(frame, params=source)
    sizes = result.sizes.set_index(["config", "size_bytes"])
    rail = sizes.xs("NCCL_IB_HCA==mlx5_0")
    assert list(rail["bound_busbw_gbps"]) == pytest.approx([50.0 * 30 / 16] * 2)  # one NIC, x 2(n-1)/n
    assert (rail["model_busbw_gbps"] < 100).all() and set(rail["verdict"]) == {"normal"}
    assert set(sizes.xs("default")["verdict"]) == {"normal"}
    assert ("16 ranks on 2 node(s) with NCCL_IB_HCA==mlx5_0: the model counts the 1 NIC(s) per node the setting "
            "leaves NCCL (1 x 50 GB/s)") in result.notes
    # one LinkParams for every configuration counts all eight NICs: that configuration gets no efficiency
    fixed = analyze(frame, params=source(16, 2))
    assert fixed.sizes.set_index("config").loc["NCCL_IB_HCA==mlx5_0", "verdict"].isna().all()
    assert any(n.startswith("no efficiency for 16 ranks on 2 node(s) with NCCL_IB_HCA==mlx5_0: the link parameters "
                            "count every NIC") for n in fixed.notes)
