"""Sweep spec files (`sweep run SPEC`, collscope/sweeps/specfile.py) are read strictly: a binary file, a FIFO, a
YAML syntax error, a list instead of a mapping, a wrong type or an unknown key is one line naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from collscope.cli import main
from collscope.errors import CollscopeError
from collscope.sweeps.specfile import load_spec
from tests.cli_timeout import invoke_with_timeout, one_error_line


def _sweep(spec: Path, out: Path) -> Result:
    return CliRunner().invoke(main, ["sweep", "run", str(spec), "--out", str(out), "--dry-run"])


def test_binary_spec_names_file_and_line(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_bytes(b"name: x\nops: [all_reduce]\nnranks: \xff\xfe\n")
    line = one_error_line(_sweep(spec, tmp_path / "out"))
    assert f"{spec}:3:" in line and "not UTF-8" in line


def test_fifo_spec_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)
    line = one_error_line(invoke_with_timeout(["sweep", "run", str(fifo), "--out", str(tmp_path / "o"),
                                                "--dry-run"], fifo))
    assert str(fifo) in line and "FIFO" in line


@pytest.mark.parametrize("text", ["name: x\n  bad: : indent\n", "? [a, b]\n: 1\n", "ops: [all_reduce\n"])
def test_yaml_syntax_error_is_one_line_with_its_line_number(tmp_path: Path, text: str) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    line = one_error_line(_sweep(spec, tmp_path / "out"))
    assert str(spec) in line and "not valid YAML" in line and "line " in line


@pytest.mark.parametrize(("text", "words"), [
    ("- all_reduce\n- all_gather\n", "a mapping of spec keys, got list"),
    ("nranks: two\n", "nranks: expected an integer, got 'two'"),
    ("repeats: true\n", "repeats: expected an integer, got True"),
    ("timeout_s: '5'\n", "timeout_s: expected a number, got '5'"),
    ("ops: [1]\n", "ops[0]: expected text, got 1"),
    ("nrank: 2\n", "unknown key 'nrank'"),
    ("fixed_env: [NCCL_DEBUG]\n", "fixed_env: expected a mapping of variable -> value"),
    ("42\n", "a mapping of spec keys, got int"),
])
def test_wrong_shapes_and_types_name_the_field(tmp_path: Path, text: str, words: str) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    with pytest.raises(CollscopeError) as info:
        load_spec(spec)
    assert str(spec) in str(info.value) and words in str(info.value)
    assert "\n" not in str(info.value)


def test_json_spec_that_is_a_list_or_binary(tmp_path: Path) -> None:
    spec = tmp_path / "s.json"
    spec.write_text('["all_reduce"]')
    with pytest.raises(CollscopeError, match="a mapping of spec keys, got list"):
        load_spec(spec)
    spec.write_bytes(b'{"name":\n "\xff"}')
    with pytest.raises(CollscopeError, match=rf"{spec}:2:.*not UTF-8"):
        load_spec(spec)
