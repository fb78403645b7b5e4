"""Where NCCL's graphs leave a node (collscope.topo.crossing): the path type of their network hops and the NICs they
reach, from the GPUs' nearest NICs in an ``nvidia-smi topo -m`` capture, by NCCL's rules (PXN relays, GPUDirect
RDMA off beyond NCCL_NET_GDR_LEVEL, a ring's entry and exit GPU).

Fixtures (our own, in nvidia-smi's format, of shapes published as found):
- ``topo-tab-4gpu-nv4-2nic-phb-one-gpu-each-4numa.txt``: 4 A100 NV4, two NICs each at PHB from one GPU and SYS from
  the others, one NUMA node per GPU (the ALCF Polaris node of its user docs);
- ``topo-tab-8gpu-nv18-4nic-pix-even-gpus-2nic-sys.txt``: 8 H100 on NVSwitch, four NICs at PIX from the even GPUs
  and two at SYS from every GPU (the node of NVIDIA/nccl#1357, nccl-tests#232);
- the bundled HGX H100 sample (one NIC at PIX per GPU) and the earlier PCIe and 2-GPU fixtures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collscope.topo.crossing import node_crossing
from collscope.topo.load import load_topology
from collscope.topo.model import NodeTopology
from collscope.topo.samples import sample_path

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
POLARIS = SMI / "topo-tab-4gpu-nv4-2nic-phb-one-gpu-each-4numa.txt"
EVEN_PIX = SMI / "topo-tab-8gpu-nv18-4nic-pix-even-gpus-2nic-sys.txt"
PCIE_NODE = SMI / "topo-tab-8gpu-pcie-nics-at-node-one-phb-2socket.txt"
TWO_GPU = SMI / "topo-indented-2gpu-nv6-empty-cpu-affinity.txt"


def _node(path: Path, gpu: str | None = None) -> NodeTopology:
    node = load_topology([path], gpu=gpu)
    assert isinstance(node, NodeTopology)
    return node


def test_nics_at_phb_from_one_gpu_each_cross_at_phb_without_gdr() -> None:
    c = node_crossing(_node(POLARIS, "A100"))
    assert c is not None
    assert c.path == "PHB"
    assert c.nics == ("mlx5_0", "mlx5_1")
    assert {g.gpu: g.path for g in c.gpus} == {"GPU0": "SYS", "GPU1": "PHB", "GPU2": "SYS", "GPU3": "PHB"}
    # PHB is beyond NCCL's default NCCL_NET_GDR_LEVEL (PXB): the GPUs that set the crossing stage through host memory
    assert c.staged() == ("GPU1", "GPU3")
    # no PXN: the NVLink peers' own NICs are at PHB, beyond what a relay may have (P2C)
    assert all(not g.relays for g in c.gpus)
    assert "NCCL's graphs cross nodes at PHB (GPU1, GPU3 at PHB to mlx5_0, mlx5_1; GPU0, GPU2 at SYS" in c.text()


def test_a_gdr_level_that_reaches_phb_turns_staging_off() -> None:
    c = node_crossing(_node(POLARIS, "A100"), level="PHB")
    assert c is not None and c.path == "PHB" and c.staged() == ()


def test_gpus_without_a_close_nic_send_through_an_nvlink_peer() -> None:
    c = node_crossing(_node(EVEN_PIX, "H100"))
    assert c is not None
    assert c.path == "PIX"
    by_gpu = {g.gpu: g for g in c.gpus}
    assert by_gpu["GPU1"].path == "PXN" and by_gpu["GPU1"].relays == ("GPU0", "GPU2", "GPU4", "GPU6")
    # the two NICs at SYS from every GPU are no GPU's first choice: not counted
    assert c.nics == ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")


def test_one_nic_per_gpu_at_pix() -> None:
    c = node_crossing(_node(sample_path(), "H100"))
    assert c is not None
    assert c.path == "PIX" and c.staged() == ()
    assert c.nics == tuple(f"mlx5_{i}" for i in range(8))


def test_a_pcie_box_with_nics_at_node_crosses_at_phb() -> None:
    c = node_crossing(_node(PCIE_NODE, "L40S"))
    assert c is not None and c.path == "PHB" and c.nics == ("mlx5_0", "mlx5_1")


def test_the_second_closest_gpu_sets_the_type_unless_one_gpu_per_node() -> None:
    """A ring enters a node at one GPU and leaves at another: one GPU at PHB and the other at SYS cross at SYS; a job
    with one GPU per node crosses at its GPU's own path (the closest, as the job's GPU is not named)."""
    node = _node(TWO_GPU, "A100")
    c = node_crossing(node)
    assert c is not None and c.path == "SYS"
    one = node_crossing(node, gpus_per_node=1)
    assert one is not None and one.path == "PHB"


def test_no_nic_in_the_capture_gives_no_crossing() -> None:
    path = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / "topo-spaces-4gpu-pcie-no-nic-numa-ids.txt"
    assert node_crossing(_node(path, "L40S")) is None


@pytest.mark.parametrize("path", [POLARIS, EVEN_PIX])
def test_every_gpu_of_the_capture_is_placed(path: Path) -> None:
    node = _node(path)
    c = node_crossing(node)
    assert c is not None and [g.gpu for g in c.gpus] == list(node.gpus)


def test_topo_show_setting_shows_gdr_and_the_crossing_under_it() -> None:
    import json

    from click.testing import CliRunner

    from collscope.cli import main

    def show(*args: str) -> dict:
        result = CliRunner().invoke(main, ["topo", "show", "--from", str(EVEN_PIX), "--json", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    default = show()
    assert default["crossing"]["path"] == "PIX" and "nccl_settings" not in default
    gdr_off = show("--setting", "NCCL_NET_GDR_LEVEL=LOC")
    assert gdr_off["crossing"]["path"] == "PHB" and gdr_off["nccl_settings"] == {"NCCL_NET_GDR_LEVEL": "LOC"}
    gpu0 = next(g["nic"] for g in gdr_off["gpus"] if g["name"] == "GPU0")
    assert (gpu0["gdr"], gpu0["gdr_level"]) == (False, "LOC")
    # PIX is within NCCL's default: the way back is the default, not the PHB level and its cost
    assert gpu0["variable"] == ("unsetting NCCL_NET_GDR_LEVEL (NCCL's default PXB) or setting it to PIX turns it on")
    no_pxn = show("--setting", "NCCL_PXN_DISABLE=1")
    assert not any("pxn" in g["nic"] for g in no_pxn["gpus"]) and any("pxn" in g["nic"] for g in default["gpus"])
    assert not any(g["relays"] for g in no_pxn["crossing"]["gpus"])
    text = CliRunner().invoke(main, ["topo", "show", "--from", str(EVEN_PIX), "--setting", "NCCL_PXN_DISABLE=1"])
    assert "(GDR and the crossing above as NCCL reads them with NCCL_PXN_DISABLE=1)" in text.output
    other = CliRunner().invoke(main, ["topo", "show", "--from", str(EVEN_PIX), "--setting", "NCCL_ALGO=Ring"])
    assert other.exit_code != 0 and "topo show --setting takes NCCL_NET_GDR_LEVEL and NCCL_PXN_DISABLE" in other.output


def test_an_xml_capture_names_the_cpu_and_the_sys_crossing_says_its_link() -> None:
    """An NCCL topology file names the CPU (arch, vendor, family, model), so NCCL's inter-socket bandwidth is known
    (AMD_BW 16 GB/s, src/graph/topo.h); two A100 on two sockets, the NIC on the first (the NC A100 v4 shape)."""
    from collscope.analysis.params import link_params
    from collscope.topo.crossing import inter_socket_link

    xml = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-xml" / \
        "a100-pcie-2socket-one-gpu-each-1nic-socket0-amd-topo-file.xml"
    node = load_topology([str(xml)])
    crossing = node_crossing(node)
    assert crossing is not None and crossing.path == "SYS"
    assert inter_socket_link(node) == (16.0, "assumed: NCCL topo.h AMD_BW")
    caveats = " ".join(link_params(node, nranks=4, nnodes=2).caveats)
    assert "the CPUs' interconnect, 16 GB/s (assumed: NCCL topo.h AMD_BW" in caveats
    assert "does not name the CPU" not in caveats
    assert inter_socket_link(load_topology([str(POLARIS)])) is None  # nvidia-smi topo -m names no CPU
