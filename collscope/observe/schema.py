"""The fleet store's schema: one table of columns (name, Arrow type, meaning), defined once.

The store (:mod:`collscope.observe.store`) is two Parquet datasets under one directory:

* ``records/date=YYYY-MM-DD/cluster=NAME/*.parquet``: one row per measurement (:data:`RECORD_COLUMNS`), Hive
  partitioned by the run's UTC date and its cluster (:data:`PARTITION_COLUMNS`: in the directory names, not in
  the files; DuckDB's ``hive_partitioning`` and ``pyarrow.dataset``'s ``partitioning="hive"`` give them back);
* ``sources/*.parquet``: one row per ingested input (:data:`SOURCE_COLUMNS`), the ledger that makes ingest
  idempotent (``source_sha256``) and commits a batch (a batch's records count only once its ledger file exists).

Everything that reads the store (``observe query``, ``changes``, ``report``, ``export``, Spark or Trino) reads
these columns: add a column here (with a meaning), never in a reader. Columns added later are absent from older
files; readers union files by name (DuckDB ``union_by_name``), so older rows read as null there.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = ["Column", "RECORD_COLUMNS", "PARTITION_COLUMNS", "SOURCE_COLUMNS", "RECORDS_SCHEMA", "SOURCES_SCHEMA",
           "PARTITIONING_SCHEMA", "RUN_COLUMNS", "SOURCE_KINDS", "TIME_SOURCES", "SCHEMA_VERSION", "describe"]

SCHEMA_VERSION = 1
"""Written into each file's metadata (``collscope_schema``); bumped when a column changes meaning."""

