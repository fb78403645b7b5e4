"""report and recommend take the geometry overrides that apply to them (issue 23 item 3), with the same names,
types and help as analyze; the hints their output carries name options that exist."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from collscope.cli import COMMANDS, main
from collscope.cli.options import GEOMETRY_HELP
from tests.test_cli_hints import _command, command_options, hint_options

NODES_UNKNOWN = (Path(__file__).resolve().parents[1] / "fixtures" / "analysis"
                 / "all_reduce_perf-device-list-removed-16r-nodes-unknown.txt")


def test_recommend_nnodes_reaches_its_groups() -> None:
    runner = CliRunner()
    plain = runner.invoke(main, ["recommend", str(NODES_UNKNOWN), "--format", "json"])
    assert plain.exit_code == 0, plain.output
    assert [g["nnodes"] for g in json.loads(plain.output)["groups"]] == [None]  # unknown, never 1
    told = runner.invoke(main, ["recommend", str(NODES_UNKNOWN), "--nnodes", "2", "--format", "json"])
    assert told.exit_code == 0, told.output
    assert [(g["nranks"], g["nnodes"]) for g in json.loads(told.output)["groups"]] == [(16, 2)]


def test_report_takes_the_geometry_of_a_table_without_header(tmp_path: Path) -> None:
    table = tmp_path / "table.txt"  # the size table alone: op and ranks from the user
    table.write_text("\n".join(line for line in NODES_UNKNOWN.read_text().splitlines()
                               if not line.startswith("#")) + "\n")
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["report", str(table), "--out", str(out), "--op", "all_reduce", "--nranks",
                                       "16", "--nnodes", "2"])
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    assert "all_reduce" in md
    printed = hint_options(md)  # the recommendation's lines name recommend's options through its name only
    assert printed <= command_options(_command(COMMANDS["report"])), printed


def test_the_overrides_have_one_name_type_and_help_everywhere() -> None:
    seen: dict[str, set[tuple[str, str]]] = {}
    for name in ("analyze", "predict", "report", "recommend", "ingest", "trace"):
        for param in _command(COMMANDS[name]).params:
            if param.name in ("nranks", "nnodes", "nvl_domain"):
                assert param.help == GEOMETRY_HELP[param.name], (name, param.name)  # type: ignore[attr-defined]
                seen.setdefault(param.name, set()).add((tuple(param.opts)[0], repr(param.type)))
    assert {k: len(v) for k, v in seen.items()} == {"nranks": 1, "nnodes": 1, "nvl_domain": 1}
    analyze = {p.name for p in _command(COMMANDS["analyze"]).params}
    assert {"nranks", "nnodes", "nvl_domain", "op"} <= analyze
