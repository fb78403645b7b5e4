"""observe ingest parses files in a pool of processes: the store it writes is the one a single process writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from collscope.errors import ConfigError
from collscope.observe import ingest, ingestion, query
from collscope.observe.ingestion import parse_workers
from tests.observe.history import QUIET, write_history

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


@pytest.mark.parametrize("workers", ["1", "2"])
def test_pool_and_single_process_write_the_same_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      workers: str) -> None:
    monkeypatch.setattr(ingestion, "CHUNK_FILES", 8)
    inputs = _inputs(tmp_path)
    monkeypatch.setenv("COLLSCOPE_INGEST_WORKERS", "1")
    single = ingest([inputs], tmp_path / "single")
    monkeypatch.setenv("COLLSCOPE_INGEST_WORKERS", workers)
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
    monkeypatch.setenv("COLLSCOPE_INGEST_WORKERS", "3")
    assert parse_workers() == 3
    monkeypatch.setenv("COLLSCOPE_INGEST_WORKERS", "zero")
    with pytest.raises(ConfigError, match="COLLSCOPE_INGEST_WORKERS"):
        parse_workers()
