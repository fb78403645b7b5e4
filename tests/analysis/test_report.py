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


def test_report_markdown_tables_are_markdown_with_formatted_numbers(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    result = CliRunner().invoke(main, ["report", str(EXAMPLE), "--out", str(out)])
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    lines = md.splitlines()
    # no raw DataFrame dump: no fenced table of pandas columns, no exponent numbers, no 'NaN'
    assert "alpha_lo_us" not in md and "n_half_bytes" not in md and "NaN" not in md
    assert not re.search(r"\d\.\d+e[+-]\d", md), "numbers print without exponents"
    headers = [i for i, line in enumerate(lines) if line.startswith("| config | ranks | alpha us")]
    assert len(headers) == 2  # one fitted table per collective
    for i in headers:
        assert re.fullmatch(r"\|(---\|)+", lines[i + 1]), lines[i + 1]
        body = lines[i + 2:]
        rows = body[:next((k for k, line in enumerate(body) if not line.startswith("|")), len(body))]
        assert rows and all(r.count("|") == lines[i].count("|") for r in rows)
        n_half = [r.split("|")[7].strip() for r in rows]
        assert all(re.fullmatch(r"\d+(\.\d+)?[KMG]?|-", v) for v in n_half), n_half
    assert "| kind | op | config | sizes | detail |" in md  # the anomalies are a table too (grouped by size range)
    page = (out / "index.html").read_text()
    assert "<th>n1/2 (fit)</th>" in page
    assert not re.search(r"\d\.\d+e[+-]\d", page)  # base64 has no '.', so this only sees the text
