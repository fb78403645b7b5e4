"""collscope.files: inputs that are not regular files are refused without blocking; outputs checked first."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from collscope.errors import ConfigError, ParseError
from collscope.files import check_output_dir, decode_text, read_input_bytes, read_input_text


def test_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"size count\n")
    assert read_input_bytes(tmp_path / "a.txt") == b"size count\n"
    assert read_input_text(tmp_path / "a.txt") == "size count\n"


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "out.txt"
    os.mkfifo(fifo)
    result: list[BaseException] = []
    reader = threading.Thread(target=lambda: _catch(result, fifo), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(result[0], ParseError)
    assert "a FIFO (named pipe)" in str(result[0]) and str(fifo) in str(result[0])


def _catch(into: list[BaseException], path: Path) -> None:
    try:
        read_input_bytes(path, "an nccl-tests output")
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        into.append(exc)


def test_directory_dangling_symlink_and_missing_are_named(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    with pytest.raises(ParseError, match="a directory"):
        read_input_bytes(tmp_path)
    with pytest.raises(ParseError, match=r"symlink to a missing target"):
        read_input_bytes(tmp_path / "link")
    with pytest.raises(ParseError, match="no such file"):
        read_input_bytes(tmp_path / "nope")


def test_binary_text_names_the_line() -> None:
    with pytest.raises(ParseError) as info:
        decode_text(b"ok\nok\n\xff\xfe\x00", "run.txt")
    assert info.value.line == 3 and "not UTF-8" in str(info.value)


def test_output_dir_created_or_refused(tmp_path: Path) -> None:
    assert check_output_dir(tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="a regular file, not a directory"):
        check_output_dir(tmp_path / "file")
    with pytest.raises(ConfigError, match="cannot be created"):
        check_output_dir(tmp_path / "file" / "sub")
    with pytest.raises(ConfigError, match="/proc/nope"):
        check_output_dir("/proc/nope")
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == []  # the probe file is gone
