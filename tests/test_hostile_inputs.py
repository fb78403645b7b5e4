"""Inputs that ended in a traceback or ate the machine (issue 22, items 12-14): each is now a one-line error
(exit 2) or a normal result, in bounded time and memory; nothing read from an input drives the terminal or
becomes markup in report.md."""

from __future__ import annotations

import gzip
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from collscope.cli import main
from collscope.collectives.record import Measurement
from collscope.errors import ConfigError, ParseError
from collscope.sweeps.specfile import decode_spec
from collscope.topo.samples import sample_path
from collscope.traces.load import MAX_TRACE_BYTES_ENV, parse_trace_bytes

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "results" / "mpi-algos-2rank"
NCCL_TESTS = ROOT / "tests" / "fixtures" / "nccl-tests" / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"
DOLLARS = "$SLURM_SUBMIT_DIR/topo_$SLURM_JOB_ID.xml"
ESCAPES = "\x1b]52;c;aGVsbG8=\x07\x1b[2J"
MARKUP = "<script>alert(1)</script>[x](javascript:alert(1))"
DEEP = 100_000


def _run(*args: str, **kwargs: Any) -> Result:
    result = CliRunner().invoke(main, list(args), **kwargs)
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def _results(tmp_path: Path, change: Any, points: int = 1) -> Path:
    """A copy of the shipped example whose first ``points`` point files have each record changed by ``change``."""
    out = tmp_path / "results"
    shutil.copytree(EXAMPLE, out)
    for path in sorted((out / "points").glob("*.jsonl"))[:points]:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            change(record)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


# ---- item 12 -------------------------------------------------------------------------------------------------
def test_report_with_dollars_in_settings_and_hosts(tmp_path: Path) -> None:
    def dollars(record: dict[str, Any]) -> None:
        record["settings"]["NCCL_TOPO_FILE"] = DOLLARS
        record["hosts"] = ["node$1$^{"]

    results = _results(tmp_path, dollars, points=3)
    result = _run("report", str(results), "--out", str(tmp_path / "report"))
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "report").glob("busbw-*.png"))
    assert "NCCL\\_TOPO\\_FILE=$SLURM\\_SUBMIT\\_DIR/topo\\_$SLURM\\_JOB\\_ID.xml" in (
        tmp_path / "report" / "report.md").read_text()


