"""Input files and option values of ingest, analyze, nccl-log and predict: a FIFO, binary text or a bad value is
one line naming the file (and line) or the option, exit 2; never a hang, a traceback or a silent change."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from collscope.cli import main
from tests.cli_timeout import invoke_with_timeout, one_error_line

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NCCL_TESTS = FIXTURES / "nccl-tests" / "all_reduce_perf-v2.19.6-2x4-wrong-redop-root.txt"
NCCL_LOG = FIXTURES / "nccl-debug" / "nccl2.19.3-1node-4gpu-prefix-stripped.log"


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("command", [["ingest"], ["analyze"], ["nccl-log"]])
def test_a_fifo_input_is_refused_without_hanging(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "run.txt"
    os.mkfifo(fifo)
    line = one_error_line(invoke_with_timeout([*command, str(fifo)], fifo))
    assert str(fifo) in line and "FIFO" in line


def _binary_copy(tmp_path: Path, source: Path, marker: bytes) -> tuple[Path, int]:
    data = source.read_bytes()
    at = data.index(marker)
    damaged = tmp_path / source.name
    damaged.write_bytes(data[:at] + b"\xff\xfe" + data[at + len(marker):])
    return damaged, data.count(b"\n", 0, at) + 1


@pytest.mark.parametrize("command", [["ingest"], ["analyze"]])
def test_binary_nccl_tests_text_names_file_and_line(tmp_path: Path, command: list[str]) -> None:
    damaged, line_no = _binary_copy(tmp_path, NCCL_TESTS, b"2097152")
    line = one_error_line(_cli(*command, str(damaged)))
    assert f"{damaged}:{line_no}:" in line and "not UTF-8" in line


def test_binary_nccl_log_names_file_and_line(tmp_path: Path) -> None:
    damaged, line_no = _binary_copy(tmp_path, NCCL_LOG, b"cudaDriverVersion")
    line = one_error_line(_cli("nccl-log", str(damaged)))
    assert f"{damaged}:{line_no}:" in line and "not UTF-8" in line


def _table_only(tmp_path: Path) -> Path:
    table = tmp_path / "table.txt"
    table.write_text("\n".join(ln for ln in NCCL_TESTS.read_text().splitlines()
                               if ln.strip()[:1].isdigit() or "size" in ln) + "\n")
    return table


def test_analyze_takes_op_for_table_only_outputs(tmp_path: Path) -> None:
    table = _table_only(tmp_path)
    missing = one_error_line(_cli("analyze", str(table)))
    assert "--op" in missing
    result = _cli("analyze", str(table), "--op", "all_reduce", "--json")
    assert result.exit_code in (0, 1), result.output  # 1: this capture holds wrong values, as ingest says
    doc = json.loads(result.stdout)
    assert {fit["op"] for fit in doc["configs"]} == {"all_reduce"}


def test_analyze_takes_nranks_where_the_table_cannot_tell(tmp_path: Path) -> None:
    table = _table_only(tmp_path)
    assert "--nranks" in one_error_line(_cli("analyze", str(table), "--op", "broadcast"))
    result = _cli("analyze", str(table), "--op", "broadcast", "--nranks", "4", "--json")
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["configs"][0]["nranks"] == 4


def _predicted_sizes(*args: str) -> list[int]:
    result = _cli("predict", "--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1", "--json", *args)
    assert result.exit_code == 0, result.output
    return sorted({p["size_bytes"] for p in json.loads(result.stdout)["predictions"]})


def test_predict_factor_is_honoured_for_the_default_ladder() -> None:
    assert _predicted_sizes("--factor", "2") == [1024 * 2**i for i in range(21)]
    assert _predicted_sizes() == [1024 * 4**i for i in range(11)]
    assert _predicted_sizes("--factor", "4") == _predicted_sizes()
    assert _predicted_sizes("--factor", "8", "--max-bytes", "64K") == [1024, 8192, 65536]


def test_predict_factor_help_states_the_default_used() -> None:
    text = " ".join(_cli("predict", "--help").stdout.split())
    assert "--factor" in text and "default: 4" in text and "default 2" not in text


@pytest.mark.parametrize("sizes", ["0", "1K,0", "0,8"])
def test_predict_sizes_must_be_positive(sizes: str) -> None:
    result = _cli("predict", "--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1", "--sizes", sizes)
    assert result.exit_code == 2
    assert "Invalid value for '--sizes'" in result.stderr and "> 0" in result.stderr


def test_predict_factor_must_be_above_one() -> None:
    result = _cli("predict", "--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--factor", "1")
    assert result.exit_code == 2 and "Invalid value for '--factor'" in result.stderr
