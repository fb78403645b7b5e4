"""The models across nodes read where NCCL's graphs leave a node from the capture (collscope.topo.crossing):

- ``--nic-gbit`` gives the NICs' rate; their number is the capture's (the NICs the GPUs reach first), not one per GPU;
- NICs at PHB or SYS from the GPUs turn LL128 off across nodes, as NCCL's tuning does (typeInter beyond PXB before
  Hopper, beyond PXN from Hopper on), and the notes say GPUDirect RDMA is off at NCCL's default level;
- an HGX node (one NIC at PIX per GPU) keeps LL128, and a model without a capture stays as it was (PIX assumed).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from click.testing import CliRunner

from collscope.analysis.nccl_model.model import nccl_predictions
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.params import link_params
from collscope.analysis.predict import predict
from collscope.cli import main
from collscope.topo.load import load_topology
from collscope.topo.samples import sample_path

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
POLARIS = SMI / "topo-tab-4gpu-nv4-2nic-phb-one-gpu-each-4numa.txt"
EVEN_PIX = SMI / "topo-tab-8gpu-nv18-4nic-pix-even-gpus-2nic-sys.txt"


def _protos(result: object) -> set[str]:
    return {p.proto for p in result.predictions if p.model == "nccl"}  # type: ignore[attr-defined]


def test_the_capture_counts_the_nics_and_sets_the_crossing() -> None:
    params = link_params(load_topology([POLARIS], gpu="A100"), nranks=8, nnodes=2, nic_gbit=200)
    assert params.nics_per_node == 2  # the capture's two NICs, not one per GPU (4)
    assert params.inter_bw_gbps == 50.0
    assert params.nic_path == "PHB"
    assert "2 NIC(s) per node, the ones the GPUs reach first in the capture (mlx5_0, mlx5_1)" in params.source
    caveats = " ".join(params.caveats)
    assert "NCCL enables LL128 across nodes only up to PXB on A100" in caveats
    assert "GPUDirect RDMA is off for GPU1, GPU3" in caveats


def test_an_explicit_nic_count_still_wins() -> None:
    params = link_params(load_topology([POLARIS], gpu="A100"), nranks=8, nnodes=2, nic_gbit=200, nics_per_node=4)
    assert params.nics_per_node == 4 and params.nic_path == "PHB"


def test_nics_beyond_pxb_leave_nccl_no_ll128_across_nodes() -> None:
    far = predict("all_reduce", topology=load_topology([POLARIS], gpu="A100"), nranks=8, nnodes=2, nic_gbit=200,
                  sizes=[1 << 20, 16 << 20])
    assert "LL128" not in _protos(far)
    # the same GPUs with the NICs at PIX (no capture: NCCL's HGX layout assumed) have it
    near = predict("all_reduce", gpu="A100", nranks=8, nnodes=2, nic_gbit=200, sizes=[1 << 20, 16 << 20])
    assert "LL128" in _protos(near)
    # one node: no crossing, so nothing changes
    one = link_params(load_topology([POLARIS], gpu="A100"), nranks=4, nnodes=1)
    assert one.nic_path is None and not any("LL128" in c for c in one.caveats)


def test_pix_nics_and_pxn_keep_ll128() -> None:
    hgx = link_params(load_topology([sample_path()], gpu="H100"), nranks=16, nnodes=2)
    assert hgx.nic_path == "PIX" and not any("LL128" in c or "GPUDirect" in c for c in hgx.caveats)
    even = link_params(load_topology([EVEN_PIX], gpu="H100"), nranks=16, nnodes=2, nic_gbit=400)
    assert even.nic_path == "PIX" and even.nics_per_node == 4
    result = predict("all_reduce", topology=load_topology([EVEN_PIX], gpu="H100"), nranks=16, nnodes=2,
                     nic_gbit=400, sizes=[1 << 20])
    assert "LL128" in _protos(result)


def test_hopper_keeps_ll128_up_to_pxn_and_p2c_was_phb_before_2_27() -> None:
    """tuning.cc: LL128 across nodes up to PXN on sm >= 90 (P2C, a Grace GPU's NIC on its CPU, is below PXN); the
    2.19 tables (2.19-2.26) had no P2C: such a path was PHB, beyond the limit."""
    base = link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=400)
    for path, version, ll128 in [("PXN", "2.30", True), ("P2C", "2.30", True), ("P2C", "2.19", False),
                                 ("PHB", "2.30", False), ("SYS", "2.30", False)]:
        inputs = graph_inputs_from_topology(dataclasses.replace(base, nic_path=path))
        protos = {p.proto for p in nccl_predictions(inputs, "all_reduce", [1 << 20], version=version)}
        assert ("LL128" in protos) is ll128, (path, version)


def test_predict_cli_says_why_ll128_is_missing(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["predict", "--topo", str(POLARIS), "--gpu", "A100", "--op", "all_reduce",
                                       "--nranks", "8", "--nnodes", "2", "--nic-gbit", "200", "--sizes", "1M"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "NCCL's graphs cross nodes at PHB (GPU1, GPU3 at PHB to mlx5_0, mlx5_1" in out
    assert "its choice across nodes has no LL128 here" in out
    assert "Ring/LL128" not in out and "Tree/LL128" not in out
