"""A DDP training across 2 nodes of the simulated cluster, traced, against a gloo sweep of the same nodes.

One sbatch job on 2 nodes: first ``slurm/sweep.sh`` sweeps the job's four ops with torch + gloo over cl0
(2 ranks, one per node, 1 KiB..1 MiB), then ``srun`` runs ``tests/traces/ddp_job.py`` (the tiny DDP training
of tests/traces, one rank per node, under torch.profiler). ``collscope trace`` then reads the two ranks' traces
``--against`` that sweep: every op of the job is matched across the two ranks and compared with the sweep's
busbw at its size (goodput = job busbw / sweep busbw), and the sizes are the ones the job issued.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.multinode.conftest import ROOT, Cluster, job_output, records

SPEC = """name: gloo-job-ops
engine: torch
backend: gloo
ops: [all_reduce, all_gather, reduce_scatter, broadcast]
min_bytes: 1K
max_bytes: 1M
iters: 20
warmup: 5
repeats: 3
"""

JOB = """#!/bin/bash
set -eu
cd {work}
bash {sweep_sh} {work}/spec.yaml --out {work}/sweep
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) MASTER_PORT=29517
srun --ntasks 2 --nodes 2 --ntasks-per-node 1 --export=ALL {python} {ddp_job} {work}/ddp
"""


def test_ddp_across_two_nodes_against_a_gloo_sweep(cluster: Cluster, work: Path) -> None:
    (work / "spec.yaml").write_text(SPEC)
    script = work / "job.sh"
    script.write_text(JOB.format(work=work, sweep_sh=ROOT / "slurm" / "sweep.sh", python=sys.executable,
                                 ddp_job=ROOT / "tests" / "traces" / "ddp_job.py"))
    cluster.sbatch(work, "-N", "2", "--ntasks-per-node=1", str(script), timeout_s=400)
    assert ", 0 failed" in job_output(work), job_output(work)
    expected = json.loads((work / "ddp" / "expected.json").read_text())

    done = subprocess.run([sys.executable, "-m", "collscope", "trace", str(work / "ddp" / "traces"), "--against",
                           str(work / "sweep"), "--json"], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doc = json.loads(done.stdout)
    rows = doc["summary"]
    # the explicit collectives, at the sizes the job issued, on 2 ranks, each compared with the sweep
    for e in expected["explicit"]:
        row = next((r for r in rows if (r["op"], r["size_bytes"]) == (e["op"], e["size_bytes"])), None)
        assert row is not None, (e, rows)
        assert row["nranks"] == 2 and row["bench_busbw_gbps"] is not None and row["bench_busbw_gbps"] > 0, row
        assert row["goodput_ratio"] == pytest.approx(row["busbw_gbps"] / row["bench_busbw_gbps"], rel=1e-3), row
    buckets = [r for r in rows if r["op"] == "all_reduce"]
    assert buckets and all(r["bench_busbw_gbps"] is not None for r in buckets), buckets
    # both ranks' steps, exposed <= communication <= step, measured over the real network between the nodes
    assert len(doc["steps"]) == 2 * expected["active_steps"]
    assert all(0 <= s["exposed_comm_us"] <= s["comm_us"] <= s["duration_us"] for s in doc["steps"])
    sweep_hosts = {tuple(r["hosts"]) for r in records(work / "sweep")}
    assert sweep_hosts == {("node1", "node2")}