_STR = pa.string()
_I64 = pa.int64()
_F64 = pa.float64()
_TIME = pa.timestamp("us", tz="UTC")
_MAP = pa.map_(pa.string(), pa.string())


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the store."""

    name: str
    type: pa.DataType
    meaning: str
    run_level: bool = False
    """The same value on every row of one run (``runs`` takes it once per run)."""


SOURCE_KINDS: tuple[str, ...] = ("results", "records", "nccl-tests", "locate", "trace", "inspector")
"""What an input was: a ``sweep run`` results directory (one source per point file), Measurement JSONL
(``collscope ingest --out``, ``bench --out``), an nccl-tests output (text or ``-J``), a ``locate --json``
document, a ``trace --json`` document, NCCL Inspector JSON lines (or the same objects pretty-printed)."""

TIME_SOURCES: tuple[str, ...] = ("record", "option", "mtime")
"""Where ``run_time`` came from: the records' own timestamp (earliest of the run), ``--time``, or the file's
modification time (said in a note at ingest)."""

PARTITION_COLUMNS: tuple[Column, ...] = (
    Column("date", pa.date32(), "UTC date of run_time (directory date=YYYY-MM-DD)", True),
    Column("cluster", _STR, "the cluster: --cluster, else the records' cluster (Slurm's ClusterName), else "
           "'unknown'; characters outside [A-Za-z0-9._-] become '_' (directory cluster=NAME)", True),
)
"""Hive partition keys, in directory order; in the paths only, never in the files."""

RECORD_COLUMNS: tuple[Column, ...] = (
    # -- the run
    Column("run_time", _TIME, "when the run ran (UTC): see run_time_source", True),
    Column("run_time_source", _STR, "where run_time came from: " + " | ".join(TIME_SOURCES), True),
    Column("run_id", _STR, "one run: sha256 (16 hex) of the source's content hash and the run's index in it "
           "(a results directory: one run per point; an nccl-tests output: one per pasted run; Inspector: one per "
           "communicator of the file)", True),
    Column("kind", _STR, "what the input was: " + " | ".join(SOURCE_KINDS), True),
    # -- what was measured (the Measurement record's fields, DESIGN.md)
    Column("engine", _STR, "what measured it: nccl-tests | torch | mpi (Measurement records, locate), "
           "nccl-inspector, job-trace", True),
    Column("engine_version", _STR, "the engine's version when logged (nccl-tests version, torch version)", True),
    Column("backend", _STR, "the collective library: nccl | rccl | gloo | mpi | ...", True),
    Column("op", _STR, "the collective: all_reduce | all_gather | reduce_scatter | alltoall | broadcast | ..."),
    Column("size_bytes", _I64, "nccl-tests' size: total bytes (all_gather/reduce_scatter: the gathered total)"),
    Column("count", _I64, "elements; null when unknown"),
    Column("dtype", _STR, "element type (float, bfloat16, ...); null when unknown"),
    Column("redop", _STR, "reduction (sum, ...); null for ops without one or unknown"),
    Column("root", _I64, "root rank of rooted ops; null otherwise"),
    Column("in_place", pa.bool_(), "in-place placement; null when unknown (traces, Inspector)"),
    Column("nranks", _I64, "ranks of the communicator; null when unknown"),
    Column("nnodes", _I64, "nodes of the communicator; null when unknown, never a silent 1"),
    Column("time_us", _F64, "time per operation, microseconds"),
    Column("algbw_gbps", _F64, "algorithm bandwidth, decimal GB/s"),
    Column("busbw_gbps", _F64, "bus bandwidth, decimal GB/s (nccl-tests' factors); null when unknown"),
    Column("wrong", _I64, "wrong elements found by the check; null when not checked"),
    Column("ok", pa.bool_(), "false when values were wrong, the run reported out-of-bounds values, or a locate "
           "test was slow/failed"),
    Column("iters", _I64, "timed iterations; null when unknown"),
    Column("warmup", _I64, "warm-up iterations; null when unknown"),
    Column("repeat", _I64, "0-based repeat index of this size in the run"),
    Column("time_over_ranks", _STR, "how time_us combines the ranks' times: max | mean | min | rank0; null unknown"),
    Column("process_shape", _STR, "PxTxG of the launch (processes x threads x GPUs per thread); null unknown"),
    # -- the configuration
    Column("settings_text", _STR, "the tuning settings, canonical: sorted K=V joined by ';' (secrets REDACTED), "
           "'default' when none (collscope.vocab.configs.config_of)", True),
    Column("settings", _MAP, "the same settings as a map (variable -> value)", True),
    Column("tags", _MAP, "facts of the input kind that are neither settings nor provenance (locate: test_kind, "
           "rail, status, round; trace: calls, goodput_ratio, bench_busbw_gbps, ran (the (algorithm, protocol) "
           "NCCL ran, where the trace says); Inspector: comm_id, rank, algorithm, protocol)"),
    # -- provenance
    Column("hosts", pa.list_(_STR), "the node set, in rank order as far as the input shows it; [] unknown", True),
    Column("gpu", _STR, "GPU model as the tools print it (NVIDIA H200); null unknown", True),
    Column("nccl_version", _STR, "NCCL version (2.29.2, 2.29.2+cuda13.0 as logged); null unknown", True),
    Column("nccl_git", _STR, "NCCL's git version when logged ('NCCL git version <branch> <describe>' INFO line, "
           "Inspector git_rev); null otherwise", True),
    Column("net_plugin", _STR, "net plugin name as NCCL logged it (NET/Plugin: Loaded net plugin NAME); null "
           "when not logged", True),
    Column("net_plugin_version", _STR, "its plugin API version (v10)", True),
    Column("tuner_plugin", _STR, "tuner plugin name (TUNER/Plugin: Using NAME); null when not logged", True),
    Column("tuner_plugin_version", _STR, "its plugin API version", True),
    Column("profiler_plugin", _STR, "profiler plugin name (PROFILER/Plugin: Loaded NAME); null when not logged",
           True),
    Column("profiler_plugin_version", _STR, "its plugin API version", True),
    Column("fabric_fingerprint", _STR, "hash of the topology when known (a results directory's "
           "sweep.json topology_hash); null unknown", True),
    Column("slurm_job_id", _STR, "Slurm job id when known (sweep.json, SLURM_JOB_ID in an -J output's env)", True),
    Column("slurm_step_id", _STR, "Slurm step id when known", True),
    Column("point_id", _STR, "sweep point id (results directories, locate tests); null otherwise", True),
    Column("sweep_id", _STR, "sweep id (results directories); null otherwise", True),
    Column("source", _STR, "the input file, absolute path (a results directory: its point file)", True),
    Column("source_sha256", _STR, "sha256 of the input's bytes: the idempotency key", True),
    Column("batch_id", _STR, "the ingest batch that wrote the row; a row counts only when sources/ holds its "
           "batch", True),
    Column("ingested_at", _TIME, "when ingest wrote the row (UTC)", True),
)
"""The columns of ``records`` files, in file order."""

SOURCE_COLUMNS: tuple[Column, ...] = (
    Column("source_sha256", _STR, "sha256 of the input's bytes"),
    Column("source", _STR, "the input file, absolute path"),
    Column("kind", _STR, "what it was: " + " | ".join(SOURCE_KINDS)),
    Column("records", _I64, "rows it added to records"),
    Column("runs", _I64, "runs it held"),
    Column("batch_id", _STR, "the batch whose records files hold its rows"),
    Column("ingested_at", _TIME, "when (UTC)"),
    Column("notes", pa.list_(_STR), "what ingest said about it (time from mtime, lines skipped, ...)"),
)
"""The columns of ``sources`` files (the ledger)."""

RUN_COLUMNS: tuple[str, ...] = ("date", "cluster", *(c.name for c in RECORD_COLUMNS if c.run_level))
"""The columns of the ``runs`` view (one row per ``run_id``), besides its counts (``records``, ``ops``,
``min_bytes``, ``max_bytes``, ``median_busbw_gbps``)."""

RECORDS_SCHEMA = pa.schema([pa.field(c.name, c.type) for c in RECORD_COLUMNS],
                           metadata={"collscope_schema": str(SCHEMA_VERSION)})
SOURCES_SCHEMA = pa.schema([pa.field(c.name, c.type) for c in SOURCE_COLUMNS],
                           metadata={"collscope_schema": str(SCHEMA_VERSION)})
PARTITIONING_SCHEMA = pa.schema([pa.field(c.name, c.type) for c in PARTITION_COLUMNS])
"""For ``pyarrow.dataset.partitioning(PARTITIONING_SCHEMA, flavor="hive")``: typed partition keys (the plain
``partitioning="hive"`` reads ``date`` as a string)."""


def describe() -> list[tuple[str, str, str]]:
    """(name, Arrow type, meaning) of every ``records`` column, partition keys first: the table docs/observe.md
    shows."""
    return [(c.name, str(c.type), c.meaning + (" (partition key)" if c in PARTITION_COLUMNS else ""))
            for c in (*PARTITION_COLUMNS, *RECORD_COLUMNS)]
