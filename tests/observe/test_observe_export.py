"""observe export (issue 27 item 6): the latest value per series as a node_exporter textfile that Prometheus'
own text parser reads, with NCCL Inspector's metric and label names, written atomically."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from collscope.cli import main
from collscope.observe import ingest
from collscope.observe.export import message_size_label
from collscope.traces.inspector_prom import parse_message_size

NIGHT0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)
HOSTILE = '/shared/topo "rack 7"\\a\nb.xml'
"""A settings value with a quote, a backslash and a newline: label values escape all three."""


def _record(night: int, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "engine": "nccl-tests", "backend": "nccl", "op": "all_reduce", "size_bytes": 1 << 30, "count": None,
        "dtype": "float", "redop": "sum", "root": None, "in_place": False, "nranks": 16, "nnodes": 2,
        "time_us": 1000.0, "algbw_gbps": 100.0, "busbw_gbps": 187.5, "hosts": ["gpu-a01", "gpu-a02"],
        "gpu": "NVIDIA H200", "cluster": "alpha", "nccl_version": "2.28.9",
        "timestamp": (NIGHT0 + timedelta(days=night)).isoformat()}
    record.update(fields)
    return record


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three nights of alpha (all_reduce at 1 MiB and 1 GiB, all_gather of 8 GiB on 8 ranks, the last night on
    NCCL 2.29.2 with three repeats at 1 GiB and one failed record), one older night of beta."""
    inputs = tmp_path_factory.mktemp("nights")
    files = []
    for night in range(3):
        version = "2.29.2" if night == 2 else "2.28.9"
        recs = [_record(night, size_bytes=1 << 20, time_us=30.0 + night, busbw_gbps=65.0 + night,
                        algbw_gbps=35.0 + night, nccl_version=version)]
        repeats = (180.0, 170.0, 175.0) if night == 2 else (190.0 + night,)
        recs += [_record(night, busbw_gbps=b, algbw_gbps=b / 1.875, time_us=1e6 * (1 << 30) / (b / 1.875 * 1e9),
                         repeat=i, nccl_version=version) for i, b in enumerate(repeats)]
        if night == 2:
            recs.append(_record(night, busbw_gbps=1.0, ok=False, wrong=12, repeat=3, nccl_version=version))
        recs.append(_record(night, op="all_gather", size_bytes=8 << 30, nranks=8, nnodes=1, busbw_gbps=300.0 + night,
                            algbw_gbps=342.9, time_us=25000.0, redop=None, nccl_version=version,
                            settings={"NCCL_TOPO_FILE": HOSTILE}))
        files.append(_write(inputs / f"alpha-night{night}.jsonl", recs))
    files.append(_write(inputs / "beta.jsonl", [_record(0, cluster="beta", busbw_gbps=150.0, nranks=32, nnodes=4,
                                                        hosts=[f"b{i}" for i in range(4)])]))
    root = inputs / "store"
    report = ingest(files, root)
    assert report.records == 13 and not report.problems, report.problems
    return root


def _families(text: str) -> dict[str, list[Any]]:
    """Samples by metric name (the parser gives each sample of a family without # TYPE as a family of its own)."""
    families: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        families.setdefault(family.name, []).extend(family.samples)
    return families


def _export(store: Path, path: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["observe", "export", "--prometheus", str(path), "--store", str(store),
                                       *extra])
    return result.exit_code, result.output


def test_the_latest_value_per_series_parses_with_prometheus_client(store: Path, tmp_path: Path) -> None:
    path = tmp_path / "collscope.prom"
    code, out = _export(store, path)
    assert code == 0, out
    assert out.startswith(f"wrote 4 series (16 samples) to {path}; newest run 2026-11-03T02:00:00")
    families = _families(path.read_text())
    assert set(families) == {"nccl_bus_bandwidth_gbs", "nccl_algorithm_bandwidth_gbs",
                             "nccl_collective_exec_time_microseconds", "collscope_observe_run_timestamp_seconds"}
    busbw = {(s.labels["cluster"], s.labels["collective"], s.labels["size_bytes"]): s for s in
             families["nccl_bus_bandwidth_gbs"]}
    assert sorted(busbw) == [("alpha", "AllGather", str(8 << 30)), ("alpha", "AllReduce", str(1 << 20)),
                             ("alpha", "AllReduce", str(1 << 30)), ("beta", "AllReduce", str(1 << 30))]
    big = busbw[("alpha", "AllReduce", str(1 << 30))]
    assert big.value == pytest.approx(175.0)  # the last night's median of three repeats; the failed record left out
    assert big.labels == {"cluster": "alpha", "slurm_job_id": "unknown", "n_nodes": "2", "nranks": "16",
                          "collective": "AllReduce", "message_size": "1-2GB", "size_bytes": str(1 << 30),
                          "dtype": "float", "settings": "default", "engine": "nccl-tests", "nccl_version": "2.29.2",
                          "gpu_model": "NVIDIA H200"}
    assert busbw[("alpha", "AllReduce", str(1 << 20))].value == pytest.approx(67.0)
    assert busbw[("alpha", "AllReduce", str(1 << 20))].labels["message_size"] == "1-2MB"
    gather = busbw[("alpha", "AllGather", str(8 << 30))]
    assert gather.value == pytest.approx(302.0)
    assert gather.labels["message_size"] == "1-2GB"  # one rank's buffer: 8 GiB gathered over 8 ranks
    assert gather.labels["settings"] == f"NCCL_TOPO_FILE={HOSTILE}"  # quote, backslash, newline round-trip
    assert busbw[("beta", "AllReduce", str(1 << 30))].labels["nccl_version"] == "2.28.9"
    times = {(s.labels["cluster"], s.labels["size_bytes"]): s.value for s in
             families["nccl_collective_exec_time_microseconds"] if s.labels["collective"] == "AllReduce"}
    assert times[("alpha", str(1 << 20))] == pytest.approx(32.0)
    stamps = {(s.labels["cluster"], s.labels["size_bytes"]): s.value for s in
              families["collscope_observe_run_timestamp_seconds"]}
    assert stamps[("alpha", str(1 << 30))] == (NIGHT0 + timedelta(days=2)).timestamp()
    assert stamps[("beta", str(1 << 30))] == NIGHT0.timestamp()


