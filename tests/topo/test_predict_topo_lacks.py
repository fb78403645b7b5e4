"""`predict --topo DIR` on captures without GPUs or InfiniBand says what the captures lack (issue 26 item 7), not
"pass --topo PATH" to a user who passed one. The cluster is what `topo collect` writes on the simulated cluster's
nodes (tests/topo/test_cluster_notes_once.py builds the same)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from collscope.cli import main
from tests.topo.test_cluster_notes_once import _node


def _predict(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["predict", "--op", "all_reduce", "--nranks", "8", "--nnodes", "4", *args])
    return result.exit_code, result.output


def test_a_cluster_without_gpus_says_so(tmp_path: Path) -> None:
    for host in ("node1", "node2", "node3", "node4"):
        _node(tmp_path, host, ["nvidia-smi", "ibstat", "ibdev2netdev"])
    code, out = _predict("--topo", str(tmp_path))
    assert code == 2, out
    assert f"the captures in {tmp_path} (4 nodes) have no GPUs (nvidia-smi not found or failing on all 4 nodes)" \
        in out, out
    assert "pass --gpu NAME" in out and "pass --topo PATH" not in out, out
    # with a GPU named, the NIC rates are what the captures lack
    code, out = _predict("--topo", str(tmp_path), "--gpu", "H100")
    assert code == 2, out
    assert "have no NIC rates (ibstat not found or failing on all 4 nodes)" in out and "--nic-gbit R" in out, out
    assert "--topo with ibstat" not in out, out
    code, out = _predict("--topo", str(tmp_path), "--gpu", "H100", "--nic-gbit", "400")
    assert code == 0, out


def test_one_node_without_gpus_names_its_captures(tmp_path: Path) -> None:
    _node(tmp_path, "node1", ["nvidia-smi"])
    code, out = _predict("--topo", str(tmp_path / "node1"))
    assert code == 2 and "the topology of node1 (" in out and "has no GPUs (no nvidia-smi capture" in out, out
    assert "pass --topo PATH" not in out, out
