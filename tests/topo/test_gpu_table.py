"""The GPU and system tables (collscope/topo/gpus.py, unmodelled_gpus.py, systems.py): the names nvidia-smi / nccl-tests
/ rccl-tests print map to their rows, each row's NCCL constant is NCCL's for its sm, AMD Instinct GPUs are refused
with the reason, an unknown name lists the known ones, and the systems hold their NVLink domains (issue 24 item 2).

The GPU strings are the forms published outputs print: "NVIDIA GB300" (nccl-tests "Using devices" lines of GKE A4X
Max runs), "NVIDIA B300 SXM6 AC" (device name of B300 VMs, sm_103), "NVIDIA H100 80GB HBM3" (NVIDIA/nccl-tests#309),
"NVIDIA B200" (NVIDIA/nccl-tests#389), "NVIDIA A100-SXM4-80GB" (crickett-hpe/hpc-ai-envs#30), "AMD Instinct MI355X
288GB HBM3e" and "AMD Instinct MI300X" (rocm-smi / rccl-tests device names).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.errors import ConfigError
from collscope.topo.gpus import GENERATIONS, gpu_generation
from collscope.topo.nccl_xml.rates import nvlink_gbps_per_link
from collscope.topo.systems import SYSTEMS, system_shape
from collscope.topo.unmodelled_gpus import unknown_gpu_message, unmodelled_gpu


@pytest.mark.parametrize(("printed", "row", "sm", "links"), [
    ("NVIDIA GB300", "GB300", 103, 18),
    ("NVIDIA B300 SXM6 AC", "B300", 103, 18),
    ("NVIDIA GB200", "GB200", 100, 18),
    ("NVIDIA B200", "B200", 100, 18),
    ("NVIDIA H200", "H200", 90, 18),
    ("NVIDIA H100 80GB HBM3", "H100", 90, 18),
    ("NVIDIA H800", "H800", 90, 8),
    ("NVIDIA H20", "H20", 90, 18),
    ("NVIDIA A100-SXM4-80GB", "A100", 80, 12),
    ("NVIDIA A800-SXM4-80GB", "A800", 80, 8),
    ("NVIDIA H100 PCIe", "H100 PCIe", 90, 12),
    ("NVIDIA H100 NVL", "H100 NVL", 90, 12),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 12),
    ("NVIDIA L40S", "L40S", 89, 0),
    ("NVIDIA GeForce RTX 4090", "RTX 4090", 89, 0),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000", 120, 0),
    ("NVIDIA RTX 6000 Ada Generation", "RTX 6000", 89, 0),
    ("NVIDIA GH200 480GB", "GH200", 90, 18),
    ("NVIDIA GB10", "GB10", 121, 0),  # DGX Spark (NVIDIA/dgx-spark-playbooks issues 25 and 102, PR 103)
    ("NVIDIA A10G", "A10G", 86, 0),  # AWS g5.48xlarge (NVIDIA/nccl#1298)
    ("NVIDIA A10", "A10", 86, 0),
    ("NVIDIA A40", "A40", 86, 4),  # nvidia-smi's name column prints "A40" (NVIDIA/nccl-tests#74)
    ("NVIDIA RTX A5000", "RTX A5000", 86, 4),  # 4 in one host (NVIDIA/nccl#757)
    ("NVIDIA RTX A4000", "RTX A4000", 86, 0),
    ("Quadro RTX 6000", "Quadro RTX 6000", 75, 2),  # Turing, not the Ada "RTX 6000"
    ("Quadro RTX 8000", "Quadro RTX 8000", 75, 2),
    ("NVIDIA TITAN RTX", "TITAN RTX", 75, 2),
    ("NVIDIA GeForce RTX 2080 Ti", "RTX 2080 Ti", 75, 2),  # two on a bridge (NVIDIA/nccl-tests#44)
    ("Tesla V100-SXM2-32GB", "V100", 70, 6),  # DGX-1: hybrid cube mesh
    ("Tesla V100-SXM3-32GB", "V100 SXM3", 70, 6),  # DGX-2: NVSwitch (shared/corpus broadcast_perf-dgx2-v100)
    ("Tesla V100-PCIE-32GB", "V100 PCIe", 70, 0),  # the PCIe card has no NVLink
    ("Tesla V100S-PCIE-32GB", "V100 PCIe", 70, 0),
    ("Tesla P100-PCIE-16GB", "P100 PCIe", 60, 0),
    ("Tesla P100-SXM2-16GB", "P100", 60, 4),
])
def test_printed_names_map_to_their_rows(printed, row, sm, links):
    gen = gpu_generation(printed)
    assert gen is not None and gen.name == row
    assert (gen.sm, gen.nvlink_links) == (sm, links)


def test_a10_is_not_a100_and_a40_is_not_rtx_a4000():
    assert gpu_generation("NVIDIA A100-SXM4-80GB").name == "A100"
    assert gpu_generation("NVIDIA RTX A4000").nvlink_fabric == "none"  # not A40's bridge
    assert gpu_generation("NVIDIA A40").nvlink_fabric == "bridge" and gpu_generation("NVIDIA A10G").pcie_gen == 4


def test_short_names_and_sm_103():
    assert gpu_generation("B300").name == "B300"  # --gpu B300
    assert gpu_generation("GB300").name == "GB300"  # not B300: the G before it is part of the name
    assert gpu_generation(sm=103).name == "B300"


def test_every_row_carries_ncclS_constant_for_its_sm():
    # NCCL src/graph/topo.h ncclTopoNVLinkBw: one constant per sm range, the same function nccl_xml.rates mirrors
    for gen in GENERATIONS:
        if gen.nvlink_gen is not None:
            assert gen.nccl_nvlink_link_gbps == nvlink_gbps_per_link(gen.sm), gen.name
    assert gpu_generation("NVIDIA GB300").nccl_nvlink_link_gbps == 40.1  # SM100_NVLINK_BW covers sm 103


def test_pcie_cards_are_not_given_an_nvswitch():
    for name in ("NVIDIA H100 PCIe", "NVIDIA A100 80GB PCIe", "NVIDIA H200 NVL"):
        gen = gpu_generation(name)
        assert gen.nvlink_fabric == "bridge" and gen.pcie_gen >= 4


def test_bridged_pcie_cards_use_nvlink_for_their_pair_only():
    from collscope.analysis.params import link_params

    pair = link_params(None, gpu="NVIDIA H100 PCIe", nranks=2, nnodes=1)
    assert pair.intra_link == "nvlink" and "bridge" in pair.source
    box = link_params(None, gpu="NVIDIA H100 PCIe", nranks=8, nnodes=1)
    assert box.intra_link == "pcie" and "pairs only" in box.source
    assert link_params(None, gpu="NVIDIA H100 80GB HBM3", nranks=8, nnodes=1).intra_link == "nvlink"
    assert link_params(None, gpu="NVIDIA A40", nranks=2, nnodes=1).intra_link == "nvlink"  # its bridged pair
    assert link_params(None, gpu="NVIDIA A10G", nranks=8, nnodes=1).intra_link == "pcie"


@pytest.mark.parametrize(("printed", "row", "per_link"), [
    ("AMD Instinct MI300X", "MI300X", 64.0),
    ("AMD Instinct MI325X", "MI325X", 64.0),
    ("AMD Instinct MI355X 288GB HBM3e", "MI355X", 76.8),
])
def test_amd_instinct_is_known_and_refused_with_the_reason(printed, row, per_link):
    assert gpu_generation(printed) is None
    amd = unmodelled_gpu(printed)
    assert amd is not None and amd.name == row and amd.xgmi_links == 7 and amd.xgmi_link_gbps == per_link
    message = unknown_gpu_message(printed)
    assert "unknown GPU" not in message and "known but not modelled" in message
    assert "RCCL" in message and "--alpha-us" in message


def test_volta_and_pascal_by_form_factor():
    assert gpu_generation("Tesla V100-SXM3-32GB").nvlink_fabric == "nvswitch"  # 16 GPUs of a DGX-2, all joined
    assert gpu_generation("Tesla V100-SXM2-16GB").nvlink_fabric == "mesh"
    from collscope.analysis.params import link_params

    assert link_params(None, gpu="Tesla V100-PCIE-32GB", nranks=4, nnodes=1).intra_link == "pcie"
    assert link_params(None, gpu="Tesla V100-SXM3-32GB", nranks=16, nnodes=1).intra_link == "nvlink"


def test_turing_cards_are_bridged_pairs_at_pcie_gen3_with_ncclS_sm70_constant():
    quadro = gpu_generation("Quadro RTX 6000")
    assert (quadro.nvlink_fabric, quadro.pcie_gen, quadro.nccl_nvlink_link_gbps) == ("bridge", 3, 20.0)
    assert gpu_generation("NVIDIA RTX 6000 Ada Generation").sm == 89  # the Ada card keeps its row
    assert gpu_generation("Quadro RTX 5000").nvlink_links == 1  # a 50 GB/s bridge
    from collscope.analysis.params import link_params

    assert link_params(None, gpu="Quadro RTX 8000", nranks=2, nnodes=1).intra_link == "nvlink"
    assert link_params(None, gpu="Quadro RTX 8000", nranks=4, nnodes=1).intra_link == "pcie"


def test_the_drivers_placeholder_name_says_it_names_no_gpu():
    message = unknown_gpu_message("NVIDIA Graphics Device")
    assert "placeholder" in message and "--gpu NAME" in message and "GB200" in message
    assert not message.startswith("unknown GPU")
    assert gpu_generation("NVIDIA Graphics Device") is None  # never guessed from the geometry
    assert unknown_gpu_message("NVIDIA Graphics Device X1").startswith("unknown GPU")  # only the exact placeholder


def test_mi250x_gcds_are_known_and_refused_for_their_uneven_links():
    """rocm-smi and rccl-tests name a Frontier/LUMI GCD 'AMD Instinct MI250X / MI250' (or '... MI250X')."""
    for printed in ("AMD Instinct MI250X / MI250", "AMD Instinct MI250X"):
        amd = unmodelled_gpu(printed)
        assert amd is not None and (amd.name, amd.arch, amd.rccl_xgmi_link_gbps) == ("MI250X", "gfx90a", 36.0)
    assert unmodelled_gpu("AMD Instinct MI250").name == "MI250"
    message = unknown_gpu_message("AMD Instinct MI250X / MI250")
    assert "known but not modelled" in message and "not a full mesh" in message and "--bw-gbps" in message


def test_unknown_name_lists_the_known_ones():
    message = unknown_gpu_message("NVIDIA Z9000")
    assert message.startswith("unknown GPU 'NVIDIA Z9000'; known: ")
    for name in ("GB300", "B300", "H20", "A800", "L40S", "MI300X (not modelled)"):
        assert name in message


def _predict(*args: str):
    return CliRunner().invoke(main, ["predict", "--op", "all_reduce", "--sizes", "1G", *args])


def test_predict_knows_gb300_and_b300():
    for gpu in ("NVIDIA GB300", "NVIDIA B300 SXM6 AC"):
        result = _predict("--gpu", gpu, "--nranks", "8", "--nnodes", "1" if "B300" in gpu else "2",
                          *(("--nvl-domain", "8") if "GB300" in gpu else ()))
        assert result.exit_code == 0, result.output
        assert "unknown GPU" not in result.output


def test_predict_refuses_amd_with_the_reason_and_exit_2():
    result = _predict("--gpu", "AMD Instinct MI300X", "--nranks", "8", "--nnodes", "1")
    assert result.exit_code == 2
    assert "known but not modelled" in result.output and "Traceback" not in result.output


def test_predict_unknown_gpu_exit_2_with_the_list():
    result = _predict("--gpu", "NVIDIA Z9000", "--nranks", "8", "--nnodes", "1")
    assert result.exit_code == 2 and "known: " in result.output and "GB300" in result.output


def test_systems():
    rack = system_shape("GB200 NVL72")
    assert (rack.gpus_per_node, rack.nvl_domain, rack.mnnvl) == (4, 72, True)
    assert rack.nvl_domain // rack.gpus_per_node == 18  # trays
    assert system_shape("gb300-nvl72").nvl_domain == 72
    nvl4 = system_shape("GB200 NVL4")
    assert (nvl4.gpus_per_node, nvl4.nvl_domain, nvl4.mnnvl) == (4, 4, False)
    assert system_shape("HGX H100").nvl_domain == 8
    assert system_shape("PCIe box").nvl_domain == 1
    assert system_shape("no such system") is None
    assert all(gpu_generation(s.gpu) is not None for s in SYSTEMS)


def test_dgx_spark_gb10_is_one_gpu_per_system_and_its_nic_fact_is_in_the_table():
    assert gpu_generation("GB10").name == "GB10" and gpu_generation(sm=121).name == "GB10"
    assert gpu_generation("NVIDIA GB100") is None  # GB10 is not a prefix match of a longer name
    spark = system_shape("dgx spark")
    assert (spark.gpu, spark.gpus_per_node, spark.nvl_domain, spark.mnnvl) == ("GB10", 1, 1, False)
    assert "PCIe Gen5 x4" in spark.nic_note and "NCCL_IB_HCA" in spark.nic_note


def test_predict_gb10_across_systems_asks_for_the_nics_with_the_spark_fact():
    refused = _predict("--gpu", "NVIDIA GB10", "--nranks", "2", "--nnodes", "2")
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert "--nic-gbit" in refused.output and "--nics-per-node 2" in refused.output
    assert "Rate: 200" in refused.output  # what ibstat prints there, and why it is not the rate to give
    result = CliRunner().invoke(main, ["predict", "--gpu", "NVIDIA GB10", "--op", "all_gather", "--nranks", "2",
                                       "--nnodes", "2", "--sizes", "16G", "--nic-gbit", "100", "--nics-per-node",
                                       "2", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert any("NCCL_IB_HCA" in c for c in doc["params"]["caveats"])
    choice = doc["nccl_choice"][0]
    assert 20.0 <= choice["expected_busbw_gbps"] <= 25.0  # the playbook's 20-24 GB/s with both halves



def test_unknown_gpu_in_the_topology_loader_uses_the_same_message():
    from collscope.topo.node import NodeCaptures, build_node

    with pytest.raises(ConfigError, match="known but not modelled"):
        build_node(NodeCaptures(host="h"), gpu="AMD Instinct MI300X")


def test_a_captured_spark_is_modelled_at_its_endpoints_not_at_ibstats_port_rate():
    """ibstat on a GB10 prints 'Rate: 200' for each RoCE device (geerlingguy/sbc-reviews#92, a Dell GB10); the
    fixture is written for collscope in that shape. Each device is a PCIe Gen5 x4 endpoint: the table caps it."""
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    topo = [fixtures / "nvidia-smi" / "topo-tab-gb10-1gpu-4roce-written.txt",
            fixtures / "nvidia-smi" / "query-gpu-gb10-written.csv",
            fixtures / "infiniband" / "ibstat-gb10-dgx-spark-4roce-2active-written.txt"]
    args = [a for p in topo for a in ("--topo", str(p))]
    result = CliRunner().invoke(main, ["predict", *args, "--op", "all_gather", "--nranks", "2", "--nnodes", "2",
                                       "--sizes", "16G", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert "2 active NIC(s) at 200 Gb/s" in doc["params"]["source"]
    assert "each taken at 100 Gb/s" in doc["params"]["source"]
    assert 20.0 <= doc["nccl_choice"][0]["expected_busbw_gbps"] <= 25.0  # not the 48 GB/s of 2 x 200 Gb/s
    given = CliRunner().invoke(main, ["predict", *args, "--op", "all_gather", "--nranks", "2", "--nnodes", "2",
                                      "--sizes", "16G", "--nic-gbit", "200", "--nics-per-node", "2", "--json"])
    assert json.loads(given.output)["nccl_choice"][0]["expected_busbw_gbps"] > 40.0  # --nic-gbit is taken as given
