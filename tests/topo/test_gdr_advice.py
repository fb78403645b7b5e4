"""GPUDirect RDMA per GPU-NIC pair by NCCL's rule (src/graph/paths.cc ncclTopoCheckGdr), the NODE/PHB warning, the
Grace C2C rule, NCCL_NET_GDR_READ, and left-out NICs (front-end, down, bonds) passed over with their reason
(issue 24 item 6).

Fixtures (our own, in the shapes of published ``nvidia-smi topo -m`` matrices):
- ``nvidia-smi/topo-tab-8gpu-pcie-nics-at-node-one-phb-2socket.txt``: 8 PCIe GPUs, no NVLink, one NIC per socket at
  NODE from its socket's GPUs (GPU7 at PHB). Shapes: NVIDIA/nccl#1343 (A40 node, NIC at NODE from some GPUs),
  deepseek-ai/DeepEP#60 (NODE to every NIC but one PIX), Mellanox/ngc_multinode_perf#129 (GB200: NODE only).
- ``nvidia-smi/topo-tab-gb200-tray-4gpu-nv18-nics-at-node-gpu-numa-id.txt`` with ``query-gpu-gb200-tray-x4.csv``:
  a GB200 tray, NICs at NODE on each Grace (NVIDIA/nccl#1579: GDR off by default on GH200/GB200 before C2C GDR).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.errors import ConfigError
from collscope.topo.detect import load_captures
from collscope.topo.gdr import gdr_decision, gdr_level, gpu_nics, gpu_on_c2c, nccl_path_type
from collscope.topo.node import build_node

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PCIE_NODE = FIXTURES / "nvidia-smi" / "topo-tab-8gpu-pcie-nics-at-node-one-phb-2socket.txt"
GB200 = [FIXTURES / "nvidia-smi" / "topo-tab-gb200-tray-4gpu-nv18-nics-at-node-gpu-numa-id.txt",
         FIXTURES / "nvidia-smi" / "query-gpu-gb200-tray-x4.csv"]
MIXED = FIXTURES / "nodes" / "h100-mixed-4ndr-4down-frontend"
BOND = FIXTURES / "topo" / "bond-h20-matrix-ibdev2netdev-ibstat-pasted.txt"


def show(*paths: Path) -> tuple[dict, str]:
    runner = CliRunner()
    args = [a for p in paths for a in ("--from", str(p))]
    as_json = runner.invoke(main, ["topo", "show", "--json", *args])
    assert as_json.exit_code == 0, as_json.output
    text = runner.invoke(main, ["topo", "show", *args])
    assert text.exit_code == 0, text.output
    return json.loads(as_json.stdout), text.stdout


def test_nics_at_node_and_phb_are_warned_with_the_variable_and_its_cost() -> None:
    doc, text = show(PCIE_NODE)
    warnings = doc["warnings"]
    (node0,) = [w for w in warnings if w.startswith("GPU0, GPU1, GPU2, GPU3 (4 of 8 GPUs)")]
    assert "nearest compute NIC (mlx5_0) at NODE (NCCL counts NODE as PHB)" in node0
    assert "GPUDirect RDMA is off" in node0 and "NCCL_NET_GDR_LEVEL=PHB turns it on" in node0
    assert "root complex" in node0
    assert any(w.startswith("GPU4, GPU5, GPU6 (3 of 8 GPUs): nearest compute NIC (mlx5_1) at NODE") for w in warnings)
    assert any(w.startswith("GPU7 (1 of 8 GPUs): nearest compute NIC (mlx5_1) at PHB,") for w in warnings)
    assert not any("SMP interconnect" in w for w in warnings)  # no GPU's nearest NIC is at SYS
    assert "   - GPU0, GPU1, GPU2, GPU3 (4 of 8 GPUs): nearest compute NIC (mlx5_0) at NODE" in text


def test_topo_show_gives_each_gpu_its_nic_path_gdr_why_and_variable() -> None:
    doc, text = show(PCIE_NODE)
    gpus = {g["name"]: g for g in doc["gpus"]}
    nic0 = gpus["GPU0"]["nic"]
    assert (nic0["nic"], nic0["path"], nic0["nccl_path"], nic0["gdr_level"], nic0["gdr"]) == \
        ("mlx5_0", "NODE", "PHB", "PXB", False)
    assert nic0["why"].startswith("NODE (NCCL's PHB) is beyond NCCL_NET_GDR_LEVEL's default PXB (unset)")
    assert nic0["variable"].startswith("NCCL_NET_GDR_LEVEL=PHB turns it on")
    assert gpus["GPU7"]["nic"]["path"] == "PHB" and gpus["GPU7"]["nic"]["nccl_path"] == "PHB"
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("  GPU") and "NUMA" in line}
    assert rows["GPU0"].endswith("mlx5_0          NODE  no (PHB)")
    assert rows["GPU7"].endswith("mlx5_1          PHB   no")
    assert "  GDR off for GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6: NODE (NCCL's PHB)" in text


def test_a_pix_nic_gets_gdr_and_no_warning() -> None:
    doc, text = show(BOND)
    for gpu in doc["gpus"]:
        assert gpu["nic"]["gdr"] is True and gpu["nic"]["path"] == "PIX", gpu
        assert gpu["nic"]["nic"] != "mlx5_bond_4"
    assert not any("GPUDirect RDMA is off" in w for w in doc["warnings"])
    assert "GDR on for GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7: PIX is within" in text


def test_grace_c2c_nic_at_node_gets_gdr_by_the_c2c_rule() -> None:
    doc, text = show(*GB200)
    for gpu in doc["gpus"]:
        nic = gpu["nic"]
        assert (nic["path"], nic["nccl_path"], nic["gdr"]) == ("NODE", "P2C", True), nic
        assert "NCCL_NET_GDR_C2C=1 by default" in nic["why"] and "NCCL >= 2.27" in nic["why"]
        assert "NCCL_NET_GDR_C2C=0 turns it off" in nic["variable"]
        assert "NCCL_NET_GDR_LEVEL=SYS" in nic["variable"]  # before 2.26 (NVIDIA/nccl#1579)
    assert not any("GPUDirect RDMA is off" in w for w in doc["warnings"])
    assert "yes (P2C)" in text
    # the same matrix without the GPU model: x86 rules, NODE is beyond PXB
    doc, _ = show(GB200[0])
    assert doc["gpus"][0]["nic"]["gdr"] is False
    assert any("at NODE (NCCL counts NODE as PHB)" in w for w in doc["warnings"])


def test_a_down_port_or_front_end_nic_nearer_than_the_compute_nic_is_passed_over_with_its_reason() -> None:
    node = build_node(load_captures([MIXED / "nvidia-smi-topo.txt", MIXED / "ibstat.txt", MIXED / "ibdev2netdev.txt"]))
    items = gpu_nics(node)
    gpu7 = items["GPU7"]
    assert gpu7.nics == ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3") and gpu7.decision is not None
    assert (gpu7.decision.path, gpu7.decision.gdr) == ("SYS", False)
    assert gpu7.decision.variable.startswith("NCCL_NET_GDR_LEVEL=SYS turns it on")
    passed = dict(gpu7.passed_over)
    assert passed["mlx5_8"].startswith("front-end: Ethernet 100 Gb/s")
    assert passed["mlx5_7"].startswith("down: port 1 Down")
    assert "PXN" in gpu7.pxn and "GPU0 (mlx5_0)" in gpu7.pxn  # its NVLink peers' NICs have GDR
    assert items["GPU0"].passed_over == () and items["GPU0"].pxn == ""


def test_a_front_end_bond_on_the_gpus_switch_is_never_its_nic(tmp_path: Path) -> None:
    lines = BOND.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):  # GPU4 moves: the 25 Gb/s bond on its switch, its compute bond farther
        cells = line.split("\t")
        if cells[0] == "GPU4":
            cells[11], cells[13] = "NODE", "PIX"
        elif cells[0] == "NIC2":
            cells[5] = "NODE"
        elif cells[0] == "NIC4":
            cells[5] = "PIX"
        lines[i] = "\t".join(cells)
    changed = tmp_path / "node.txt"
    changed.write_text("".join(lines))
    doc, text = show(changed)
    gpu4 = next(g for g in doc["gpus"] if g["name"] == "GPU4")["nic"]
    assert (gpu4["nics"], gpu4["path"], gpu4["gdr"]) == (["mlx5_bond_2", "mlx5_bond_3"], "NODE", False)
    (passed,) = gpu4["passed_over"]
    assert passed["name"] == "mlx5_bond_4"
    assert passed["why"].startswith("front-end: Ethernet 25 Gb/s, slower than the node's 200 Gb/s")
    assert "mlx5_bond_4: bonded ports (RoCE LAG), role unclear: PIX to GPU4" in passed["why"]
    assert "  GPU4: nearer NICs not its NIC: mlx5_bond_4 (front-end: Ethernet 25 Gb/s" in text


@pytest.mark.parametrize(("path", "level", "gdr"), [
    ("PIX", None, True), ("PXB", None, True), ("PHB", None, False), ("NODE", None, False), ("SYS", None, False),
    ("NODE", "PHB", True), ("PHB", "3", True), ("SYS", "PHB", False), ("SYS", "SYS", True), ("SYS", "5", True),
    ("SYS", "4", True), ("PIX", "LOC", False), ("PIX", "0", False), ("PXB", "PIX", False), ("PXB", "2", True),
])
def test_level_rule(path: str, level: str | None, gdr: bool) -> None:
    decision = gdr_decision("GPU0", "mlx5_0", path, level=level)
    assert decision is not None and decision.gdr is gdr


def test_level_names_and_legacy_numbers_as_nccl_reads_them() -> None:
    assert gdr_level(None) == "PXB"
    assert [gdr_level(v) for v in ("0", "1", "2", "3", "4", "5", "9")] == ["LOC", "PIX", "PXB", "PHB", "SYS", "SYS",
                                                                           "SYS"]
    assert gdr_level("P2C") == "P2C"
    with pytest.raises(ConfigError, match=r"'phb'.*LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS"):
        gdr_level("phb")  # NCCL matches the names exactly (strcmp)


def test_set_level_beyond_the_default_states_its_cost_and_nvlink_is_not_a_nic_path() -> None:
    on = gdr_decision("GPU0", "mlx5_0", "SYS", level="SYS")
    assert on is not None and on.gdr
    assert "unset it to get NCCL's default" in on.variable and "SMP interconnect" in on.variable
    assert gdr_decision("GPU0", "GPU1", "NV18") is None


def test_c2c_rule() -> None:
    assert nccl_path_type("NODE", c2c=True) == "P2C" and nccl_path_type("NODE") == "PHB"
    assert nccl_path_type("SYS", c2c=True) == "SYS"
    assert gpu_on_c2c({"model": "NVIDIA GH200 480GB"}) and gpu_on_c2c({"generation": "GB300"})
    assert gpu_on_c2c({"model": "NVIDIA H100"}, ["pcie", "c2c"])
    assert not gpu_on_c2c({"model": "NVIDIA H200"}) and not gpu_on_c2c({"model": "NVIDIA B200"})
    far = gdr_decision("GPU0", "mlx5_2", "SYS", c2c=True)
    assert far is not None and not far.gdr  # another Grace's NIC: SYS stays SYS
    set_pxb = gdr_decision("GPU0", "mlx5_0", "NODE", c2c=True, level="PXB")
    assert set_pxb is not None and not set_pxb.gdr  # NCCL >= 2.29: P2C ranks after PXB
    near = gdr_decision("GPU0", "mlx5_0", "PIX", c2c=True)
    assert near is not None and near.gdr and "GDR mode PCI" in near.why


def test_gdr_read_rule() -> None:
    def read(sm: int | None, peer: bool) -> str:
        decision = gdr_decision("GPU0", "mlx5_0", "PIX", sm=sm, nvlink_peer=peer)
        assert decision is not None
        return decision.read
    assert ": on (sm 90 >= 80)" in read(90, False)
    assert ": on (sm 70 < 80 but the GPU has an NVLink peer)" in read(70, True)
    assert ": off (sm 70 < 80 and no NVLink peer); NCCL_NET_GDR_READ=1" in read(70, False)
    assert "on for sm >= 80" in read(None, False)


GB10 = [FIXTURES / "nvidia-smi" / "topo-tab-gb10-1gpu-4roce-written.txt",
        FIXTURES / "nvidia-smi" / "query-gpu-gb10-written.csv"]
"""A GB10 node as the GPU table knows it, written for collscope (no published ``topo -m`` of a DGX Spark was found):
one GPU, the four RoCE devices of its ConnectX-7 (the names dgx-spark-playbooks' ibdev2netdev prints) at NODE."""


def test_gb10_has_no_gdr_at_any_level_and_the_advice_does_not_offer_a_variable() -> None:
    doc, text = show(*GB10)
    nic = doc["gpus"][0]["nic"]
    assert (nic["gdr"], nic["gdr_unsupported"]) == (False, True)
    assert "not supported" in nic["why"] and "unified" in nic["why"]
    assert nic["variable"].startswith("none:")
    assert not any("NCCL_NET_GDR_LEVEL=PHB turns it on" in w for w in doc["warnings"])
    assert any(w.startswith("GPU0: no GPUDirect RDMA, whatever NCCL_NET_GDR_LEVEL says") for w in doc["warnings"])
    assert "GDR off for GPU0: GB10" in text
    # the same matrix without the GPU model: NCCL's rule for a NODE NIC, with the variable
    doc, _ = show(GB10[0])
    assert doc["gpus"][0]["nic"]["gdr_unsupported"] is False
    assert doc["gpus"][0]["nic"]["variable"].startswith("NCCL_NET_GDR_LEVEL=PHB turns it on")


def test_the_platform_rule_wins_over_every_level_and_the_c2c_rule() -> None:
    for level in (None, "PHB", "SYS", "5"):
        for c2c in (False, True):
            d = gdr_decision("GPU0", "rocep1s0f0", "NODE", c2c=c2c, level=level, sm=121, no_gdr="no GDR here")
            assert d is not None and (d.gdr, d.unsupported, d.why) == (False, True, "no GDR here")
    assert gdr_decision("GPU0", "mlx5_0", "PIX", sm=90).unsupported is False
