"""trace's model figures for a job across nodes take the NIC rates given by hand (--nic-gbit), as predict does."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from collscope.cli import main
from tests.traces import trace_fixtures as fx


def _two_node_trace(tmp_path: Path) -> Path:
    for rank in (0, 1):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(fx.nccl_kernel_metadata(rank)))
    return tmp_path


def test_a_two_node_trace_gets_a_model_figure_from_the_nic_rate(tmp_path: Path) -> None:
    path = _two_node_trace(tmp_path)
    base = ["trace", str(path), "--gpu", "H100", "--nnodes", "2", "--json"]
    without = CliRunner().invoke(main, base)
    assert without.exit_code == 0, without.output
    doc = json.loads(without.output)
    assert not any(r["model_busbw_gbps"] for r in doc["summary"])
    assert any("--nic-gbit" in w for w in doc["warnings"]), doc["warnings"]
    given = CliRunner().invoke(main, base + ["--nic-gbit", "400"])
    assert given.exit_code == 0, given.output
    rows = [r for r in json.loads(given.output)["summary"] if r["nnodes"] == 2]
    assert rows and all(r["model_busbw_gbps"] for r in rows)
