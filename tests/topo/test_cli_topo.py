"""`collscope topo ...` through click's CliRunner, and `topo collect` with fake tools on PATH."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.topo.samples import sample_path
from tests.fakes import Answer, FakeTools, write_executable

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_show_sample_json_contract():
    code, out, _ = run("topo", "show", "--sample", "hgx-h100-8gpu", "--json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) >= {"host", "gpus", "nics", "links", "warnings", "graph"}
    assert doc["sample"] == "hgx-h100-8gpu"
    gpu0 = doc["gpus"][0]
    assert gpu0["name"] == "GPU0" and gpu0["nearest_nics"] == ["mlx5_0"] and gpu0["nearest_nic_path"] == "PIX"
    assert gpu0["cpu_affinity"] == "0-55,112-167" and gpu0["gpu_numa_id"] == "N/A"
    nic0 = doc["nics"][0]
    assert nic0["name"] == "mlx5_0" and nic0["label"] == "NIC0" and nic0["netdev"] == "ibp24s0"
    assert nic0["ports"][0] | {} == {**nic0["ports"][0], "port": 1, "state": "Active", "rate_gbps": 400.0,
                                     "link_layer": "InfiniBand"}
    assert doc["links"]["GPU0"]["mlx5_0"] == doc["links"]["mlx5_0"]["GPU0"] == "PIX"
    assert doc["links"]["GPU0"]["GPU4"] == "NV18"
    assert len(doc["links"]) == 20 and all(len(row) == 20 for row in doc["links"].values())
    graph = nx.node_link_graph(doc["graph"], edges="links")
    assert graph.number_of_nodes() > 20


def test_show_without_nvidia_smi_falls_back_to_labelled_sample(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, err = run("topo", "show")
    assert code == 0
    assert "nvidia-smi not found" in err and "--from" in err and "NOT this machine" in err
    assert "[SAMPLE 'hgx-h100-8gpu'" in out


def test_show_from_matrix_file_text_summary():
    path = FIXTURES / "nvidia-smi" / "topo-tab-4gpu-nv18-4nic-legend-gpu-numa-id.txt"
    code, out, _ = run("topo", "show", "--from", str(path))
    assert code == 0, out
    assert "GPUs: 4" in out and "NICs: 4" in out


def test_show_writes_png_graphml_dot(tmp_path):
    png, gml, dot = tmp_path / "n.png", tmp_path / "n.graphml", tmp_path / "sub" / "n.dot"
    code, out, _ = run("topo", "show", "--sample", "hgx-h100-8gpu", "--png", str(png), "--graphml", str(gml),
                       "--dot", str(dot))
    assert code == 0, out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    g = nx.read_graphml(gml)
    assert g.nodes["GPU0"]["kind"] == "gpu" and g.edges["GPU0", "NVSwitch"]["nlinks"] == 18
    text = dot.read_text()
    assert text.startswith('graph "sample-hgx-h100" {') and '"GPU0" -- "NVSwitch"' in text


@pytest.mark.parametrize("content, expected", [
    ("this is not a capture\n", "expected a capture of one of"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\tNVX\n", ":3: expected"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, content, expected):
    bad = tmp_path / "bad capture.txt"
    bad.write_text(content)
    code, out, err = run("topo", "show", "--from", str(bad))
    assert code == 2
    assert "Traceback" not in err + out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and expected in lines[0]


def test_missing_path_and_unknown_gpu_exit_2(tmp_path):
    code, _, err = run("topo", "show", "--from", str(tmp_path / "nope"))
    assert code == 2 and "no such path" in err
    code, _, err = run("topo", "show", "--sample", "hgx-h100-8gpu", "--gpu", "Z9000")
    assert code == 2 and "unknown GPU 'Z9000'" in err and "H100" in err


def _fake_node(fake_tools: FakeTools) -> None:
    """nvidia-smi and ibstat answering with the bundled sample's captures; ibdev2netdev failing."""
    fake_tools.node(sample_path(), ibdev2netdev=Answer(stderr="ibdev2netdev: failed to read sysfs\n", exit_code=1))


