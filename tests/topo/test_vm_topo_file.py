"""NCCL topology files as NCCL reads them (issue 24 item 3): a provider's NCCL_TOPO_FILE has no <nvlink>, NCCL adds
the NVLinks it finds through NVML at run time. collscope says "NVLink not described", models them from the GPU
table, and neither says "none" nor warns that the GPUs talk over PCIe.

Fixtures (written for these tests in the shape of Azure/azhpc-images topology/ndv5-topo.xml: virtual PCI bridges of
domain ffff, one GPU and one NIC under each, no <nvlink>):
  vm-h100-8gpu-gpu-sm-no-nvlink-topo-file.xml  GPUs carry <gpu dev sm=90 rank gdr> (the GPU is named by its sm)
  vm-8gpu-pci-only-no-nvlink-topo-file.xml     no <gpu> at all, like ndv5-topo.xml (the GPU is not named)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-xml"
VM_SM = FIXTURES / "vm-h100-8gpu-gpu-sm-no-nvlink-topo-file.xml"
VM_PCI_ONLY = FIXTURES / "vm-8gpu-pci-only-no-nvlink-topo-file.xml"
CORPUS_NDV5 = Path("/work/shared/corpus/nccl-topo-xml/azure-ndv5-h100-topo-nccl_topo_file.xml.txt")


def run(*args: str):
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def nccl_choice_busbw(*args: str) -> float:
    code, out = run("predict", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1", "--sizes", "1G", "--json",
                    *args)
    assert code == 0, out
    doc = json.loads(out)
    rows = [p for p in doc["predictions"] if p["model"] == "nccl"]
    assert rows, doc
    return max(p["busbw_gbps"] for p in rows)


def test_vm_file_predicts_the_gpus_single_node_figure():
    table = nccl_choice_busbw("--gpu", "H100")
    from_file = nccl_choice_busbw("--topo", str(VM_SM))
    assert from_file == pytest.approx(table, rel=0.03)
    assert from_file > 300  # NVLink, not the PCIe bottleneck (~40 GB/s) the file's bridges would give


def test_vm_file_without_gpu_elements_with_gpu_option():
    assert nccl_choice_busbw("--topo", str(VM_PCI_ONLY), "--gpu", "H100") == pytest.approx(
        nccl_choice_busbw("--gpu", "H100"), rel=0.03)


def test_vm_file_without_gpu_elements_and_without_gpu_option_is_refused_with_the_reason():
    code, out = run("predict", "--topo", str(VM_PCI_ONLY), "--op", "all_reduce", "--nranks", "8", "--nnodes", "1")
    assert code == 2
    assert "NVLink not described" in out and "--gpu" in out and "Traceback" not in out


def test_topo_show_says_not_described_never_none_nor_pcie():
    code, out = run("topo", "show", "--from", str(VM_SM))
    assert code == 0, out
    assert "NVLink not described in the topology file: NCCL detects it at run time through NVML" in out
    assert "NVLink: none" not in out
    assert "talk over PCIe" not in out
    assert re.search(r"NVLink per GPU to the NVSwitch: NV18, 450 GB/s", out)


def test_topo_show_json_marks_the_edges_as_not_described():
    code, out = run("topo", "show", "--from", str(VM_SM), "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert any("NVLink not described" in w for w in doc["warnings"])
    assert not any("PCIe" in w and "NVLink" in w and "no NVLink" in w for w in doc["warnings"])


def test_pci_only_file_says_not_described_and_asks_for_the_gpu():
    code, out = run("topo", "show", "--from", str(VM_PCI_ONLY))
    assert code == 0, out
    assert "NVLink not described" in out and "pass --gpu NAME" in out
    assert "talk over PCIe" not in out and "NVLink: none" not in out


def test_an_nccl_dump_without_nvlink_stays_without_nvlink(tmp_path):
    """NCCL wrote its own dump: vendor/device on every pci, real bus ids; no <nvlink> there means none."""
    text = VM_SM.read_text()
    text = re.sub(r'busid="ffff:ff:([0-9a-f]{2})\.0"', r'busid="0000:\1:00.0" vendor="0x1000" device="0xc030"', text)
    text = text.replace('class="0x030200"', 'class="0x030200" vendor="0x10de" device="0x26b9"')
    text = text.replace('sm="90"', 'sm="89"').replace('class="0x020700"', 'class="0x020700" vendor="0x15b3" '
                                                                           'device="0x1021"')
    dump = tmp_path / "l40s-dump.xml"
    dump.write_text(text)
    code, out = run("topo", "show", "--from", str(dump))
    assert code == 0, out
    assert "NVLink not described" not in out
    assert "NVLink: none" in out


def test_a_dump_shape_with_sm90_and_no_nvlink_is_not_modelled_as_nvswitch(tmp_path):
    text = re.sub(r'busid="ffff:ff:([0-9a-f]{2})\.0"', r'busid="0000:\1:00.0"', VM_SM.read_text())
    text = text.replace('class="0x030200"', 'class="0x030200" vendor="0x10de" device="0x2331"')
    dump = tmp_path / "h100-pcie-dump.xml"
    dump.write_text(text)
    code, out = run("topo", "show", "--from", str(dump))
    assert code == 0 and "NVLink not described" not in out and "NVLink: none" in out


@pytest.mark.skipif(not CORPUS_NDV5.is_file(), reason="shared corpus (Azure ndv5-topo.xml) absent")
def test_corpus_azure_ndv5_file(tmp_path):
    lines = CORPUS_NDV5.read_text().splitlines(keepends=True)
    xml = tmp_path / "ndv5-topo.xml"
    xml.write_text("".join(line for line in lines if not line.startswith("# ")))
    assert nccl_choice_busbw("--topo", str(xml), "--gpu", "NVIDIA H100 80GB HBM3") == pytest.approx(
        nccl_choice_busbw("--gpu", "H100"), rel=0.03)
    code, out = run("topo", "show", "--from", str(xml))
    assert code == 0 and "NVLink not described" in out and "talk over PCIe" not in out
