"""``mlx5_bond_*`` devices named as bonded ports: RoCE LAG compute NIC or front-end/storage bond, from the rate and
the GPU distance, the rule and its evidence in the output (issue 23 item 4).

Fixture ``tests/fixtures/topo/bond-h20-matrix-ibdev2netdev-ibstat-pasted.txt`` (our own): an 8-GPU node whose
``nvidia-smi topo -m`` NIC Legend names ``NIC0: mlx5_bond_0`` .. ``NIC4: mlx5_bond_4``; mlx5_bond_0-3 are 200 Gb/s
RoCE bonds each PIX to a GPU pair, mlx5_bond_4 a 25 Gb/s bond at NODE/SYS. Shapes seen in public outputs:
sgl-project/sglang#3685 (NIC Legend ``NIC34: mlx5_bond_1`` .. ``mlx5_bond_8``, PIX to GPUs), perplexityai/pplx-garden#2
(ibstat ``CA 'mlx5_bond_0'`` Rate 200, Link layer Ethernet), stepfun-ai/StepMesh#15 (``mlx5_bond_0 port 1 ==> bond0
(Up)``, a ConnectX-6 Lx bond beside ConnectX-7 IB ports), deepseek-ai/DeepEP#671 and NVIDIA/nccl#1015 (ibstat gives
one member port's rate).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from collscope.cli import main
from collscope.topo.bonded import bond_statement, is_bonded

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topo"
BOND = FIXTURES / "bond-h20-matrix-ibdev2netdev-ibstat-pasted.txt"


def show(path: Path) -> tuple[dict[str, dict], str]:
    runner = CliRunner()
    as_json = runner.invoke(main, ["topo", "show", "--json", "--from", str(path)])
    assert as_json.exit_code == 0, as_json.output
    text = runner.invoke(main, ["topo", "show", "--from", str(path)])
    assert text.exit_code == 0, text.output
    return {n["name"]: n for n in json.loads(as_json.stdout)["nics"]}, text.stdout


def test_compute_lag_and_front_end_bond_with_their_evidence() -> None:
    nics, text = show(BOND)
    for i, gpus in enumerate(["GPU0, GPU1", "GPU2, GPU3", "GPU4, GPU5", "GPU6, GPU7"]):
        bond = nics[f"mlx5_bond_{i}"]["bond"]
        assert bond.startswith(f"mlx5_bond_{i}: RoCE LAG compute NIC (bonded ports): PIX to {gpus}; "
                               "200 Gb/s, the node's fastest"), bond
        assert "one member port's" in bond
        assert nics[f"mlx5_bond_{i}"]["role"] == "compute"
    front = nics["mlx5_bond_4"]
    assert front["bond"] == ("mlx5_bond_4: front-end/storage bond (bonded ports): no GPU nearer than NODE "
                             "(GPU4, GPU5, GPU6, GPU7); 25 Gb/s, below the node's fastest 200 Gb/s")
    assert front["role"] == "front-end"
    assert f"  bonded: {front['bond']}" in text.splitlines()
    assert text.count("  bonded: ") == 5


def test_far_but_fastest_bond_is_unclear_and_states_the_rule(tmp_path: Path) -> None:
    changed = tmp_path / "node.txt"
    changed.write_text(BOND.read_text().replace("\t\tRate: 25\n", "\t\tRate: 200\n"))
    nics, _ = show(changed)
    bond = nics["mlx5_bond_4"]["bond"]
    assert bond.startswith("mlx5_bond_4: bonded ports (RoCE LAG), role unclear: NODE to GPU4, GPU5, GPU6, GPU7; "
                           "200 Gb/s, the node's fastest"), bond
    assert "rule: PIX/PXB to a GPU and the node's fastest rate = RoCE LAG compute NIC" in bond
    assert nics["mlx5_bond_4"]["role"] == "compute"  # the role its rate gives, kept


def test_near_but_slow_bond_is_unclear(tmp_path: Path) -> None:
    text = BOND.read_text()
    first = text.index("\t\tRate: 200\n")
    changed = tmp_path / "node.txt"
    changed.write_text(text[:first] + "\t\tRate: 25\n" + text[first + len("\t\tRate: 200\n"):])
    nics, _ = show(changed)
    bond = nics["mlx5_bond_0"]["bond"]
    assert "role unclear: PIX to GPU0, GPU1; 25 Gb/s, below the node's fastest 200 Gb/s" in bond


def test_without_matrix_or_rate_the_bond_says_what_is_missing() -> None:
    nics, _ = show(FIXTURES / "rdma-link-j.json")
    bond = nics["mlx5_bond_0"]["bond"]
    assert "role unclear" in bond
    assert "GPU distance not captured (no nvidia-smi topo -m)" in bond and "rate not captured" in bond
    assert nics["mlx5_0"]["bond"] is None


def test_bond_names() -> None:
    assert is_bonded("mlx5_bond_0") and is_bonded("mlx5_bond_12")
    assert not is_bonded("mlx5_0") and not is_bonded("bond0") and not is_bonded("mlx5_bond_")
    assert bond_statement("mlx5_bond_1", rate_gbps=None, fastest_gbps=None, down=True, distances={}) == (
        "mlx5_bond_1: bonded ports (RoCE LAG), every port down")
