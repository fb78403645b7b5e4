"""A real 2-rank DDP training (gloo, CPU) under torch.profiler, and ``collscope trace`` on its traces.

``ddp_job.py`` trains a few Linear layers with a small ``bucket_cap_mb`` (several buckets) and issues an
all_gather, a reduce_scatter and a broadcast of known sizes per step; this test checks the readers find them
exactly, that the bucket all-reduces add up to the model's parameter bytes, and that the workload written by
``--workload-out`` is one ``recommend --workload`` reads and prices.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.load import load_results
from collscope.cli import main
from collscope.collectives.record import Measurement, write_jsonl
from collscope.traces.compare import bench_curves
from collscope.traces.load import read_traces
from collscope.traces.report import analyze_traces

pytest.importorskip("torch")
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1])}
    subprocess.run([sys.executable, str(HERE / "ddp_job.py"), str(out)], check=True, env=env, timeout=120,
                   capture_output=True)
    return out / "traces", json.loads((out / "expected.json").read_text())


def test_every_collective_found_with_its_size(job):
    out, expected = job
    traces = read_traces([out])
    assert [t.rank for t in traces] == [0, 1] and {t.backend for t in traces} == {"gloo"}
    for t in traces:
        steps = sorted({s.step for s in t.steps})
        assert len(steps) == expected["active_steps"]
        per_step = {s: Counter((c.op, c.size_bytes) for c in t.calls if c.step == s) for s in steps}
        for s in steps:
            for e in expected["explicit"]:
                assert per_step[s][(e["op"], e["size_bytes"])] == 1, (t.source, s, e)
            buckets = [c for c in t.calls if c.step == s and c.op == "all_reduce"]
            assert len(buckets) >= 3  # bucket_cap_mb small enough for several buckets
            assert sum(c.size_bytes or 0 for c in buckets) == expected["param_bytes"]
        assert all(c.duration_us and c.duration_us > 0 for c in t.calls)
    report = analyze_traces(traces)
    assert len(report.steps) == 2 * expected["active_steps"]
    for s in report.steps:
        assert 0 <= s.exposed_comm_us <= s.comm_us <= s.duration_us
        assert s.comm_us > 0
    assert all(row["transfer_us"] is not None for row in report.collectives)  # matched across both ranks


def test_flight_recorder_dumps_of_the_same_run(job):
    out, expected = job
    fr = read_traces([out.parent / "fr"])
    kineto = read_traces([out])
    assert [(t.kind, t.rank) for t in fr] == [("flight_recorder", 0), ("flight_recorder", 1)]
    for t in fr:
        sizes = Counter((c.op, c.size_bytes) for c in t.calls)
        for e in expected["explicit"]:
            # gloo records its reduce_scatter as the all-reduce it runs
            key = ("all_reduce", e["size_bytes"]) if e["op"] == "reduce_scatter" else (e["op"], e["size_bytes"])
            assert sizes[key] == expected["steps"], (key, sizes)
        assert [c.seq for c in t.calls] == list(range(1, len(t.calls) + 1))
        buckets = {c.size_bytes for c in kineto[t.rank].calls if c.op == "all_reduce"}
        assert buckets <= {c.size_bytes for c in t.calls if c.op == "all_reduce"}
    # torch's gloo dumps declare the default group unnamed in pg_config while the calls name it '0'/default_pg
    assert all(c.group_size == 2 and c.group_ranks == (0, 1) for t in fr for c in t.calls)
    report = analyze_traces(fr)  # matched by process group + sequence number; gloo records no durations
    assert report.geometry.nranks.value == 2
    assert all(row["skew_us"] is not None for row in report.collectives)
    assert any("no duration" in w for w in report.warnings)


def _sweep(path: Path, sizes: list[int], slower: float = 1.0) -> Path:
    """A sweep of all_reduce on 2 ranks: the default and NCCL_ALGO=Ring 30% faster, 3 repeats per size (every
    time ``slower`` times longer)."""
    records = []
    for size in sizes:
        for config, factor in (({}, 1.0), ({"NCCL_ALGO": "Ring"}, 0.7)):
            for repeat in range(3):
                time_us = (20 + size / 2e8 * 1e6) * factor * (1 + 0.001 * repeat) * slower
                records.append(Measurement.from_timing(engine="torch", backend="gloo", op="all_reduce",
                                                       size_bytes=size, nranks=2, time_us=time_us, dtype="float32",
                                                       count=size // 4, redop="sum", root=None, in_place=False,
                                                       nnodes=1,
                                                       repeat=repeat, settings=config, iters=20, warmup=5))
    write_jsonl(path, records)
    return path


def test_cli_against_a_sweep_and_the_workload_recommend_reads(job, tmp_path):
    out, expected = job
    sweep = _sweep(tmp_path / "sweep.jsonl", [1 << k for k in range(10, 25, 2)])
    workload = tmp_path / "job.json"
    runner = CliRunner()
    res = runner.invoke(main, ["trace", str(out), "--against", str(sweep), "--gpu", "A100",
                               "--workload-out", str(workload)])
    assert res.exit_code == 0, res.output
    assert "of what this fabric gives at that size" in res.output and "exposed per step" in res.output
    res = runner.invoke(main, ["trace", str(out), "--against", str(sweep), "--json"])
    doc = json.loads(res.output)
    ar = [r for r in doc["summary"] if r["op"] == "all_reduce" and r["bench_busbw_gbps"] is not None]
    assert ar and all(r["goodput_ratio"] == pytest.approx(r["busbw_gbps"] / r["bench_busbw_gbps"]) for r in ar)
    entries = json.loads(workload.read_text())["workload"]
    assert {(e["op"], e["size_bytes"]) for e in entries} >= {(e["op"], e["size_bytes"])
                                                             for e in expected["explicit"]}
    assert all(e["calls"] == 1 and e["nranks"] == 2 for e in entries)
    res = runner.invoke(main, ["recommend", str(sweep), "--workload", str(workload), "--format", "env"])
    assert res.exit_code == 0, res.output
    assert "NCCL_ALGO=Ring" in res.output and "us per step" in res.output
    assert str(workload) in res.output


def test_a_job_faster_than_its_sweep_is_a_warning_not_a_share(job, tmp_path):
    out, _ = job
    traces = read_traces([out])
    sizes = [1 << k for k in range(10, 25, 2)]
    slow = bench_curves(load_results(_sweep(tmp_path / "slow.jsonl", sizes, slower=1000.0)), "slow.jsonl")
    fast = bench_curves(load_results(_sweep(tmp_path / "fast.jsonl", sizes, slower=0.001)), "fast.jsonl")
    warned = [w for w in analyze_traces(traces, bench=slow).warnings if "is not a bound for this job" in w]
    assert len(warned) == 1 and "slow.jsonl" in warned[0]
    assert not [w for w in analyze_traces(traces, bench=fast).warnings if "is not a bound" in w]
