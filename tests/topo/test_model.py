"""NodeTopology built from matrices (inference of switches, NUMA, NVSwitch), queries and warnings."""

from __future__ import annotations

import math

import pytest

from collscope.topo.detect import load_captures
from collscope.topo.node import NodeCaptures, build_node
from collscope.topo.nvidia_smi.queries import parse_gpu_query_csv, parse_topo_matrix
from collscope.topo.samples import sample_path

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _matrix(rows: list[list[str]], extra_header: str = "\tCPU Affinity\tNUMA Affinity") -> str:
    header = "\t" + "\t".join(r[0] for r in rows) + extra_header
    return header + "\n" + "\n".join("\t".join(r) for r in rows) + "\n" + LEGEND


# 2 sockets; per socket one PCIe switch with two GPUs; one NIC on socket 0 only; no NVLink.
PCIE_2SOCKET = _matrix([
    ["GPU0", " X ", "PIX", "SYS", "SYS", "PIX", "0-15", "0"],
    ["GPU1", "PIX", " X ", "SYS", "SYS", "PIX", "0-15", "0"],
    ["GPU2", "SYS", "SYS", " X ", "PIX", "SYS", "16-31", "1"],
    ["GPU3", "SYS", "SYS", "PIX", " X ", "SYS", "16-31", "1"],
    ["mlx5_0", "PIX", "PIX", "SYS", "SYS", " X ", "", ""],
])


@pytest.fixture(scope="module")
def sample_node():
    return build_node(load_captures([sample_path()]), sample="hgx-h100-8gpu")


def test_sample_inventory(sample_node):
    assert sample_node.gpus == [f"GPU{i}" for i in range(8)]
    assert sample_node.nics == [f"mlx5_{i}" for i in range(12)]
    assert sample_node.has_nvswitch
    s = sample_node.summary()
    assert s["numa_nodes"] == 2
    assert s["gpu_models"] == ["NVIDIA H100 80GB HBM3"]
    assert s["nvlink_domains"] == [sample_node.gpus]


def test_sample_paths_and_nearest_nics(sample_node):
    assert sample_node.path_class("GPU0", "GPU5") == "NV18"
    assert sample_node.path_class("GPU0", "mlx5_0") == "PIX"
    assert sample_node.path_class("mlx5_0", "GPU0") == "PIX"
    assert sample_node.path_class("GPU0", "mlx5_4") == "SYS"
    assert sample_node.path_class("GPU3", "GPU3") == "X"
    for i in range(8):
        assert sample_node.nearest_nics(f"GPU{i}") == ([f"mlx5_{i}"], "PIX")
    # GPU i and NIC i share one inferred switch; GPUs 0-3 and NICs 0-3, 8, 9 share NUMA 0.
    g = sample_node.graph
    assert g.nodes["GPU0"]["numa"] == g.nodes["mlx5_9"]["numa"] == "NUMA0"
    assert g.nodes["GPU7"]["numa"] == "NUMA1"


def test_sample_bandwidths_use_captured_rates(sample_node):
    g = sample_node.graph
    edge = g.edges["GPU0", "NVSwitch"]
    assert edge["nlinks"] == 18
    # nvlink -s prints 26.562 GB/s per link, the signalling rate; the data rate is 25 GB/s per link
    assert edge["bw_gbps"] == pytest.approx(18 * 25.0)
    assert edge["bw_source"].startswith("captured: nvidia-smi nvlink -s")
    assert edge["nccl_bw_gbps"] == pytest.approx(18 * 20.6)
    matrix = sample_node.bandwidth_matrix()
    assert matrix.loc["GPU0", "GPU7"] == pytest.approx(450.0)
    assert math.isnan(matrix.loc["GPU2", "GPU2"])
    # PCIe: Gen5 x16 from --query-gpu; NIC: 400 Gb/s from ibstat.
    pcie = [d for _, nbr, d in g.edges("GPU0", data=True) if d["kind"] == "pcie"]
    assert pcie[0]["bw_gbps"] == pytest.approx(63.0)
    nic_edge = [d for _, nbr, d in g.edges("mlx5_0", data=True) if d["kind"] == "pcie"][0]
    assert nic_edge["bw_gbps"] == pytest.approx(50.0)
    for u, v, d in g.edges(data=True):
        assert d["bw_source"].split(":")[0] in ("captured", "assumed", "unknown"), (u, v, d)


