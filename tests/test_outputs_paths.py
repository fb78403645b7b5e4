"""Output paths are checked before any work starts: one that cannot be created or written is one line naming
it, exit 2, and the work (parsing, capturing, running a sweep, drawing a report) never begins."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from tests.cli_timeout import one_error_line

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NCCL_TESTS = FIXTURES / "nccl-tests" / "all_reduce_perf-v2.19.6-2x4-wrong-redop-root.txt"


@pytest.fixture(params=["under-a-file", "proc"])
def bad_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A directory that cannot be created: below a regular file, or in /proc."""
    if request.param == "proc":
        if not Path("/proc/self").exists():
            pytest.skip("no /proc here")
        return Path("/proc/nope")
    (tmp_path / "file").write_text("x")
    return tmp_path / "file" / "out"


def _never(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("the work started before the output path was checked")


def test_ingest_out(bad_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("collscope.cli.ingest.parse_nccl_tests_runs", _never)
    line = one_error_line(CliRunner().invoke(main, ["ingest", str(NCCL_TESTS), "--out", str(bad_dir / "r.jsonl")]))
    assert str(bad_dir) in line


def test_ingest_out_that_is_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("collscope.cli.ingest.parse_nccl_tests_runs", _never)
    result = CliRunner().invoke(main, ["ingest", str(NCCL_TESTS), "--out", str(tmp_path)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)  # click's usage error
    assert f"Invalid value for '--out': File '{tmp_path}' is a directory" in result.stderr


def test_sweep_run_out(bad_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("collscope.sweeps.session.run_sweep", _never)  # the check comes before any work
    result = CliRunner().invoke(main, ["sweep", "run", "--preset", "mpi-algos", "--nranks", "2", "--out", str(bad_dir)])
    assert str(bad_dir) in one_error_line(result)


def test_report_out(bad_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("collscope.analysis.report.write_report", _never)
    result = CliRunner().invoke(main, ["report", str(NCCL_TESTS), "--out", str(bad_dir)])
    assert str(bad_dir) in one_error_line(result)


def test_topo_collect_out(bad_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("collscope.topo.capture.capture_raw", _never)
    result = CliRunner().invoke(main, ["topo", "collect", "--out", str(bad_dir)])
    assert str(bad_dir) in one_error_line(result)


@pytest.mark.parametrize("option", ["--png", "--dot", "--graphml"])
def test_topo_show_drawings(bad_dir: Path, option: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("collscope.cli.topo.load_node", _never)
    result = CliRunner().invoke(main, ["topo", "show", "--sample", "hgx-h100-8gpu", option, str(bad_dir / "n.out")])
    assert str(bad_dir) in one_error_line(result)
