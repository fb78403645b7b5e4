"""Network interfaces (ip -j addr / ip -j -s link / /proc/self/net/dev), captured on the simulated cluster."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collscope.errors import ParseError
from collscope.topo import netif
from collscope.topo.cluster import load_cluster
from collscope.topo.detect import detect_format, load_captures
from collscope.topo.node import build_node

FIX = Path(__file__).parents[1] / "fixtures" / "netif"


def test_ip_addr_of_a_cluster_node() -> None:
    nifs = netif.parse_ip_addr_json((FIX / "node1-ip-addr.json").read_text())
    assert [n.name for n in nifs] == ["lo", "cl0", "cl1"]
    lo, cl0, cl1 = nifs
    assert (lo.link_type, lo.is_rail_candidate, lo.is_up) == ("loopback", False, True)
    assert cl0.addresses[0] == "10.99.0.1/24" and cl1.addresses[0] == "10.99.1.1/24"
    assert cl0.is_up and cl0.is_rail_candidate and cl0.mtu == 1500 and cl0.rx_bytes is None


def test_ip_link_counters_and_a_down_rail() -> None:
    link = {n.name: n for n in netif.parse_ip_link_json((FIX / "node1-ip-link.json").read_text())}
    proc = netif.parse_proc_net_dev((FIX / "node1-proc-net-dev.txt").read_text())
    assert set(proc) == set(link) == {"lo", "cl0", "cl1"}
    # /proc/self/net/dev was read just after ip -s link: the same counters, never smaller.
    assert all(proc[n][0] >= link[n].rx_bytes >= 0 and proc[n][1] >= link[n].tx_bytes >= 0 for n in link)
    assert proc["cl1"] == (6094, 1076)
    down = {n.name: n for n in netif.parse_ip_addr_json((FIX / "node4-cl1-down-ip-addr.json").read_text())}
    assert down["cl1"].operstate == "DOWN" and not down["cl1"].is_up and down["cl0"].is_up


def test_formats_are_detected_from_content() -> None:
    assert detect_format((FIX / "node1-ip-addr.json").read_text()) == "ip-addr-json"
    assert detect_format((FIX / "node1-ip-link.json").read_text()) == "ip-link-json"
    assert detect_format((FIX / "speeds.json").read_text()) == "netif-speeds"


def test_interfaces_are_the_nics_of_a_node_without_rdma() -> None:
    captures = load_captures([FIX / "node1-ip-addr.json", FIX / "node1-ip-link.json", FIX / "speeds.json"])
    node = build_node(captures)
    assert node.nics == ["cl0", "cl1"] and node.gpus == []
    cl1 = node.graph.nodes["cl1"]
    assert cl1["ifname"] == "cl1" and cl1["speed_gbps"] == 10.0 and cl1["ports"][0]["state"] == "Active"
    assert [n.name for n in node.extras["netifs"]] == ["lo", "cl0", "cl1"]
    assert node.extras["netifs"][1].rx_bytes is not None and node.extras["netifs"][1].addresses


def _node_dir(root: Path, host: str, addr: str, link: str) -> None:
    d = root / host
    d.mkdir()
    shutil.copy(FIX / addr, d / "ip-addr.json")
    shutil.copy(FIX / link, d / "ip-link.json")
    (d / "meta.json").write_text(json.dumps({"host": host}))


def test_cluster_of_four_nodes_two_rails_flags_the_node_with_a_down_rail(tmp_path: Path) -> None:
    for host in ("node1", "node2", "node3"):
        _node_dir(tmp_path, host, "node1-ip-addr.json", "node1-ip-link.json")
    _node_dir(tmp_path, "node4", "node4-cl1-down-ip-addr.json", "node4-cl1-down-ip-link.json")
    cluster = load_cluster(tmp_path)
    assert list(cluster.nodes) == ["node1", "node2", "node3", "node4"]
    assert [[m for m in r.members] for r in cluster.rails] == [
        [("node1", "cl0"), ("node2", "cl0"), ("node3", "cl0"), ("node4", "cl0")],
        [("node1", "cl1"), ("node2", "cl1"), ("node3", "cl1")]]
    assert "node4 differs from the majority: active NICs 1 (majority 2)" in cluster.warnings
    assert "rail 1: no active NIC on node4" in cluster.warnings


@pytest.mark.parametrize("text", ["", "[", "{}", "[1]", '[{"ifname": "x"}]', '[{"ifindex": 1}]',
                                  '[{"ifname": "", "ifindex": 1}]'])
def test_damaged_input_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        netif.parse_ip_addr_json(text, "t.json")
    with pytest.raises(ParseError):
        netif.parse_ip_link_json(text, "t.json")


@given(st.text(max_size=300))
def test_parsers_raise_only_parse_errors(text: str) -> None:
    for parse in (netif.parse_ip_addr_json, netif.parse_ip_link_json, netif.parse_speeds_json,
                  netif.parse_proc_net_dev):
        try:
            parse(text, "fuzz")
        except ParseError:
            pass


def test_speeds_only_from_this_namespaces_sys(tmp_path: Path) -> None:
    for name, speed in (("cl0", "10000"), ("cl1", "-1")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "speed").write_text(speed + "\n")
    assert netif.read_speeds(["cl0", "cl1"], tmp_path) == {"cl0": 10000}
    assert netif.read_speeds(["cl0", "cl1", "lo"], tmp_path) == {}  # another namespace's /sys