def test_sample_warnings(sample_node):
    text = "\n".join(sample_node.warnings())
    assert "bundled sample" in text
    assert "mlx5_11 (port 1 Down, rate 40 Gb/s)" in text
    assert "NCCL_IB_HCA=^=mlx5_8,mlx5_9,mlx5_10 " in text  # the active 100 Gb/s front-end ports
    assert "NCCL_IB_GID_INDEX" not in text and "mixed rates" not in text
    assert "SMP interconnect" not in text  # every GPU has a PIX NIC


def test_pcie_two_sockets_inference_and_warnings():
    node = build_node(NodeCaptures(matrix=parse_topo_matrix(PCIE_2SOCKET)), gpu="L40S")
    g = node.graph
    s = node.summary()
    assert s["numa_nodes"] == 2
    assert s["pcie_switches"] == 2
    assert not node.has_nvswitch
    assert node.nearest_nics("GPU0") == (["mlx5_0"], "PIX")
    assert node.nearest_nics("GPU2") == (["mlx5_0"], "SYS")
    assert g.nodes["GPU2"]["numa"] == "NUMA1"
    warnings = node.warnings()
    assert any(w.startswith("GPU2: nearest NIC (mlx5_0) is only reachable across the SMP") for w in warnings)
    assert any(w.startswith("GPU3: nearest NIC") for w in warnings)
    assert any("no NVLink between any GPUs" in w for w in warnings)
    assert any("1 usable NIC(s) for 4 GPUs" in w for w in warnings)
    # PCIe bottleneck between GPUs on one switch: Gen4 x16 (L40S) assumed.
    assert node.gpu_bandwidth_gbps("GPU0", "GPU1") == pytest.approx(31.5)


def test_graph_classification_agrees_with_capture():
    """With the captured classes removed, the graph alone gives the same classes back."""
    node = build_node(NodeCaptures(matrix=parse_topo_matrix(PCIE_2SOCKET)))
    captured = node.links()
    node.paths = {}
    assert node.links() == captured


def test_nvlink_pairs_without_nvswitch():
    text = _matrix([
        ["GPU0", " X ", "NV4", "NODE", "NODE", "0-7", "0"],
        ["GPU1", "NV4", " X ", "NODE", "NODE", "0-7", "0"],
        ["GPU2", "NODE", "NODE", " X ", "NV4", "0-7", "0"],
        ["GPU3", "NODE", "NODE", "NV4", " X ", "0-7", "0"],
    ])
    csv = ("index, name, pci.bus_id, pcie.link.gen.max, pcie.link.width.max\n"
           "0, NVIDIA RTX A6000, 00000000:01:00.0, 4, 16\n1, NVIDIA RTX A6000, 00000000:02:00.0, 4, 16\n"
           "2, NVIDIA RTX A6000, 00000000:81:00.0, 4, 16\n3, NVIDIA RTX A6000, 00000000:82:00.0, 4, 16\n")
    node = build_node(NodeCaptures(matrix=parse_topo_matrix(text), gpu_info=parse_gpu_query_csv(csv)))
    assert not node.has_nvswitch
    assert node.nvlink_domains() == [["GPU0", "GPU1"], ["GPU2", "GPU3"]]
    assert node.graph.edges["GPU0", "GPU1"]["nlinks"] == 4
    assert node.gpu_bandwidth_gbps("GPU0", "GPU1") == pytest.approx(4 * 14.0625)
    assert node.path_class("GPU1", "GPU2") == "NODE"
    assert node.warnings() == []


def test_unknown_gpu_name_is_a_config_error():
    from collscope.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown GPU 'Z9000'"):
        build_node(NodeCaptures(matrix=parse_topo_matrix(PCIE_2SOCKET)), gpu="Z9000")
