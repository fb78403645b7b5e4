"""nccl-tests text is read whole and each row becomes a record in memory (~10 bytes per byte of text), so a file
over the cap (256 MiB, ``$COLLSCOPE_MAX_INPUT_BYTES``) is refused before a byte is read: one line naming the file,
its size, the cap and how to raise it (issue 22 item 13: a 2.4 GB log took 7.9 GB)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.collectives.nccl_tests.reading import MAX_TEXT_BYTES

FIXTURE = (Path(__file__).parent / "fixtures" / "nccl-tests"
           / "alltoall_perf-v2.19.6-16x8-128r-elided-rank-list-ends-rank-127.txt")


@pytest.mark.parametrize("command", ["ingest", "analyze"])
def test_a_file_over_the_default_cap_is_refused_before_it_is_read(tmp_path: Path, command: str) -> None:
    huge = tmp_path / "all_reduce_perf-huge.txt"
    with huge.open("wb") as fh:  # sparse: 300 MiB by its size, nothing on disk
        fh.truncate(300 * 2**20)
    assert os.stat(huge).st_size > MAX_TEXT_BYTES
    result = CliRunner().invoke(main, [command, str(huge)])
    assert result.exit_code == 2, result.output
    assert f"of at most {MAX_TEXT_BYTES:,} bytes" in result.output and f"'{300 * 2**20:,} bytes'" in result.output
    assert "COLLSCOPE_MAX_INPUT_BYTES=4G" in result.output and "Traceback" not in result.output


def test_the_cap_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLSCOPE_MAX_INPUT_BYTES", "1K")
    refused = CliRunner().invoke(main, ["ingest", str(FIXTURE)])
    assert refused.exit_code == 2 and "of at most 1,024 bytes" in refused.output
    monkeypatch.setenv("COLLSCOPE_MAX_INPUT_BYTES", "1M")
    read = CliRunner().invoke(main, ["ingest", str(FIXTURE)])
    assert read.exit_code == 0 and "alltoall, 128 ranks" in read.output
    monkeypatch.setenv("COLLSCOPE_MAX_INPUT_BYTES", "lots")
    bad = CliRunner().invoke(main, ["ingest", str(FIXTURE)])
    assert bad.exit_code == 2 and "expected a size such as 512M or 4G" in bad.output