def test_inspector_families_carry_no_help_or_type_and_samples_no_timestamp(store: Path, tmp_path: Path) -> None:
    path = tmp_path / "collscope.prom"
    assert _export(store, path)[0] == 0
    lines = path.read_text().splitlines()
    comments = [line for line in lines if line.startswith("#")]
    assert comments == ["# HELP collscope_observe_run_timestamp_seconds Unix time of the run whose values the "
                        "other metrics of this label set carry (collscope observe)",
                        "# TYPE collscope_observe_run_timestamp_seconds gauge"]
    names = [line.partition("{")[0] for line in lines if not line.startswith("#")]
    assert names == sorted(names, key=["nccl_bus_bandwidth_gbs", "nccl_algorithm_bandwidth_gbs",
                                       "nccl_collective_exec_time_microseconds",
                                       "collscope_observe_run_timestamp_seconds"].index)  # each family together
    samples = [s for f in text_string_to_metric_families(path.read_text()) for s in f.samples]
    assert samples and all(s.timestamp is None for s in samples)


def test_cluster_option_and_atomic_replacement(store: Path, tmp_path: Path) -> None:
    path = tmp_path / "collscope.prom"
    path.write_text("stale 1\n")
    before = path.stat().st_ino
    code, out = _export(store, path, "--cluster", "beta")
    assert code == 0, out
    clusters = {s.labels["cluster"] for f in text_string_to_metric_families(path.read_text()) for s in f.samples}
    assert clusters == {"beta"}
    assert path.stat().st_ino != before  # a new file renamed over the old one, never rewritten in place
    assert [p.name for p in tmp_path.iterdir()] == ["collscope.prom"]  # no temporary left beside it
    code, out = _export(store, path, "--cluster", "nowhere")
    assert code == 0 and path.read_text() == "" and out.startswith("wrote 0 series (0 samples)")


def test_user_errors_are_one_line_exit_2(store: Path, tmp_path: Path) -> None:
    code, out = _export(store, tmp_path / "collscope.txt")
    assert code == 2 and "reads only files named *.prom" in out and "collscope.prom" in out
    code, out = _export(store, tmp_path / "missing" / "collscope.prom")
    assert code == 2 and "does not exist" in out
    code, out = _export(tmp_path / "no-store", tmp_path / "collscope.prom")
    assert code == 2 and "Traceback" not in out
    assert not (tmp_path / "collscope.prom").exists()


@pytest.mark.parametrize(("op", "size", "nranks", "label"), [
    ("all_reduce", 0, 8, "0B"), ("all_reduce", 1, 8, "1-2B"), ("all_reduce", 1023, 8, "1023-1024B"),
    ("all_reduce", 1024, 8, "1-2KB"), ("all_reduce", 5 << 30, 8, "5-6GB"), ("all_reduce", 3 << 40, 8, "3-4TB"),
    ("all_reduce", 5000 << 40, 8, "5000-5001TB"), ("reduce_scatter", 64 << 20, 4, "16-17MB"),
    ("all_gather", 64 << 20, None, "unknown"), ("broadcast", 64 << 20, None, "64-65MB")])
def test_message_size_is_inspectors_bucket_of_one_ranks_buffer(op: str, size: int, nranks: int | None,
                                                              label: str) -> None:
    assert message_size_label(op, size, nranks) == label
    if label not in ("unknown", "0B"):  # collscope's reader of Inspector's files takes the bucket back
        bucket = parse_message_size(label)
        assert bucket is not None and bucket[1] is not None
        per_rank = size // (nranks if op in ("reduce_scatter", "all_gather") and nranks else 1)
        assert bucket[0] <= per_rank < bucket[1]
