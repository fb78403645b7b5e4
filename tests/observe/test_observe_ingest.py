"""observe ingest (issue 27 items 1-2): every input kind into the store with its provenance, idempotency,
damaged inputs reported with file and line while the rest is ingested, and the store read by plain pyarrow."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.collectives.record import Measurement, write_jsonl
from collscope.errors import ConfigError
from collscope.observe import connect, ingest, query
from collscope.observe.provenance import logged_provenance
from collscope.observe.schema import PARTITIONING_SCHEMA, RECORD_COLUMNS, RECORDS_SCHEMA, describe
from tests.analysis.recommend_frames import cell_rows, write_results

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "observe"
NCCL_TESTS_TEXT = FIXTURES / "all_reduce_perf-v2.19.6-nccl2.29.2-2x8-info-git-plugins.txt"
INSPECTOR = FIXTURES / "b200-r07n03-pid88120.log"
LOCATE = FIXTURES / "locate-4nodes-one-broken.json"
TRACE = FIXTURES / "trace-4rank-ddp-summary.json"
J_OUTPUT = ROOT / "tests" / "fixtures" / "nccl-tests" / "all_reduce_perf-v2.19.6-J-output.json"
NIGHT = datetime(2026, 11, 30, 2, 0, tzinfo=timezone.utc)


def _results_dir(root: Path) -> Path:
    """A sweep run results directory (two points: default and NCCL_ALGO=Ring) with a topology hash and a job."""
    write_results(root, cell_rows(sizes=[1 << 20, 1 << 22], busbw=40.0, knobs={"NCCL_ALGO": "Ring"}),
                  cell_rows(sizes=[1 << 20, 1 << 22], busbw=38.0))
    doc = json.loads((root / "sweep.json").read_text())
    doc.update(topology_hash="sha256:9f3c0e2a", slurm_job_id="771203")
    (root / "sweep.json").write_text(json.dumps(doc))
    (root / "points" / "p-default.log").write_text(
        "gpu-a01:100:100 [0] NCCL INFO NCCL version 2.27.5+cuda12.9\n"
        "gpu-a01:100:120 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v10 (v10)\n")
    return root


def _rows(store: Path, sql: str) -> list[dict]:
    return query(store, sql).to_pylist()


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    j_with_job = tmp_path / "j-with-job.json"
    doc = json.loads(J_OUTPUT.read_text())
    doc["env"] = [*doc["env"], "SLURM_JOB_ID=880021", "SLURM_STEP_ID=3"]
    j_with_job.write_text(json.dumps(doc))
    return {"results": _results_dir(tmp_path / "sweep"), "text": NCCL_TESTS_TEXT, "json": j_with_job,
            "inspector": INSPECTOR, "locate": LOCATE, "trace": TRACE}


def test_every_input_kind_lands_with_its_provenance(tmp_path: Path, inputs: dict[str, Path]) -> None:
    store = tmp_path / "store"
    report = ingest(inputs.values(), store, cluster="alpha", time_=NIGHT)
    assert report.problems == []
    by_kind = {r["kind"]: r for r in _rows(store, "SELECT kind, count(*) AS n, count(DISTINCT run_id) AS runs "
                                                  "FROM records GROUP BY kind")}
    # results: 2 points x 2 sizes x 3 repeats; text: 4 sizes x 2 placements; -J: its 4 sizes x 2; Inspector:
    # 4 collectives x 2 ranks (the p2p record left out); locate: the 2 tests with a busbw; trace: 2 summary rows
    assert {k: (v["n"], v["runs"]) for k, v in by_kind.items()} == {
        "results": (12, 2), "nccl-tests": (8 + 8, 2), "inspector": (8, 1), "locate": (2, 2), "trace": (2, 1)}
    assert report.records == 40 and report.sources == 2 + 5

    [text] = _rows(store, f"SELECT DISTINCT nccl_version, nccl_git, net_plugin, net_plugin_version, tuner_plugin, "
                          f"tuner_plugin_version, profiler_plugin, profiler_plugin_version, hosts, gpu, nranks, "
                          f"nnodes, run_time_source, run_time, cluster, date FROM records "
                          f"WHERE source = '{NCCL_TESTS_TEXT}'")
    assert text == {"nccl_version": "2.29.2", "nccl_git": "v2.29 v2.29.2-1-g5067397",
                    "net_plugin": "NCCL RDMA Plugin v11", "net_plugin_version": "v11",
                    "tuner_plugin": "site-tuner", "tuner_plugin_version": "v5", "profiler_plugin": "Inspector",
                    "profiler_plugin_version": "v5", "hosts": ["h200-n017", "h200-n018"], "gpu": "NVIDIA H200",
                    "nranks": 16, "nnodes": 2, "run_time_source": "option", "run_time": NIGHT, "cluster": "alpha",
                    "date": NIGHT.date()}

    [j] = _rows(store, f"SELECT DISTINCT run_time, run_time_source, slurm_job_id, slurm_step_id, settings_text, "
                       f"settings FROM records WHERE source = '{inputs['json']}'")
    assert j["run_time"] == datetime(2025, 11, 3, 14, 2, 11, tzinfo=timezone.utc) and j["run_time_source"] == "record"
    assert (j["slurm_job_id"], j["slurm_step_id"]) == ("880021", "3")
    assert j["settings_text"] == "NCCL_ALGO=Ring;NCCL_IB_HCA=mlx5_0,mlx5_1"  # from the -J env, as analyze names it
    assert j["settings"] == [("NCCL_ALGO", "Ring"), ("NCCL_IB_HCA", "mlx5_0,mlx5_1")]

    results = _rows(store, "SELECT DISTINCT point_id, settings_text, settings, fabric_fingerprint, slurm_job_id, "
                           "nccl_version, net_plugin, run_time_source, source FROM records WHERE kind = 'results' "
                           "ORDER BY point_id")
    assert [(r["point_id"], r["settings_text"], r["settings"]) for r in results] == [
        ("p-NCCL_ALGO=Ring", "NCCL_ALGO=Ring", [("NCCL_ALGO", "Ring")]), ("p-default", "default", [])]
    assert {(r["fabric_fingerprint"], r["slurm_job_id"], r["net_plugin"], r["run_time_source"]) for r in results} \
        == {("sha256:9f3c0e2a", "771203", "NCCL RDMA Plugin v10", "record")}
    assert results[1]["source"] == str((inputs["results"] / "points" / "p-default.jsonl").resolve())

    inspector = _rows(store, "SELECT op, size_bytes, busbw_gbps, nranks, nnodes, nccl_git, run_time, tags FROM "
                             "records WHERE kind = 'inspector' ORDER BY op, busbw_gbps")
    published = {}  # the plugin's own busbw (coll_busbw_gbs) per (op, size): collscope's must agree
    for line in INSPECTOR.read_text().splitlines():
        perf = json.loads(line).get("coll_perf")
        if perf:
            published.setdefault(perf["coll"], []).append(perf["coll_busbw_gbs"])
    names = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter"}
    for coll, values in published.items():
        ours = sorted(r["busbw_gbps"] for r in inspector if r["op"] == names[coll])
        assert ours == pytest.approx(sorted(values), rel=1e-6)
    assert {(r["nranks"], r["nnodes"], r["nccl_git"]) for r in inspector} == {(16, 2, "v2.28.7-1-g8a2b3c1")}
    assert min(r["run_time"] for r in inspector) == datetime(2025, 12, 2, 2, 0, 42, tzinfo=timezone.utc)
    assert {dict(r["tags"])["comm_id"] for r in inspector} == {"0x3c81a9e07f2d4410"}

    locate = _rows(store, "SELECT hosts, ok, busbw_gbps, tags, op, size_bytes FROM records WHERE kind = 'locate' "
                          "ORDER BY busbw_gbps")
    assert [(r["hosts"], r["ok"], dict(r["tags"])["status"]) for r in locate] == [
        (["gb-c03", "gb-c04"], False, "slow"), (["gb-c01", "gb-c02"], True, "ok")]
    trace = _rows(store, "SELECT op, time_us, busbw_gbps FROM records WHERE kind = 'trace' ORDER BY op")
    assert [(r["op"], r["time_us"], r["busbw_gbps"]) for r in trace] == [
        ("all_gather", 200.0, 62.9), ("all_reduce", 1300.0, 151.3)]


def test_run_time_is_the_records_else_time_option_else_mtime_said(tmp_path: Path) -> None:
    text = tmp_path / "nightly.txt"
    shutil.copy(NCCL_TESTS_TEXT, text)
    stamp = datetime(2026, 10, 7, 3, 30, tzinfo=timezone.utc).timestamp()
    import os
    os.utime(text, (stamp, stamp))
    report = ingest([text], tmp_path / "s")
    [row] = _rows(tmp_path / "s", "SELECT DISTINCT run_time, run_time_source, date, cluster FROM records")
    assert row == {"run_time": datetime(2026, 10, 7, 3, 30, tzinfo=timezone.utc), "run_time_source": "mtime",
                   "date": datetime(2026, 10, 7).date(), "cluster": "unknown"}
    assert any("modification time (2026-10-07T03:30:00+00:00)" in n for n in report.notes)
    assert (tmp_path / "s" / "records" / "date=2026-10-07" / "cluster=unknown").is_dir()


def test_ingesting_twice_adds_nothing_and_a_resumed_sweep_only_its_new_points(tmp_path: Path,
                                                                              inputs: dict[str, Path]) -> None:
    store = tmp_path / "store"
    first = ingest(inputs.values(), store, time_=NIGHT)
    before = _rows(store, "SELECT count(*) AS n FROM records")[0]["n"]
    again = ingest(inputs.values(), store, time_=NIGHT)
    assert (again.records, again.sources, again.batches, again.skipped) == (0, 0, 0, first.sources)
    assert _rows(store, "SELECT count(*) AS n FROM records")[0]["n"] == before
    assert _rows(store, "SELECT count(*) AS n, count(DISTINCT source_sha256) AS d FROM sources")[0] == \
        {"n": first.sources, "d": first.sources}
    # the same bytes under another name are the same input
    copy = tmp_path / "copy-of-trace.json"
    shutil.copy(TRACE, copy)
    assert ingest([copy], store).skipped == 1
    # a resumed sweep: one more point file; only it is added
    write_jsonl(inputs["results"] / "points" / "p-NCCL_ALGO=Tree.jsonl", [Measurement(
        engine="nccl-tests", backend="nccl", op="all_reduce", size_bytes=1 << 20, count=1 << 18, dtype="float",
        redop="sum", root=None, in_place=False, nranks=8, nnodes=1, time_us=30.0, algbw_gbps=35.0, busbw_gbps=61.25,
        settings={"NCCL_ALGO": "Tree"}, point_id="p-NCCL_ALGO=Tree", sweep_id="sw-test",
        timestamp="2026-11-30T02:10:00Z")])
    resumed = ingest([inputs["results"]], store)
    assert (resumed.sources, resumed.records, resumed.skipped) == (1, 1, 2)


def test_a_damaged_input_is_reported_with_file_and_line_and_the_rest_is_ingested(tmp_path: Path) -> None:
    lines = INSPECTOR.read_text().splitlines(keepends=True)
    broken = tmp_path / "node-pid1.log"
    broken.write_text("".join(lines[:2]) + '{"header": {"id": "0x1", "rank": 0, "n_ranks": 16}, "coll_perf": {"coll"\n'
                      + "".join(lines[2:]))
    records = tmp_path / "bench.jsonl"
    good = Measurement(engine="torch", backend="nccl", op="all_gather", size_bytes=1 << 24, count=1 << 22,
                       dtype="float", redop=None, root=None, in_place=False, nranks=8, nnodes=1, time_us=120.0,
                       algbw_gbps=139.8, busbw_gbps=122.3, timestamp="2026-11-29T01:00:00+00:00")
    write_jsonl(records, [good, good])
    with open(records, "a") as fh:
        fh.write('{"engine": "torch", "op": "all_gather", "size_bytes": "big"}\n')
        fh.write('{"engine": "torch", "backend": "nccl"')  # cut mid-line by a killed writer
    garbage = tmp_path / "notes.txt"
    garbage.write_text("nothing to see here\n")
    result = CliRunner().invoke(main, ["observe", "ingest", str(broken), str(records), str(garbage), str(LOCATE),
                                       "--store", str(tmp_path / "s")])
    assert result.exit_code == 1, result.output
    damaged = [line for line in result.output.splitlines() if line.startswith("damaged: ")]
    assert any(f"{broken}:3:" in line and "line left out" in line for line in damaged), damaged
    assert any(f"{records}:3:" in line for line in damaged) and any(f"{records}:4:" in line for line in damaged)
    assert any(f"{garbage}:" in line and "input left out" in line for line in damaged)
    counts = {r["kind"]: r["n"] for r in _rows(tmp_path / "s", "SELECT kind, count(*) AS n FROM records GROUP BY kind")}
    assert counts == {"inspector": 8, "records": 2, "locate": 2}
    notes = _rows(tmp_path / "s", f"SELECT notes FROM sources WHERE source = '{broken}'")[0]["notes"]
    assert any(":3:" in n for n in notes)


def test_bad_options_and_paths_are_user_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, said in ((["--time", "yesterday"], "--time 'yesterday' is invalid"),
                       (["--cluster", "a/b"], "--cluster 'a/b' is invalid")):
        result = runner.invoke(main, ["observe", "ingest", str(TRACE), "--store", str(tmp_path / "s"), *args])
        assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output
    result = runner.invoke(main, ["observe", "ingest", str(tmp_path / "missing.txt"), "--store", str(tmp_path / "s")])
    assert result.exit_code == 2 and "no such file or directory" in result.output
    (tmp_path / "not-a-store").mkdir()
    (tmp_path / "not-a-store" / "thesis.tex").write_text("x")
    with pytest.raises(ConfigError, match="not a collscope store"):
        ingest([TRACE], tmp_path / "not-a-store")


def test_plain_pyarrow_reads_the_store_as_spark_or_trino_would(tmp_path: Path, inputs: dict[str, Path]) -> None:
    store = tmp_path / "store"
    ingest(inputs.values(), store, cluster="alpha", time_=NIGHT)
    dataset = ds.dataset(store / "records", format="parquet",
                         partitioning=ds.partitioning(PARTITIONING_SCHEMA, flavor="hive"))
    table = dataset.to_table()
    assert table.num_rows == _rows(store, "SELECT count(*) AS n FROM records")[0]["n"] == 40
    assert table.schema.field("date").type == pa.date32()
    assert set(table.column("cluster").to_pylist()) == {"alpha"}
    for field in RECORDS_SCHEMA:
        assert table.schema.field(field.name).type == field.type
    dates = set(table.column("date").to_pylist())
    assert datetime(2025, 11, 3).date() in dates and NIGHT.date() in dates
    ledger = ds.dataset(store / "sources", format="parquet").to_table()
    assert set(table.column("batch_id").to_pylist()) <= set(ledger.column("batch_id").to_pylist())


def test_connect_returns_duckdb_with_records_runs_and_sources(tmp_path: Path, inputs: dict[str, Path]) -> None:
    store = tmp_path / "store"
    ingest([inputs["text"], inputs["locate"]], store, time_=NIGHT)
    con = connect(store)
    runs = con.sql("SELECT kind, records, min_bytes, max_bytes, hosts FROM runs ORDER BY kind, records").fetchall()
    assert runs == [("locate", 1, 268435456, 268435456, ["gb-c01", "gb-c02"]),
                    ("locate", 1, 268435456, 268435456, ["gb-c03", "gb-c04"]),
                    ("nccl-tests", 8, 1 << 20, 1 << 26, ["h200-n017", "h200-n018"])]
    assert con.execute("SELECT count(*) FROM sources").fetchall() == [(2,)]


def test_provenance_lines_as_nccl_prints_them() -> None:
    text = NCCL_TESTS_TEXT.read_text()
    assert logged_provenance(text)["tuner_plugin"] == "site-tuner"
    # NCCL's own 'using internal' lines name no plugin: not logged, never a made-up name
    internal = ("node:1:2 [0] NCCL INFO TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.\n"
                "node:1:2 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v9 symbol.\n"
                "NCCL version 2.24.3+cuda12.2\n")
    assert logged_provenance(internal) == {"nccl_version": "2.24.3+cuda12.2"}
    assert logged_provenance("# nThread 1 nGpus 1\n") == {}


def test_schema_is_one_documented_table(tmp_path: Path) -> None:
    names = [c.name for c in RECORD_COLUMNS]
    assert len(names) == len(set(names)) and all(c.meaning for c in RECORD_COLUMNS)
    doc = (ROOT / "docs" / "observe.md").read_text()
    for name, arrow_type, _ in describe():
        assert f"| `{name}` | `{arrow_type}` |" in doc, f"docs/observe.md does not list column {name}"


def test_a_damaged_results_directory_is_named_and_the_other_inputs_ingested(tmp_path: Path,
                                                                             inputs: dict[str, Path]) -> None:
    (inputs["results"] / "points" / "p-default.jsonl").write_text("")  # a point file left empty
    report = ingest([inputs["results"], TRACE], tmp_path / "store")
    assert len(report.problems) == 1 and "p-default.jsonl" in report.problems[0]
    assert _rows(tmp_path / "store", "SELECT kind, count(*) AS n FROM records GROUP BY kind") == [
        {"kind": "trace", "n": 2}]


def test_a_store_inside_an_input_directory_is_not_read_as_input(tmp_path: Path) -> None:
    shutil.copy(TRACE, tmp_path / "trace.json")
    first = ingest([tmp_path], tmp_path / "store")
    again = ingest([tmp_path], tmp_path / "store")
    assert (first.records, first.problems, again.records, again.problems, again.skipped) == (2, [], 0, [], 1)
