"""`topo cluster` says each capture note once, with the nodes it concerns (issue 26 item 7): four nodes without
NVIDIA or InfiniBand tools printed 5 notes per node (20 lines; nvidia-smi three times per node, once per capture it
would have made). The node directories are what `topo collect` writes on such a node: its meta.json errors are the
messages of the missing-tool error (ToolMissingError with the capture table's hints), and ip's interfaces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from collscope.cli import main
from collscope.errors import ToolMissingError
from collscope.topo.capture import TOOLS
from collscope.topo.cluster import load_cluster

NETIF = Path(__file__).parents[1] / "fixtures" / "netif"
MISSING = {tool.argv[0]: str(ToolMissingError(tool.argv[0], tool.hint)) for tool in TOOLS}


def _node(root: Path, host: str, missing: list[str]) -> None:
    d = root / host
    d.mkdir()
    shutil.copy(NETIF / "node1-ip-addr.json", d / "ip-addr.json")
    shutil.copy(NETIF / "node1-ip-link.json", d / "ip-link.json")
    errors = [MISSING[t.argv[0]] for t in TOOLS if t.argv[0] in missing]  # one per capture, as collect writes
    meta = {"host": host, "errors": errors, "files": ["ip-addr.json", "ip-link.json"]}
    (d / "meta.json").write_text(json.dumps(meta))


def _plain_cluster(root: Path) -> None:
    for host in ("node1", "node2", "node3", "node4"):
        _node(root, host, ["nvidia-smi", "ibstat", "ibdev2netdev"] if host != "node3" else
              ["nvidia-smi", "ibdev2netdev"])


def test_each_note_once_with_its_nodes(tmp_path: Path) -> None:
    _plain_cluster(tmp_path)
    result = CliRunner().invoke(main, ["topo", "cluster", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines() if line.strip().startswith("- ")]
    assert lines == [f"- all 4 nodes: {MISSING['nvidia-smi']}",
                     f"- node1, node2, node4: {MISSING['ibstat']}",
                     f"- all 4 nodes: {MISSING['ibdev2netdev']}"], result.output
    assert "warnings: 3" in result.output


def test_notes_in_json_name_their_hosts(tmp_path: Path) -> None:
    _plain_cluster(tmp_path)
    cluster = load_cluster(tmp_path)
    assert [(n.text, n.hosts) for n in cluster.notes] == [
        (MISSING["nvidia-smi"], ("node1", "node2", "node3", "node4")),
        (MISSING["ibstat"], ("node1", "node2", "node4")),
        (MISSING["ibdev2netdev"], ("node1", "node2", "node3", "node4"))]
    assert cluster.hosts_noting("ibstat") == ("node1", "node2", "node4")
    doc = json.loads(CliRunner().invoke(main, ["topo", "cluster", str(tmp_path), "--json"]).output)
    assert doc["notes"][1] == {"note": MISSING["ibstat"], "hosts": ["node1", "node2", "node4"]}
    assert len(doc["warnings"]) == 3


def test_many_nodes_are_counted_not_listed(tmp_path: Path) -> None:
    for i in range(1, 13):
        _node(tmp_path, f"n{i:02d}", ["ibstat"] if i != 12 else [])
    (line,) = load_cluster(tmp_path).warnings
    assert line == (f"n01, n02, n03, n04, n05, n06, n07, n08 and 3 more (11 of 12 nodes): {MISSING['ibstat']}")


def test_collect_says_a_missing_tool_once(tmp_path: Path, monkeypatch) -> None:
    """On a node without nvidia-smi, `topo collect` noted it three times (once per nvidia-smi capture)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    result = CliRunner().invoke(main, ["topo", "collect", "--out", str(tmp_path / "node")])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if line.startswith("note: ")]
    assert notes.count(f"note: {MISSING['nvidia-smi']}") == 1, notes
    assert len(notes) == len(set(notes)), notes
