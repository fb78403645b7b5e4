"""observe parses files and detects changes in a pool of processes: the same store, the same changes as one process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from collscope.errors import ConfigError
from collscope.observe import ingest, ingestion, query, series
from collscope.observe.pool import process_pool, workers
from collscope.observe.series import changes_report
from tests.observe.history import PLANTED, QUIET, night_time, write_history

ROOT = Path(__file__).resolve().parents[2]
NOW = night_time(61)
ROWS = ("SELECT source, size_bytes, in_place, busbw_gbps, nccl_version, run_time, run_time_source FROM records "
        "ORDER BY source, size_bytes, in_place")


def _inputs(tmp_path: Path) -> Path:
    """Seven chunks' worth of nightly JSONL files, one damaged and one given twice (copied under another name)."""
    inputs = tmp_path / "in"
    paths = write_history(inputs, [QUIET])
    assert len(paths) > 6 * ingestion.CHUNK_FILES
    paths[7].write_text(paths[7].read_text() + "{not json\n")  # a damaged line: reported, the rest ingested
    paths[50].write_bytes(b"\x00\x01 not an input at all")  # a damaged input: left out whole
    (inputs / "beta" / "zz-again.jsonl").write_bytes(paths[3].read_bytes())  # the same content twice
    return inputs


@pytest.mark.parametrize("count", ["1", "2"])
def test_pool_and_single_process_write_the_same_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      count: str) -> None:
    monkeypatch.setattr(ingestion, "CHUNK_FILES", 8)
    inputs = _inputs(tmp_path)
    monkeypatch.setenv("COLLSCOPE_OBSERVE_WORKERS", "1")
    single = ingest([inputs], tmp_path / "single")
    monkeypatch.setenv("COLLSCOPE_OBSERVE_WORKERS", count)
    pooled = ingest([inputs], tmp_path / "pooled")
    assert pooled.records == single.records > 0
    assert pooled.sources == single.sources == QUIET.nights - 1  # the damaged input left out, the copy skipped
    assert pooled.skipped == single.skipped == 1
    assert pooled.problems == single.problems and len(pooled.problems) == 2
    assert any("night-007.jsonl" in p for p in pooled.problems)
    assert any("night-050.jsonl" in p and "input left out" in p for p in pooled.problems)
    assert query(tmp_path / "pooled", ROWS).equals(query(tmp_path / "single", ROWS))
    again = ingest([inputs], tmp_path / "pooled")
    assert again.records == 0


def test_workers_option_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLSCOPE_OBSERVE_WORKERS", "3")
    assert workers() == 3
    monkeypatch.setenv("COLLSCOPE_OBSERVE_WORKERS", "zero")
    with pytest.raises(ConfigError, match="COLLSCOPE_OBSERVE_WORKERS"):
        workers()


def test_changes_found_in_a_pool_are_the_ones_found_in_one_process(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    monkeypatch.setenv("COLLSCOPE_OBSERVE_WORKERS", "1")
    ingest(write_history(tmp_path / "in", [PLANTED, QUIET]), store)
    single = changes_report(store, now=NOW).to_dict()
    monkeypatch.setenv("COLLSCOPE_OBSERVE_WORKERS", "2")
    monkeypatch.setattr(series, "POOL_MIN_CELLS", 0)
    calls: list[int] = []
    monkeypatch.setattr(series, "process_pool", lambda n: calls.append(n) or process_pool(n))
    pooled = changes_report(store, now=NOW).to_dict()
    assert calls == [2]
    assert pooled == single
    assert single["regressions"] == 1 and single["series"] == 2


def test_a_script_without_a_main_guard_is_not_run_again_by_the_pool(tmp_path: Path) -> None:
    """The pools fork: a spawned or fork-server child would run the caller's main module again (a plain script
    calling collscope at its top level), repeating its side effects and breaking the pool."""
    store, marks = tmp_path / "store", tmp_path / "marks.txt"
    ingest(write_history(tmp_path / "in", [PLANTED, QUIET]), store)  # two series: a pool of two
    script = tmp_path / "nightly.py"
    script.write_text(
        "import os\n"
        f"open({str(marks)!r}, 'a').write('ran\\n')\n"
        "os.environ['COLLSCOPE_OBSERVE_WORKERS'] = '2'\n"
        "from collscope.observe import series\n"
        "series.POOL_MIN_CELLS = 0\n"
        "now = series.datetime(2026, 12, 1, tzinfo=series.timezone.utc)\n"
        f"report = series.changes_report({str(store)!r}, now=now)\n"
        "print(len(report.regressions))\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "1"
    assert marks.read_text() == "ran\n"
