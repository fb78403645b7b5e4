"""An NCCL_PROTO that names a function turns LL128 on for it without NCCL's default conditions (src/graph/tuning.cc:
``parseList`` sets every protocol of the function to 1 or 0, where LL128's default is 2, "only where tested": a
network path up to PXB/PXN, a path inside the node up to NVB, the GPUs the release lists). The model follows it,
and says that NCCL's source calls such runs untested. Before, `NCCL_PROTO=LL128` on a PCIe box read "the settings
leave NCCL nothing it can run here"."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_settings import model_settings
from collscope.analysis.model_types import LinkParams
from collscope.analysis.params import link_params
from collscope.analysis.predict import predict
from collscope.cli import main
from collscope.topo.load import load_topology
from tests.analysis.test_channel_limits import _sweep

POLARIS = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / \
    "topo-tab-4gpu-nv4-2nic-phb-one-gpu-each-4numa.txt"


@pytest.mark.parametrize(("value", "op", "forced"), [
    ("LL128", "all_reduce", True),
    ("Simple,LL128", "all_gather", True),
    ("^LL", "all_reduce", True),  # parseList sets the others to 1: LL128 on, not at its default
    ("^LL128", "all_reduce", False),
    ("Simple", "all_reduce", False),
    ("allreduce:LL128", "all_gather", False),  # the entry does not name AllGather: its LL128 stays at the default
    ("allreduce:LL128", "all_reduce", True),
])
def test_which_values_force_ll128(value: str, op: str, forced: bool) -> None:
    assert model_settings({"NCCL_PROTO": value}, op).ll128_forced is forced
    assert not model_settings({}, op).ll128_forced


def _protos(result: object) -> set[str]:
    return {p.proto for p in result.predictions if p.model == "nccl"}  # type: ignore[attr-defined]


def test_a_pcie_box_runs_forced_ll128() -> None:
    default = predict("all_reduce", gpu="L40S", nranks=8, nnodes=1, sizes=[1 << 20])
    assert "LL128" not in _protos(default)
    forced = predict("all_reduce", gpu="L40S", nranks=8, nnodes=1, sizes=[1 << 20],
                     settings={"NCCL_PROTO": "LL128"})
    assert "LL128" in _protos(forced)
    assert forced.nccl_choice[0].proto == "LL128"
    note = next(n for n in forced.notes if "turns LL128 on" in n)
    assert "the path inside the node is PXB, beyond NVB" in note and "silent data corruption" in note


def test_nics_beyond_pxb_run_forced_ll128_across_nodes() -> None:
    result = predict("all_reduce", topology=load_topology([POLARIS], gpu="A100"), nranks=8, nnodes=2,
                     nic_gbit=200, sizes=[1 << 20], settings={"NCCL_PROTO": "LL128,Simple"})
    assert "LL128" in _protos(result)
    assert any("the network path is PHB, beyond PXB on sm 80" in n for n in result.notes)


def test_forcing_ll128_where_the_default_has_it_says_nothing() -> None:
    result = predict("all_reduce", gpu="H100", nranks=8, nnodes=1, sizes=[1 << 20],
                     settings={"NCCL_PROTO": "LL128"})
    assert not any("turns LL128 on" in n for n in result.notes)


def test_predict_cli_no_longer_refuses_forced_ll128() -> None:
    out = CliRunner().invoke(main, ["predict", "--gpu", "L40S", "--op", "all_reduce", "--nranks", "8", "--nnodes",
                                    "1", "--sizes", "1M", "--setting", "NCCL_PROTO=LL128"])
    assert out.exit_code == 0, out.output
    assert "NCCL choice: Ring/LL128" in out.output or "NCCL choice: Tree/LL128" in out.output


def _l40s(nranks: int, nnodes: int) -> LinkParams:
    return link_params(None, gpu="L40S", nranks=nranks, nnodes=nnodes)


def test_analyze_models_a_forced_ll128_configuration_and_says_so(tmp_path: Path) -> None:
    root = _sweep(tmp_path / "r", {
        "default-r0": ({}, 20.0),
        "ll128-r0": ({"NCCL_PROTO": "LL128"}, 20.0),
    })
    result = analyze(load_results([root]), params=_l40s)
    sizes = result.sizes.set_index(["config", "size_bytes"])
    assert sizes.xs("NCCL_PROTO=LL128")["model"].str.endswith("/LL128").all()
    notes = [n for n in result.notes if "turns LL128 on" in n]
    assert len(notes) == 1 and notes[0].startswith("NCCL_PROTO=LL128: NCCL_PROTO=LL128 turns LL128 on")
