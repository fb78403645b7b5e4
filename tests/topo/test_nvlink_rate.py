"""One NVLink bandwidth: per direction, data rate, decimal GB/s, whatever the input; the source said.

H100 (NVLink4): 18 links x 25 GB/s = 450 GB/s per direction, from ``topo -m`` (table rate), from
``nvidia-smi nvlink -s`` (26.562 GB/s per link is the signalling rate; converted) and from NCCL's XML
(whose 20.6 GB/s per link is NCCL's model constant, shown as NCCL's next to the data rate).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collscope.topo import rates
from collscope.topo.detect import load_captures
from collscope.topo.gpus import gpu_generation
from collscope.topo.node import build_node
from collscope.topo.render import node_summary_text, node_to_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MATRIX = FIXTURES / "nvidia-smi" / "topo-tab-4gpu-nv18-4nic-legend-gpu-numa-id.txt"
NVLINK_S = FIXTURES / "nvidia-smi" / "nvlink-s-h100x8.txt"
XML_8GPU = FIXTURES / "nccl-xml" / "h100-8gpu-nvswitch-topo-dump.xml"
XML_1GPU = FIXTURES / "nccl-xml" / "h200-1gpu-4nvswitch-400g-nic-topo-dump-excerpt.xml"
XML_NO_GPU = FIXTURES / "nccl-xml" / "ndv4-style-bridges-topo-file.xml"


def _node(*paths: Path):
    return build_node(load_captures(list(paths)))


def _nvswitch_edge(node, gpu: str = "GPU0") -> dict:
    return node.graph.edges[gpu, "NVSwitch"]


@pytest.mark.parametrize("paths", [(MATRIX,), (MATRIX, NVLINK_S), (XML_8GPU,), (XML_1GPU,)],
                         ids=["topo-m", "topo-m+nvlink-s", "xml-8gpu", "xml-1gpu"])
def test_h100_nvlink_is_450_from_every_input(paths):
    node = _node(*paths)
    assert _nvswitch_edge(node)["bw_gbps"] == pytest.approx(450.0)
    assert node.gpu_bandwidth_gbps("GPU0", "GPU1") in (None, pytest.approx(450.0))


def test_sources_are_said_in_the_text():
    table = node_summary_text(_node(MATRIX))
    assert "NV18, 450 GB/s per direction" in table and "table rate" in table
    measured = node_summary_text(_node(MATRIX, NVLINK_S))
    assert "NV18, 450 GB/s per direction" in measured and "478" not in measured
    assert "nvidia-smi nvlink -s" in measured and "26.562" in measured and "signalling" in measured
    assert "NVLink4 data rate 25 GB/s (x 25/26.5625) x 18" in measured
    xml = node_summary_text(_node(XML_8GPU))
    assert "NV18, 450 GB/s per direction" in xml
    assert "NCCL's model" in xml and "370.8" in xml


def test_nccl_model_constant_kept_as_nccls():
    edge = _nvswitch_edge(_node(XML_8GPU))
    assert edge["nccl_bw_gbps"] == pytest.approx(370.8)
    assert "SM90_NVLINK_BW" in edge["nccl_bw_source"]


def test_one_gpu_on_nvswitch_is_not_nvlink_none():
    text = node_summary_text(_node(XML_1GPU))
    assert "NVLink: none" not in text
    assert "NVLink: NVSwitch" in text


def test_xml_net_speed_is_the_nic_rate():
    node = _node(XML_1GPU)
    doc = json.loads(json.dumps(node_to_json(node), default=str))
    (nic,) = doc["nics"]
    assert nic["name"] == "mlx5_0" and nic["speed_gbps"] == 400.0
    text = node_summary_text(node)
    row = next(line for line in text.splitlines() if line.strip().startswith("mlx5_0"))
    assert "400" in row and "?  " in row  # rate known, state not written in the XML


@pytest.mark.parametrize(("speed_mbps", "rate_gbps"), [("400000", 400.0), ("200000", 200.0)])
def test_xml_net_speed_in_mbps_becomes_the_rate(tmp_path, speed_mbps, rate_gbps):
    path = tmp_path / "topo.xml"
    path.write_text(XML_1GPU.read_text().replace('speed="400000"', f'speed="{speed_mbps}"'))
    node = _node(path)
    assert node_to_json(node)["nics"][0]["speed_gbps"] == rate_gbps
    row = next(line for line in node_summary_text(node).splitlines() if line.strip().startswith("mlx5_0"))
    assert f"{rate_gbps:g}" in row


def test_topo_file_without_gpu_elements_says_nvlink_unknown():
    node = _node(XML_NO_GPU)
    text = node_summary_text(node)
    assert "NVLink: none" not in text
    assert "NVLink: unknown" in text
    assert any("NVLink unknown" in w and "<gpu>" in w for w in node.warnings())
    assert node_to_json(node)["nvlink"]["known"] is False


@pytest.mark.parametrize(("model", "printed", "data"), [
    ("H100", 26.562, 25.0),   # NVLink4, nccl#1397
    ("V100", 25.781, 25.0),   # NVLink2, Azure/azhpc-diagnostics#73
    ("A100", 25.0, 25.0),     # NVLink3, nccl-tests#228
    ("GB200", 53.125, 50.0),  # NVLink5, NVIDIA/k8s-test-infra#371
    (None, 26.562, 25.0),     # the printed rate alone names NVLink4
])
def test_nvlink_s_signalling_rate_converts_to_data_rate(model, printed, data):
    gen = gpu_generation(model) if model else None
    got, why = rates.nvlink_data_gbps_per_link(printed, gen)
    assert got == pytest.approx(data, abs=1e-3)
    assert why


def test_unknown_printed_rate_is_kept_and_said():
    got, why = rates.nvlink_data_gbps_per_link(13.0, None)
    assert got == 13.0 and "as printed" in why