def test_topo_png_with_dollars_in_the_host_name(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    shutil.copytree(sample_path(), capture)
    meta = json.loads((capture / "meta.json").read_text())
    meta["host"] = "gpu$\\frac{$node"
    (capture / "meta.json").write_text(json.dumps(meta))
    result = _run("topo", "show", "--from", str(capture), "--png", str(tmp_path / "t.png"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "t.png").stat().st_size > 0


def test_ingest_refuses_a_time_of_zero_with_its_line(tmp_path: Path) -> None:
    lines = NCCL_TESTS.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if line.split()[:3] == ["8", "2", "float"])
    parts = lines[row].split()
    lines[row] = lines[row].replace(f" {parts[5]} ", " 0.00 ", 1)
    (tmp_path / "t0.txt").write_text("\n".join(lines) + "\n")
    result = _run("ingest", str(tmp_path / "t0.txt"), "--out", str(tmp_path / "r.jsonl"))
    assert result.exit_code == 2
    assert f"t0.txt:{row + 1}: expected every time finite and > 0" in result.output
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("field,value", [("time_us", 0), ("time_us", float("inf")), ("size_bytes", 2**63),
                                         ("size_bytes", 2**64), ("size_bytes", 10**30)])
def test_measurement_bounds(field: str, value: Any) -> None:
    good = json.loads((next((EXAMPLE / "points").glob("*.jsonl"))).read_text().splitlines()[0])
    Measurement.from_dict(good)
    with pytest.raises(ValueError, match=field):
        Measurement.from_dict({**good, field: value})


@pytest.mark.parametrize("field,raw", [("size_bytes", "18446744073709551616"), ("size_bytes", "1e300"),
                                       ("size_bytes", "1180591620717411303424"), ("time_us", "0"),
                                       ("time_us", "1e999")])
def test_analyze_of_out_of_range_records_is_a_parse_error(tmp_path: Path, field: str, raw: str) -> None:
    results = _results(tmp_path, lambda r: None)
    path = sorted((results / "points").glob("*.jsonl"))[0]
    first, *rest = path.read_text().splitlines()
    doc = json.loads(first)
    doc[field] = "PLACEHOLDER"
    path.write_text("\n".join([json.dumps(doc).replace('"PLACEHOLDER"', raw), *rest]) + "\n")
    for command in ("analyze", "recommend"):
        result = _run(command, str(results))
        assert result.exit_code == 2, result.output
        assert f"{path.name}:1:" in result.output and field in result.output


def _deep(key: str) -> str:
    return "{" + json.dumps(key) + ": " + "[" * DEEP + "]" * DEEP + "}"


def test_deep_json_record_meta_topo_and_spec(tmp_path: Path) -> None:
    results = _results(tmp_path, lambda r: None)
    path = sorted((results / "points").glob("*.jsonl"))[0]
    path.write_text(_deep("settings") + "\n")
    result = _run("analyze", str(results))
    assert result.exit_code == 2 and f"{path.name}:1:" in result.output and "nested too deeply" in result.output

    capture = tmp_path / "capture"
    shutil.copytree(sample_path(), capture)
    (capture / "meta.json").write_text(_deep("host"))
    result = _run("topo", "show", "--from", str(capture))
    assert result.exit_code == 2 and "meta.json" in result.output and "nested too deeply" in result.output

    (tmp_path / "topo.json").write_text(_deep("graph"))
    result = _run("analyze", str(EXAMPLE), "--topo", str(tmp_path / "topo.json"))
    assert result.exit_code == 2 and "topo.json" in result.output

    (tmp_path / "spec.json").write_text(_deep("grid"))
    (tmp_path / "spec.yaml").write_text("grid: " + "[" * DEEP + "]" * DEEP + "\n")
    for spec in ("spec.json", "spec.yaml"):
        result = _run("sweep", "run", str(tmp_path / spec), "--out", str(tmp_path / "out"), "--dry-run")
        assert result.exit_code == 2 and spec in result.output and "deeper than" in result.output


# ---- item 13 -------------------------------------------------------------------------------------------------
def test_gzip_trace_inflating_past_the_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = gzip.compress(b'{"traceEvents": [' + b" " * (64 * 1024**2), compresslevel=9)
    assert len(bomb) < 200_000
    monkeypatch.setenv(MAX_TRACE_BYTES_ENV, "1M")
    with pytest.raises(ParseError, match=f"inflates to at most 1M bytes .*{MAX_TRACE_BYTES_ENV}"):
        parse_trace_bytes(bomb, "bomb.json.gz")
    monkeypatch.setenv(MAX_TRACE_BYTES_ENV, "one gig")
    with pytest.raises(ConfigError, match=MAX_TRACE_BYTES_ENV):
        parse_trace_bytes(bomb, "bomb.json.gz")


def test_gzip_trace_under_the_cap_reads_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"traceEvents": [], "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}}
    plain = parse_trace_bytes(json.dumps(doc).encode(), "t.json")
    two_members = gzip.compress(json.dumps(doc).encode()[:10]) + gzip.compress(json.dumps(doc).encode()[10:])
    assert parse_trace_bytes(two_members, "t.json") == plain
    with pytest.raises(ParseError, match="complete gzip file"):
        parse_trace_bytes(gzip.compress(json.dumps(doc).encode())[:-12], "t.json")


def test_yaml_aliases_refused_before_they_expand() -> None:
    laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    laughs += [f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi", strict=True)]
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"line 2, column \d+: no YAML alias \(\*a\)"):
        decode_spec("\n".join(laughs) + "\n", source="laughs.yaml")
    assert time.monotonic() - start < 2


LONG = 40_000


@pytest.mark.parametrize("fill", [" ", "a", "0", "\t", "a:"])
def test_nccl_log_long_lines_are_linear(tmp_path: Path, fill: str) -> None:
    body = fill * (LONG // len(fill))
    lines = ["host:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", f"host:1:2 [0] NCCL INFO {body}x",
             f"{body} NCCL INFO x", f"host:1:2 [0] NCCL INFO Algo {body}"]
    (tmp_path / "nccl.log").write_text("\n".join(lines) + "\n")
    start = time.monotonic()
    result = _run("nccl-log", str(tmp_path / "nccl.log"))
    assert result.exit_code == 0
    assert time.monotonic() - start < 10  # quadratic patterns took minutes at this length


@pytest.mark.parametrize("fill", [" ", "\t", "a "])
def test_topo_show_long_ibstat_line_is_linear(tmp_path: Path, fill: str) -> None:
    capture = tmp_path / "capture"
    shutil.copytree(sample_path(), capture)
    lines = (capture / "ibstat.txt").read_text().splitlines()
    middle = len(lines) // 2
    lines.insert(middle, lines[middle][:8] + "x" + fill * (2 * LONG // len(fill)) + "y")  # 80,000: minutes before
    (capture / "ibstat.txt").write_text("\n".join(lines) + "\n")
    start = time.monotonic()
    _run("topo", "show", "--from", str(capture))
    assert time.monotonic() - start < 10


# ---- item 14 (inputs) ----------------------------------------------------------------------------------------
def test_report_md_has_no_markup_from_records(tmp_path: Path) -> None:
    def hostile(record: dict[str, Any]) -> None:
        record["settings"]["OMPI_MCA_x"] = MARKUP + "|`code`*b*_i_\nnext"

    results = _results(tmp_path, hostile, points=2)
    result = _run("report", str(results), "--out", str(tmp_path / "report"))
    assert result.exit_code == 0, result.output
    md = (tmp_path / "report" / "report.md").read_text()
    assert "<script" not in md and "](javascript" not in md and "[x]" not in md
    assert "&lt;script&gt;alert\\(1\\)&lt;/script&gt;\\[x\\]\\(javascript:alert\\(1\\)\\)" in md
    assert "<script" not in (tmp_path / "report" / "index.html").read_text()


def test_terminal_escapes_in_values_are_printed_escaped(tmp_path: Path) -> None:
    def hostile(record: dict[str, Any]) -> None:
        record["settings"]["OMPI_MCA_x"] = ESCAPES
        record["hosts"] = [f"node{ESCAPES}"]

    results = _results(tmp_path, hostile, points=3)
    for args in (("analyze", str(results)), ("recommend", str(results)), ("analyze", f"{tmp_path}/{ESCAPES}")):
        result = _run(*args)
        assert "\x1b" not in result.output and "\x07" not in result.output
    assert "\\x1b]52;c;aGVsbG8=\\x07" in _run("analyze", str(results)).output
    assert "\\x1b]52" in _run("analyze", f"{tmp_path}/{ESCAPES}").output


@pytest.mark.parametrize("name", ["sweep.json", "failures.jsonl", "check.json"])
def test_deep_json_in_the_results_directory(tmp_path: Path, name: str) -> None:
    results = _results(tmp_path, lambda r: None)
    point = sorted((results / "points").glob("*.jsonl"))[0]
    path = point.with_suffix(".check.json") if name == "check.json" else results / name
    path.write_text(_deep("a") + "\n")
    result = _run("analyze", str(results))
    assert result.exit_code == 2 and path.name in result.output
