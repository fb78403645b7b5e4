"""collscope report on the shipped example results: PNGs, a self-contained HTML page, Markdown."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from collscope.analysis.report import CAVEATS
from collscope.cli import main
from collscope.topo.samples import sample_path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "results" / "mpi-algos-2rank"


def test_report_cli_writes_self_contained_html(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    result = CliRunner().invoke(main, ["report", str(EXAMPLE), "--out", str(out), "--topo", str(sample_path())])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["busbw-all_gather.png", "busbw-all_reduce.png", "heatmap-all_gather.png",
                     "heatmap-all_reduce.png", "index.html", "report.md", "topology.png"]
    for png in out.glob("*.png"):
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000
    page = (out / "index.html").read_text()
    assert page.count("data:image/png;base64,") == 5
    assert not re.search(r"(src|href)=['\"](http|/|\.\./)", page), "the page must open offline"
    assert "Recommendation" in page and "Anomalies" in page and "Fitted time" in page
    assert all(c[:40] in page.replace("&#x27;", "'") for c in CAVEATS)
    md = (out / "report.md").read_text()
    assert "![busbw](busbw-all_reduce.png)" in md


def test_report_bad_input_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = CliRunner().invoke(main, ["report", str(empty), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "Traceback" not in result.output