def test_collect_then_show_and_cluster(tmp_path, fake_tools):
    _fake_node(fake_tools)
    env = fake_tools.env()
    out = tmp_path / "topo" / "node01"
    proc = subprocess.run([sys.executable, "-m", "collscope", "topo", "collect", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # (ip-addr.json / ip-link.json come from this machine's real `ip`: the network interfaces, test_netif.py)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(("ip-", "netif-"))) == [
        "ibstat.txt", "meta.json", "nvidia-smi-nvlink.txt", "nvidia-smi-q.txt",
        "nvidia-smi-query-gpu.csv", "nvidia-smi-topo.txt"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["tools"]["ibdev2netdev.txt"]["returncode"] == 1
    assert any("ibdev2netdev -v exited 1" in e for e in meta["errors"])
    assert "ibdev2netdev" in proc.stderr

    # Live show through the same fake tools.
    live = subprocess.run([sys.executable, "-m", "collscope", "topo", "show", "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert live.returncode == 0, live.stderr
    assert json.loads(live.stdout)["sample"] is None

    # A second identical node and a third whose mlx5_3 is down.
    shutil.copytree(out, tmp_path / "topo" / "node02")
    odd = tmp_path / "topo" / "node03"
    shutil.copytree(out, odd)
    text = (odd / "ibstat.txt").read_text().split("CA '")
    text = [b.replace("State: Active", "State: Down").replace("LinkUp", "Disabled") if b.startswith("mlx5_3'")
            else b for b in text]
    (odd / "ibstat.txt").write_text("CA '".join(text))
    for name in ("node02", "node03"):
        meta_path = tmp_path / "topo" / name / "meta.json"
        meta_path.write_text(json.dumps({**meta, "host": name}))

    code, stdout, _ = run("topo", "cluster", str(tmp_path / "topo"), "--json")
    assert code == 0, stdout
    doc = json.loads(stdout)
    assert doc["nodes"] == [meta["host"], "node02", "node03"]
    assert doc["rail_source"].startswith("NIC index")
    rail0 = doc["rails"][0]["members"]
    assert [m[1] for m in rail0] == ["mlx5_0", "mlx5_0", "mlx5_0"]
    # node03 lost mlx5_3: it is flagged, rail 3 lacks it, and the other rails do not shift.
    assert any(w.startswith("node03 differs from the majority: active NICs 10") for w in doc["warnings"])
    assert len(doc["rails"]) == 8  # the InfiniBand NICs; the Ethernet front-end ports are not rails
    assert [m for m in doc["rails"][3]["members"]] == [[meta["host"], "mlx5_3"], ["node02", "mlx5_3"]]
    assert [m[1] for m in doc["rails"][4]["members"]] == ["mlx5_4"] * 3
    assert "rail 3: no active NIC on node03" in doc["warnings"]


def test_cluster_rails_from_ibnetdiscover(tmp_path):
    from collscope.topo.infiniband.fabric import parse_ibnetdiscover

    fabric_text = (FIXTURES / "infiniband" / "ibnetdiscover-2leaf-1spine-hdr.txt").read_text()
    fabric = parse_ibnetdiscover(fabric_text)
    cas = fabric.cas()
    assert cas, "fixture has CAs"
    # One node per CA host name in the fixture, each with an ibstat naming that CA's GUID.
    root = tmp_path / "topo"
    hosts: dict[str, list] = {}
    for ca in cas:
        host, _, dev = ca.name.partition(" ")
        hosts.setdefault(host, []).append((dev or "mlx5_0", ca.guid))
    for host, cas_of_host in hosts.items():
        d = root / host
        d.mkdir(parents=True)
        blocks = []
        for dev, guid in cas_of_host:
            blocks.append(f"CA '{dev}'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tFirmware version: 20.31.1014\n"
                          f"\tHardware version: 0\n\tNode GUID: {guid}\n\tSystem image GUID: {guid}\n\tPort 1:\n"
                          "\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 200\n\t\tBase lid: 3\n"
                          "\t\tLMC: 0\n\t\tSM lid: 1\n\t\tCapability mask: 0xa651e848\n"
                          f"\t\tPort GUID: {guid}\n\t\tLink layer: InfiniBand\n")
        (d / "ibstat.txt").write_text("".join(blocks))
        (d / "meta.json").write_text(json.dumps({"host": host}))
    (root / "ibnetdiscover.txt").write_text(fabric_text)
    code, stdout, _ = run("topo", "cluster", str(root), "--json")
    assert code == 0, stdout
    doc = json.loads(stdout)
    assert doc["rail_source"] == "ibnetdiscover leaf switches"
    leaves = {fabric.leaf_of(ca.guid) for ca in cas}
    assert len(doc["rails"]) == len(leaves) >= 2
    assert sum(len(r["members"]) for r in doc["rails"]) == len(cas)


def test_every_command_has_help_with_example():
    for args in (["--help"], ["topo", "--help"], ["topo", "show", "--help"], ["topo", "collect", "--help"],
                 ["topo", "cluster", "--help"]):
        code, out, _ = run(*args)
        assert code == 0 and "Example" in out, args


def test_readme_names_every_command():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for command in ("collscope topo show", "collscope topo collect", "collscope topo cluster"):
        assert command in readme


def test_collect_topo_script_outside_slurm(tmp_path, fake_tools):
    """slurm/collect-topo.sh without an allocation captures this node into DIR/<short hostname>."""
    _fake_node(fake_tools)
    repo = Path(__file__).resolve().parents[2]
    collscope_cmd = write_executable(tmp_path / "collscope", f'#!/bin/sh\nexec "{sys.executable}" -m collscope "$@"\n')
    env = {k: v for k, v in fake_tools.env().items() if not k.startswith("SLURM_")}
    env.update(COLLSCOPE=str(collscope_cmd))
    out = tmp_path / "topo"
    proc = subprocess.run(["bash", str(repo / "slurm" / "collect-topo.sh"), str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    assert (out / host / "nvidia-smi-topo.txt").exists()
    assert json.loads((out / host / "meta.json").read_text())["files"]
