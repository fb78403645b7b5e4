"""No regular expression runs on a line longer than 64 KiB of user text (issue 22 item 13): ``nccl-log`` and the
topology readers skip such a line with a note naming its number, and read the rest as before. The long lines are
1 MB: a run of spaces after ``NCCL INFO`` (the shape that made the old patterns quadratic) and a pasted blob.
Timing is not asserted here (bench/bench_line_cap.py prints it)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from collscope.cli import main
from collscope.collectives.nccl_log import parse_nccl_log
from collscope.line_cap import MAX_LINE_CHARS, drop_long_lines
from collscope.topo.detect import add_capture
from collscope.topo.node import NodeCaptures

FIXTURES = Path(__file__).parent / "fixtures"
LOG = FIXTURES / "nccl-debug" / "nccl2.24.3-2node-16rank-pxn-gdr-tuning-blocks.log"
TOPO = FIXTURES / "nvidia-smi" / "topo-spaces-4gpu-nv18-4nic-legend-gpu-numa-id.txt"
SPACES = "gpu-h07:4412:4412 [0] NCCL INFO " + " " * 1_000_000 + "x"
BLOB = "A" * 1_048_576


def _insert(text: str, at: int, line: str) -> str:
    lines = text.split("\n")
    return "\n".join(lines[:at] + [line] + lines[at:])


def test_nccl_log_skips_a_megabyte_line_and_says_which():
    text = LOG.read_text()
    plain = parse_nccl_log(text, source="x.log")
    capped = parse_nccl_log(_insert(_insert(text, 2, SPACES), 5, BLOB), source="x.log")
    notes = [w for w in capped.warnings if "characters: skipped, not read" in w]
    assert notes == [f"line 3 ({len(SPACES):,} characters) is longer than 65,536 characters: skipped, not read",
                     "line 6 (1,048,576 characters) is longer than 65,536 characters: skipped, not read"]
    assert (capped.nranks, capped.nnodes, capped.nccl_version, capped.channels) == \
        (plain.nranks, plain.nnodes, plain.nccl_version, plain.channels)
    assert capped.nccl_lines == plain.nccl_lines and capped.tuning == plain.tuning


def test_nccl_log_command_prints_the_note(tmp_path):
    path = tmp_path / "long.log"
    path.write_text(_insert(LOG.read_text(), 0, BLOB))
    result = CliRunner().invoke(main, ["nccl-log", str(path)])
    assert result.exit_code == 0, result.output
    assert "line 1 (1,048,576 characters) is longer than 65,536 characters: skipped, not read" in result.output


def test_a_log_of_only_a_long_line_is_no_nccl_log_and_says_why():
    from collscope.errors import ParseError

    try:
        parse_nccl_log(BLOB + "\n", source="blob.log")
    except ParseError as exc:
        assert "line 1 (1,048,576 characters)" in str(exc) and len(str(exc)) < 2000
    else:
        raise AssertionError("a log without an NCCL line was read")


def test_topo_capture_skips_a_megabyte_line_and_notes_it():
    text = TOPO.read_text()
    plain = NodeCaptures()
    assert add_capture(plain, text, "topo.txt") == "nvidia-smi-topo"
    capped = NodeCaptures()
    assert add_capture(capped, text + BLOB + "\n", "topo.txt") == "nvidia-smi-topo"
    assert capped.matrix == plain.matrix
    last = len(text.split("\n"))
    assert capped.errors == [f"topo.txt: line {last} (1,048,576 characters) is longer than 65,536 characters: "
                             "skipped, not read"]


def test_drop_long_lines_keeps_numbers_and_short_text_as_is():
    short = "a\nb\n"
    assert drop_long_lines(short) == (short, [])
    text, notes = drop_long_lines("a\n" + "z" * (MAX_LINE_CHARS + 1) + "\nc")
    assert text == "a\n\nc" and notes == [f"line 2 ({MAX_LINE_CHARS + 1:,} characters) is longer than 65,536 "
                                          "characters: skipped, not read"]
    exact = "y" * MAX_LINE_CHARS + "\n" + "q" * 10
    assert drop_long_lines(exact) == (exact, [])
