"""A GPU's nearest NIC for NCCL is an active compute NIC: Down ports and slower front-end NICs are left out.

The mixed node (tests/fixtures/nodes/h100-mixed-4ndr-4down-frontend, written in the real tool formats):
8 H100 on NVSwitch, GPU i on one PCIe switch with mlx5_i; mlx5_0-3 Active 400 Gb/s InfiniBand, mlx5_4-7
Down (rate 10, the value a Down IB port reports), and mlx5_8, a 100 Gb/s Ethernet front-end port on
GPU7's switch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.topo.detect import add_capture, load_captures
from collscope.topo.node import NodeCaptures, build_node
from collscope.topo.render import node_summary_text, node_to_json
from collscope.topo.samples import sample_path
from tests.corpus import CORPUS, skip_reason, strip_corpus_header

MIXED = Path(__file__).resolve().parents[1] / "fixtures" / "nodes" / "h100-mixed-4ndr-4down-frontend"
MIXED_FILES = [MIXED / "nvidia-smi-topo.txt", MIXED / "ibstat.txt", MIXED / "ibdev2netdev.txt"]
COMPUTE = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]


@pytest.fixture(scope="module")
def mixed():
    return build_node(load_captures(MIXED_FILES))


def test_nearest_nic_is_an_active_compute_nic(mixed):
    for i in range(4):
        assert mixed.nearest_nics(f"GPU{i}") == ([f"mlx5_{i}"], "PIX")
    for i in range(4, 8):  # their own switch holds only a Down port (and, for GPU7, the front-end port)
        assert mixed.nearest_nics(f"GPU{i}") == (COMPUTE, "SYS")


def test_left_out_nics_say_why(mixed):
    left = {row["name"]: row for row in mixed.left_out_nics()}
    assert sorted(left) == ["mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8"]
    assert left["mlx5_4"]["reason"] == "down"
    assert "port 1 Down" in left["mlx5_4"]["why"]
    assert left["mlx5_8"]["reason"] == "front-end"
    assert "100 Gb/s" in left["mlx5_8"]["why"] and "Ethernet" in left["mlx5_8"]["why"]
    assert "400 Gb/s" in left["mlx5_8"]["why"]


def test_warnings_name_gpus_without_a_compute_nic_and_exclude_front_end(mixed):
    warnings = mixed.warnings()
    text = "\n".join(warnings)
    (no_nic,) = [w for w in warnings if "no active compute NIC on their PCIe switch" in w]
    assert no_nic.startswith("GPU4, GPU5, GPU6, GPU7 (4 of 8 GPUs)")
    assert "GPU3" not in no_nic
    assert "NCCL_IB_HCA=^=mlx5_8" in text
    assert "NCCL_IB_GID_INDEX" not in text  # the only RoCE port is a front-end port to exclude
    assert "mixed rates" not in text
    assert "5 usable NIC" not in text
    assert "4 usable NIC(s) for 8 GPUs" in text


def test_json_has_left_out_list_and_compute_nearest(mixed):
    doc = json.loads(json.dumps(node_to_json(mixed), default=str))
    assert [row["name"] for row in doc["left_out_nics"]] == ["mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8"]
    assert {row["reason"] for row in doc["left_out_nics"]} == {"down", "front-end"}
    gpu7 = doc["gpus"][7]
    assert (gpu7["nearest_nics"], gpu7["nearest_nic_path"]) == (COMPUTE, "SYS")
    roles = {nic["name"]: nic["role"] for nic in doc["nics"]}
    assert roles["mlx5_0"] == "compute" and roles["mlx5_4"] == "down" and roles["mlx5_8"] == "front-end"
    assert any("NCCL_IB_HCA=^=mlx5_8" in w for w in doc["warnings"])


def test_text_output_shows_left_out_nics(mixed):
    text = node_summary_text(mixed)
    assert "left out" in text
    assert "GPU7  NUMA1  56-111,168-223  mlx5_0,mlx5_1,mlx5_2...  SYS" in text
    assert "mlx5_7,mlx5_8" not in text


def test_cli_text_from_the_three_captures():
    result = CliRunner().invoke(main, ["topo", "show", *[a for p in MIXED_FILES for a in ("--from", str(p))]])
    assert result.exit_code == 0, result.output
    assert "no active compute NIC on their PCIe switch" in result.stdout
    assert "NCCL_IB_HCA=^=mlx5_8" in result.stdout


def test_roce_backend_keeps_gid_advice():
    ibstat = (MIXED / "ibstat.txt").read_text()
    ibstat = ibstat.replace("Rate: 10\n", "Rate: 400\n").replace("Polling", "LinkUp")
    ibstat = ibstat.replace("State: Down", "State: Active")
    ibstat = ibstat.replace("Rate: 100\n", "Rate: 400\n").replace("Link layer: InfiniBand", "Link layer: Ethernet")
    captures = NodeCaptures()
    add_capture(captures, (MIXED / "nvidia-smi-topo.txt").read_text(), "topo.txt")
    add_capture(captures, ibstat, "ibstat.txt")
    node = build_node(captures)
    text = "\n".join(node.warnings())
    assert node.left_out_nics() == []
    assert "NCCL_IB_GID_INDEX" in text and "NCCL_IB_HCA" not in text
    assert node.nearest_nics("GPU7") == (["mlx5_7", "mlx5_8"], "PIX")


def test_matrix_alone_keeps_every_nic():
    node = build_node(load_captures([MIXED / "nvidia-smi-topo.txt"]))
    assert node.left_out_nics() == []
    assert node.nearest_nics("GPU7") == (["mlx5_7", "mlx5_8"], "PIX")


def test_sample_excludes_its_front_end_ports_by_exact_name():
    node = build_node(load_captures([sample_path()]), sample="hgx-h100-8gpu")
    text = "\n".join(node.warnings())
    # `^=` is an exact-name exclude list; plain `^mlx5_1` would also drop mlx5_10..19
    assert "NCCL_IB_HCA=^=mlx5_8,mlx5_9,mlx5_10" in text
    assert "NCCL_IB_GID_INDEX" not in text
    assert "no active compute NIC" not in text


def test_corpus_h100_node_names_the_four_gpus():
    files = {"nvidia-smi-topo/h100-8gpu-nv18-12nic-numa-off-clean.txt": "topo",
             "ibstat/ibstat-h100-cx7-ndr400-plus-cx6dx-roce-some-down.txt": "ibstat",
             "ibstat/ibdev2netdev-column-t-h100-annotated-by-author.txt": "ibdev2netdev"}
    if not all((CORPUS / rel).is_file() for rel in files):
        pytest.skip(skip_reason())
    captures = NodeCaptures()
    for rel in files:
        add_capture(captures, strip_corpus_header((CORPUS / rel).read_text()), rel)
    node = build_node(captures)
    warnings = node.warnings()
    assert any(w.startswith("GPU1, GPU2, GPU5, GPU6 (4 of 8 GPUs) have no active compute NIC") for w in warnings)
    text = "\n".join(warnings)
    assert re.search(r"NCCL_IB_HCA=\^=mlx5_1(?![0-9,])", text)  # the one active front-end port, by exact name
    assert "NCCL_IB_GID_INDEX" not in text
    assert node.nearest_nics("GPU0") == (["mlx5_0"], "PIX")
    assert "mlx5_1" not in node.nearest_nics("GPU1")[0]
