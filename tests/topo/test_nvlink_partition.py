"""NVLink partitions read from ``nvidia-smi -q`` Fabric blocks: the parser, the node's warnings, and the NVLink
domain the captures of every node give the models (issue 24 item 1: "the default comes from the topology (MNNVL
clique)").

Fixtures (tests/fixtures/nvidia-smi/q-*), written in the shapes published: the whole ``nvidia-smi -q`` of a GB200
tray (``GPU <bus id>`` headers, Product Name, Fabric with Health/Summary and Bandwidth: k8s-dra-driver-gpu issue 626,
leptonai/gpud pull request 1106), an excerpt (``nvidia-smi -q | grep -C3 CliqueId``: ``--`` separators, no GPU
header), Azure's failed registration (Completed / Insufficient Resources / CliqueId 0 / zero UUID: Azure/azhpc-images
pull request 506), a tray waiting for its partition (State In Progress, N/A), and HGX H100 (Completed with a zero
ClusterUUID: meta-pytorch/torchcomms pull request 1385).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.params import link_params
from collscope.cli import main
from collscope.errors import ParseError
from collscope.topo.cluster import load_cluster
from collscope.topo.detect import detect_format
from collscope.topo.load import load_topology
from collscope.topo.nvidia_smi.fabric import parse_nvsmi_fabric
from collscope.topo.nvlink_partition import NvlinkPartition, fabric_warnings, node_partition

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
TRAY = FIXTURES / "q-gb200-tray-registered-clique32766.txt"
PENDING = FIXTURES / "q-gb200-tray-in-progress-3of4.txt"
EXCERPT = FIXTURES / "q-grep-excerpt-gb300-degraded.txt"
FAILED = FIXTURES / "q-grep-excerpt-gb200-insufficient-resources.txt"
H100 = FIXTURES / "q-h100-hgx-8gpu-zero-cluster.txt"
CLUSTER_UUID = "3f1e6c52-8a0d-4b7e-9c21-5d4a7e0b9f13"


def _parse(path: Path):
    return parse_nvsmi_fabric(path.read_text(), str(path))


def test_whole_q_output_one_block_per_gpu_with_its_bus_id_and_product():
    blocks = _parse(TRAY)
    assert [b.gpu_bus_id for b in blocks] == ["00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0",
                                              "00000019:01:00.0"]
    assert {b.product for b in blocks} == {"NVIDIA GB200"}
    assert all(b.registered and b.clique == (CLUSTER_UUID, 32766) for b in blocks)
    assert (blocks[0].health_summary, blocks[0].bandwidth) == ("Healthy", "Full")
    assert node_partition(blocks) == NvlinkPartition(CLUSTER_UUID, 32766)
    assert detect_format(TRAY.read_text()) == "nvidia-smi-q"
    assert fabric_warnings(blocks) == [] and blocks[0].health_problems == ()


def test_health_rows_that_report_a_problem_are_named():
    """NVML's fabric health mask as `-q` prints it (Route Unhealthy True, Incorrect Configuration other than None,
    Summary Limited Capacity for degraded bandwidth alone)."""
    text = TRAY.read_text()
    text = text.replace("Route Unhealthy               : False", "Route Unhealthy               : True", 1)
    text = text.replace("Incorrect Configuration       : None", "Incorrect Configuration       : No Partition", 1)
    blocks = parse_nvsmi_fabric(text, "tray.txt")
    assert blocks[0].health_problems == ("Route Unhealthy: True", "Incorrect Configuration: No Partition")
    assert blocks[1].health_problems == ()
    (warning,) = fabric_warnings(blocks)
    assert "1 of 4 GPUs (GPU 00000008:01:00.0: Route Unhealthy: True; Incorrect Configuration: No Partition" in warning
    limited = parse_nvsmi_fabric(TRAY.read_text().replace("Summary                       : Healthy",
                                                            "Summary                       : Limited Capacity", 1),
                                 "tray.txt")
    assert "Summary: Limited Capacity" in fabric_warnings(limited)[0]


def test_excerpt_blocks_name_no_gpu_and_keep_their_lines():
    blocks = _parse(EXCERPT)
    assert len(blocks) == 4 and all(b.gpu_bus_id is None and b.product is None for b in blocks)
    assert [b.line for b in blocks] == [1, 9, 17, 25]
    assert [b.bandwidth for b in blocks] == ["Full", "Degraded", "Full", "Full"]
    assert detect_format(EXCERPT.read_text()) == "nvidia-smi-q"
    pasted = EXCERPT.read_text().replace("\n", "\r\n")  # copied from a Windows terminal
    assert detect_format(pasted) == "nvidia-smi-q" and parse_nvsmi_fabric(pasted, "crlf.txt") == blocks
    (warning,) = fabric_warnings(blocks)
    assert "1 of 4 GPUs" in warning and "line 9" in warning and "Bandwidth: Degraded" in warning


def test_registration_pending_is_warned_with_what_it_does():
    blocks = _parse(PENDING)
    assert [b.state for b in blocks] == ["In Progress", "Completed", "In Progress", "In Progress"]
    assert node_partition(blocks) is None  # not every GPU is in the partition
    warnings = load_topology([PENDING]).warnings()
    (pending,) = [w for w in warnings if "not registered" in w]
    assert "3 of 4 GPUs" in pending and "GPU 00000008:01:00.0" in pending and "802" in pending
    assert "GPU 00000009:01:00.0" not in pending


def test_failed_registration_is_warned_on_a_rack_gpu_only():
    blocks = _parse(FAILED)
    assert (blocks[0].state, blocks[0].status, blocks[0].clique_id) == ("Completed", "Insufficient Resources", 0)
    assert not blocks[0].registered
    on_gb200 = fabric_warnings(blocks, "NVIDIA GB200")
    assert any("registration failed" in w and "Insufficient Resources" in w for w in on_gb200)
    assert not any("registration failed" in w for w in fabric_warnings(blocks))  # the excerpt names no GPU


def test_hgx_h100_zero_cluster_is_no_partition_and_no_warning():
    blocks = _parse(H100)
    assert len(blocks) == 8 and blocks[0].state == "Completed" and blocks[0].clique_id == 0
    assert not any(b.registered for b in blocks) and node_partition(blocks) is None
    assert fabric_warnings(blocks, "NVIDIA H100 80GB HBM3") == []


def test_gpus_of_one_node_in_two_partitions_are_warned():
    text = TRAY.read_text()
    other = "a81c44d0-2f6b-4e3a-b0c9-61d5e2f7a3c8"
    head, sep, tail = text.rpartition(CLUSTER_UUID)  # the last GPU's cluster
    blocks = parse_nvsmi_fabric(head + other + tail, "two-partitions.txt")
    assert node_partition(blocks) is None
    assert any("different NVLink partitions" in w and other in w for w in fabric_warnings(blocks))


@pytest.mark.parametrize(("old", "new", "line", "expected"), [
    ("CliqueId                          : 32766", "CliqueId                          : many", 22, "CliqueId"),
    (f"ClusterUUID                       : {CLUSTER_UUID}", "ClusterUUID                       : 42", 23,
     "ClusterUUID"),
])
def test_bad_values_name_the_file_and_the_line(old, new, line, expected):
    text = TRAY.read_text().replace(old, new, 1)
    with pytest.raises(ParseError) as err:
        parse_nvsmi_fabric(text, "tray.txt")
    assert err.value.line == line and expected in err.value.expected and "tray.txt:" in str(err.value)


def test_block_without_state_and_gpu_twice_are_errors():
    no_state = TRAY.read_text().replace("        State                             : Completed\n", "", 1)
    with pytest.raises(ParseError) as err:
        parse_nvsmi_fabric(no_state, "tray.txt")
    assert err.value.line == 19 and "State" in err.value.expected
    doubled = TRAY.read_text().replace("GPU 00000009:01:00.0", "GPU 00000008:01:00.0")
    with pytest.raises(ParseError, match="listed twice"):
        parse_nvsmi_fabric(doubled, "tray.txt")


def _tray(root: Path, host: str, q: Path = TRAY) -> Path:
    node = root / host
    node.mkdir(parents=True)
    shutil.copy(q, node / "nvidia-smi-q.txt")
    shutil.copy(FIXTURES / "query-gpu-gb200-tray-x4.csv", node / "nvidia-smi-query-gpu.csv")
    shutil.copy(FIXTURES / "topo-tab-gb200-tray-4gpu-nv18-nics-at-node-gpu-numa-id.txt", node / "nvidia-smi-topo.txt")
    (node / "meta.json").write_text(json.dumps({"host": host}))
    return node


def test_trays_sharing_a_partition_are_one_nvlink_domain(tmp_path):
    for host in ("tray01", "tray02"):
        _tray(tmp_path, host)
    cluster = load_cluster(tmp_path)
    params = link_params(cluster, nranks=8, nnodes=2)
    assert params.nvl_domain == 8 and params.ndomains == 1
    assert "2 captured nodes" in params.source and "NVLink clique 32766" in params.source
    assert link_params(cluster, nranks=8, nnodes=2, nvl_domain=4, nic_gbit=400).ndomains == 2  # stated wins
    assert link_params(cluster, nranks=4, nnodes=1).nvl_domain is None  # one node: nothing to say


def test_two_racks_are_two_domains(tmp_path):
    other = tmp_path / "other-rack-q.txt"
    other.write_text(TRAY.read_text().replace(CLUSTER_UUID, "a81c44d0-2f6b-4e3a-b0c9-61d5e2f7a3c8"))
    for host in ("tray01", "tray02"):
        _tray(tmp_path / "c", host)
    for host in ("tray03", "tray04"):
        _tray(tmp_path / "c", host, other)
    params = link_params(load_cluster(tmp_path / "c"), nranks=16, nnodes=4, nic_gbit=400)
    assert (params.nvl_domain, params.ndomains) == (8, 2)
    assert "1 more partition" in params.source


def test_one_tray_says_the_domain_is_unknown_and_what_gives_it(tmp_path):
    node = load_topology([_tray(tmp_path, "tray01")])
    params = link_params(node, nranks=8, nnodes=2, nic_gbit=400)
    assert params.ndomains == 2  # nothing assumed
    (caveat,) = [c for c in params.caveats if "NVLink clique 32766" in c]
    assert "--nvl-domain" in caveat and "topo collect" in caveat


def test_captures_of_some_of_the_jobs_nodes_give_no_domain(tmp_path):
    """Two captured trays share a partition, the job runs on 18: the other 16 may be in it or not, so nothing is
    assumed (each node its own domain) and the caveat names what supplies it."""
    for host in ("tray01", "tray02"):
        _tray(tmp_path, host)
    params = link_params(load_cluster(tmp_path), nranks=72, nnodes=18, nic_gbit=400)
    assert (params.nvl_domain, params.ndomains) == (None, 18)
    (caveat,) = [c for c in params.caveats if "NVLink clique 32766" in c]
    assert "the job has 18 nodes and the captures hold 2" in caveat and "--nvl-domain N" in caveat
    assert link_params(load_cluster(tmp_path), nranks=8, nnodes=2).ndomains == 1  # every node of the job captured


def test_cluster_names_the_tray_outside_the_partition(tmp_path):
    for host in ("tray01", "tray02"):
        _tray(tmp_path, host)
    _tray(tmp_path, "tray03", PENDING)
    cluster = load_cluster(tmp_path)
    (line,) = [w for w in cluster.warnings if "NVLink partition" in w]
    assert line.startswith("tray03 differs from the majority") and "NVLink clique 32766" in line
    doc = cluster.to_json()
    assert doc["per_node"]["tray01"]["nvlink_partition"] == {"cluster_uuid": CLUSTER_UUID, "clique_id": 32766}
    assert doc["per_node"]["tray03"]["nvlink_partition"] is None
    assert doc["nvlink_partitions"] == [{"cluster_uuid": CLUSTER_UUID, "clique_id": 32766,
                                         "hosts": ["tray01", "tray02"], "gpus": 8}]
    shown = CliRunner().invoke(main, ["topo", "cluster", str(tmp_path)]).output
    assert f"NVLink clique 32766 of cluster {CLUSTER_UUID}: 8 GPUs on tray01, tray02" in shown


def test_predict_with_the_captures_of_two_trays(tmp_path):
    for host in ("tray01", "tray02"):
        _tray(tmp_path, host)
    result = CliRunner().invoke(main, ["predict", "--topo", str(tmp_path), "--op", "all_reduce", "--nranks", "8",
                                       "--nnodes", "2", "--sizes", "1G", "--json"])
    assert result.exit_code == 0, result.output
    params = json.loads(result.output)["params"]
    assert params["nvl_domain"] == 8 and "nvidia-smi -q Fabric" in params["source"]
    shown = CliRunner().invoke(main, ["topo", "show", "--from", str(tmp_path / "tray01")])
    assert "NVLink fabric: 4 of 4 GPUs registered, all in NVLink clique 32766" in shown.output


def test_a_gpu_without_fabric_prints_na_and_gets_no_warning():
    """PCIe cards and older drivers print only State and Status, both N/A."""
    text = ("GPU 00000000:3B:00.0\n    Product Name                          : NVIDIA H100 PCIe\n    Fabric\n"
            "        State                             : N/A\n        Status                            : N/A\n"
            "    Processes                             : None\n")
    (block,) = parse_nvsmi_fabric(text, "pcie.txt")
    assert (block.state, block.status, block.clique_id, block.registered) == ("N/A", None, None, False)
    assert fabric_warnings([block], "NVIDIA H100 PCIe") == []


def test_analyze_takes_the_domain_from_the_captures_and_says_so(tmp_path):
    """A 72-rank NVL72 run (only the last rank line kept) with the captures of its 18 trays: judged against one
    72-GPU NVLink domain, which the printed Geometry shows with the captures as its evidence (the records alone
    leave it unknown), and bound by the domain's NVLink, not by links inside a node."""
    for k in range(1, 19):
        _tray(tmp_path / "rack", f"tray{k:02d}")
    run = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests" / \
        "all_reduce_perf-v2.19.6-gb200-nvl72-72r-last-rank-line-only.txt"
    result = CliRunner().invoke(main, ["analyze", str(run), "--topo", str(tmp_path / "rack"), "--nnodes", "18",
                                       "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    domain = doc["geometry"]["nvl_domain"]
    assert domain["value"] == 72
    (evidence,) = domain["evidence"]
    assert evidence.startswith("--topo: NVLink domain of 72 ranks: 18 captured nodes") and "clique 32766" in evidence
    assert not [n for n in doc["notes"] if n.startswith("nvl_domain for")]  # the geometry says it, once
    (used,) = doc["params"].values()
    assert (used["nvl_domain"], used["ndomains"]) == (72, 1)
    assert {row["bound_limited_by"] for row in doc["sizes"]} == {"NVLink domain links"}  # not inside a node
    shown = CliRunner().invoke(main, ["analyze", str(run), "--topo", str(tmp_path / "rack"), "--nnodes", "18"])
    assert "  nvl_domain: 72 (--topo: NVLink domain of 72 ranks: 18 captured nodes" in shown.output
    stated = CliRunner().invoke(main, ["analyze", str(run), "--topo", str(tmp_path / "rack"), "--nnodes", "18",
                                       "--nvl-domain", "4", "--json"])
    assert json.loads(stated.output)["geometry"]["nvl_domain"]["value"] == 4  # --nvl-domain wins
