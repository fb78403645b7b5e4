"""What locate takes from 'topo cluster --json': rail NICs (NCCL_IB_HCA) and leaf switches (bisection)."""

from __future__ import annotations

import pytest

from collscope.errors import ParseError
from collscope.locate.topology import topology_from_cluster_json

NODES = ["n1", "n2", "n3", "n4"]


def test_rails_every_node_has_give_nic_names_in_rail_order():
    doc = {"rails": [
        {"index": 1, "switch": None, "members": [[n, "mlx5_3"] for n in NODES]},
        {"index": 0, "switch": None, "members": [[n, "mlx5_0"] for n in NODES]},
    ]}
    topo = topology_from_cluster_json(doc, NODES)
    assert topo.rail_nics == ("mlx5_0", "mlx5_3") and topo.leaf_of == {}


def test_mixed_nic_names_cannot_be_one_srun_variable():
    doc = {"rails": [{"index": 0, "members": [["n1", "mlx5_0"], ["n2", "mlx5_1"], ["n3", "mlx5_0"],
                                                ["n4", "mlx5_0"]]}]}
    assert topology_from_cluster_json(doc, NODES).rail_nics == ("",)


def test_partial_rails_from_the_fabric_are_leaf_switches():
    doc = {"rails": [{"index": 0, "switch": "leafA", "members": [["n1", "mlx5_0"], ["n3", "mlx5_0"]]},
                     {"index": 1, "switch": "leafB", "members": [["n2", "mlx5_0"], ["n4", "mlx5_0"]]}]}
    topo = topology_from_cluster_json(doc, NODES)
    assert topo.leaf_of == {"n1": "leafA", "n3": "leafA", "n2": "leafB", "n4": "leafB"}
    assert topo.rail_nics == ()


def test_not_a_cluster_document():
    with pytest.raises(ParseError, match="rails"):
        topology_from_cluster_json({"gpus": []}, NODES, source="x.json")
