"""A killed ingest never corrupts the store (issue 27 item 2): kill -9 mid-way, the store loads, a rerun completes
it; and what a writer killed between its renames leaves is never counted and is cleaned by the next writer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from collscope.collectives.record import Measurement, write_jsonl
from collscope.observe import ingest, query
from collscope.observe.schema import RECORDS_SCHEMA
from tests.conftest import marked_left_after, marked_processes

ROOT = Path(__file__).resolve().parents[2]
FILES, PER_FILE = 300, 100


def _inputs(root: Path) -> Path:
    """300 Measurement JSONL files of 100 records each (30,000 records): one night of 300 node pairs."""
    root.mkdir()
    for f in range(FILES):
        lines = [json.dumps({"engine": "nccl-tests", "backend": "nccl", "op": "all_reduce",
                             "size_bytes": 1 << (10 + i % 20), "count": 1 << (8 + i % 20), "dtype": "float",
                             "redop": "sum", "root": None, "in_place": bool(i % 2), "nranks": 16, "nnodes": 2,
                             "time_us": 10.0 + i, "algbw_gbps": 50.0, "busbw_gbps": 93.75, "repeat": i // 40,
                             "hosts": [f"n{2 * f:04d}", f"n{2 * f + 1:04d}"], "gpu": "NVIDIA H200",
                             "cluster": "beta", "nccl_version": "2.29.2",
                             "timestamp": f"2026-11-{1 + f % 28:02d}T02:00:00Z"}) for i in range(PER_FILE)]
        (root / f"pair-{f:04d}.jsonl").write_text("\n".join(lines) + "\n")
    return root


_INGEST = """
import sys
import collscope.observe.ingestion as ingestion
ingestion.BATCH_RECORDS = 1000
ingestion.ingest([sys.argv[1]], sys.argv[2])
"""


def _counts(store: Path) -> dict:
    return query(store, "SELECT (SELECT count(*) FROM records) AS records, (SELECT sum(records) FROM sources) AS "
                        "ledger, (SELECT count(*) FROM sources) AS sources, (SELECT count(DISTINCT source_sha256) "
                        "FROM sources) AS distinct_sources").to_pylist()[0]


def test_kill_9_mid_ingest_leaves_a_store_that_loads_and_a_rerun_completes(tmp_path: Path,
                                                                          leak_marker: str) -> None:
    inputs = _inputs(tmp_path / "night")
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLLSCOPE_OBSERVE_WORKERS": "2"}  # a pool of parsing processes
    proc = subprocess.Popen([sys.executable, "-c", _INGEST, str(inputs), str(store), leak_marker], env=env,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if len(list((store / "sources").glob("batch-*.parquet"))) >= 3:
                break
            time.sleep(0.005)
        said = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
        assert proc.poll() is None, f"ingest ended before it could be killed: {said}"
        assert len(marked_processes(leak_marker)) == 3  # the ingest and its two parsing processes
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert marked_left_after(leak_marker) == []  # the pool died with it (and with it its copy of the lock)

    killed = _counts(store)  # loads; counts only committed batches, each input once
    assert 0 < killed["records"] < FILES * PER_FILE
    assert killed["records"] == killed["ledger"] == killed["sources"] * PER_FILE
    assert killed["sources"] == killed["distinct_sources"]

    report = ingest([inputs], store)
    assert report.skipped == killed["sources"] and report.problems == []
    done = _counts(store)
    assert done == {"records": FILES * PER_FILE, "ledger": FILES * PER_FILE, "sources": FILES,
                    "distinct_sources": FILES}
    leftovers = [p for p in store.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    hosts = query(store, "SELECT count(DISTINCT hosts) AS n FROM records").to_pylist()[0]["n"]
    assert hosts == FILES


def test_a_batch_killed_between_its_renames_is_never_counted_and_is_cleaned(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_jsonl(inputs / "a.jsonl", [Measurement(
        engine="mpi", backend="mpi", op="all_reduce", size_bytes=1 << 20, count=1 << 18, dtype="float", redop="sum",
        root=None, in_place=False, nranks=4, nnodes=2, time_us=900.0, algbw_gbps=1.16, busbw_gbps=1.75,
        timestamp="2026-11-20T01:00:00Z")])
    store = tmp_path / "store"
    ingest([inputs], store)
    partition = next(store.glob("records/date=*/cluster=*"))
    committed = next(partition.glob("part-*.parquet"))
    # what a writer killed after renaming a records file but before its ledger file leaves, and a half-written
    # temporary file of another
    orphan = partition / "part-00000000deadbeef-0.parquet"
    table = pq.read_table(committed, schema=RECORDS_SCHEMA)
    table = table.set_column(table.schema.get_field_index("batch_id"), "batch_id",
                             pa.array(["00000000deadbeef"] * table.num_rows))
    pq.write_table(table, orphan)
    half = partition / ".part-00000000cafef00d-0.parquet.tmp"
    half.write_bytes(b"PAR1\x00\x00")
    assert query(store, "SELECT count(*) AS n FROM records").to_pylist() == [{"n": 1}]
    ingest([inputs], store)  # nothing new, but the writer cleans up
    assert not orphan.exists() and not half.exists() and committed.exists()
    assert query(store, "SELECT count(*) AS n FROM records").to_pylist() == [{"n": 1}]
