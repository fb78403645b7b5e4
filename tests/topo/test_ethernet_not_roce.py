"""Plain Ethernet interfaces are Ethernet, not RoCE (issue 26 item 7): RoCE needs an RDMA device on the port (what
ibstat, ibv_devinfo and ``rdma link`` list); an interface that only ``ip`` shows (the simulated cluster's cl0/cl1,
tests/fixtures/netif) gets no NCCL_IB_GID_INDEX advice, while an RDMA device's Ethernet port still does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from collscope.cli import main
from collscope.topo.detect import load_captures
from collscope.topo.infiniband.host import port_transport
from collscope.topo.node import build_node

FIX = Path(__file__).parents[1] / "fixtures"
NETIF = [FIX / "netif" / "node1-ip-addr.json", FIX / "netif" / "node1-ip-link.json", FIX / "netif" / "speeds.json"]


def test_the_transport_rule() -> None:
    assert port_transport("Ethernet", rdma=True) == "RoCE"
    assert port_transport("Ethernet", rdma=False) == "Ethernet"
    assert port_transport("InfiniBand", rdma=True) == "InfiniBand"
    assert port_transport(None, rdma=True) is None


def test_plain_interfaces_get_no_gid_advice() -> None:
    node = build_node(load_captures(NETIF))
    assert node.nics == ["cl0", "cl1"] and node.graph.nodes["cl0"]["rdma"] is False
    text = "\n".join(node.warnings())
    assert "RoCE" not in text and "NCCL_IB_GID_INDEX" not in text, text
    shown = CliRunner().invoke(main, ["topo", "show", *(f"--from={p}" for p in NETIF)])
    assert shown.exit_code == 0, shown.output
    assert "Ethernet" in shown.output and "RoCE" not in shown.output and "GID" not in shown.output, shown.output


def test_an_rdma_device_on_ethernet_is_still_roce() -> None:
    for capture in (FIX / "infiniband" / "ibv_devinfo-two-hcas-ib-roce.txt",
                    FIX / "topo" / "rdma-link-ib-mixed-roce.txt"):
        text = "\n".join(build_node(load_captures([capture])).warnings())
        assert "RoCE (Ethernet link layer) compute ports" in text and "NCCL_IB_GID_INDEX" in text, (capture, text)


def test_a_cluster_of_plain_interfaces_has_no_roce_advice(tmp_path: Path) -> None:
    for host in ("node1", "node2"):
        d = tmp_path / host
        d.mkdir()
        for path in NETIF:
            shutil.copy(path, d / path.name)
        (d / "meta.json").write_text(json.dumps({"host": host}))
    result = CliRunner().invoke(main, ["topo", "cluster", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [r["members"] for r in doc["rails"]] == [[["node1", "cl0"], ["node2", "cl0"]],
                                                    [["node1", "cl1"], ["node2", "cl1"]]]
    every = json.dumps(doc["warnings"]) + json.dumps([n["warnings"] for n in doc["per_node"].values()])
    assert "RoCE" not in every and "GID" not in every, every


def test_the_drawing_labels_a_plain_interface_eth_and_an_rdma_port_roce() -> None:
    import networkx as nx

    from collscope.topo.draw import _label

    g = nx.Graph()
    g.add_node("eth0", kind="nic", speed_gbps=100.0, rdma=False, ports=[{"link_layer": "Ethernet", "state": "Active"}])
    g.add_node("mlx5_0", kind="nic", speed_gbps=400.0, ports=[{"link_layer": "Ethernet", "state": "Active"}])
    g.add_node("mlx5_1", kind="nic", speed_gbps=400.0, ports=[{"link_layer": "InfiniBand", "state": "Active"}])
    assert _label(g, "eth0") == "eth0\n100G Eth"
    assert _label(g, "mlx5_0") == "mlx5_0\n400G RoCE"
    assert _label(g, "mlx5_1") == "mlx5_1\n400G IB"
