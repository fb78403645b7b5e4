"""A DDP training across 2 nodes of the simulated cluster with one rank made late on purpose, traced.

One sbatch job on 2 nodes: ``srun`` runs ``tests/traces/ddp_job.py --late-rank 1 --late-ms 500`` (the tiny DDP
training of tests/traces, one rank per node; in every step rank 1, on the second node, sleeps 500 ms before its
all_gather). ``collscope trace --json`` on the two ranks' traces must name rank 1 first in ``late_ranks``, with
the others' summed wait within 20% of 500 ms x the active steps, and split each all_gather into a short transfer
over the network between the nodes and rank 0's wait of about 500 ms (``ddp_job.check_late_rank_report``, the
same checks as the 2-rank local test ``tests/traces/test_ddp_late_rank.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.multinode.conftest import ROOT, Cluster, job_output
from tests.traces.ddp_job import check_late_rank_report

LATE_RANK, LATE_MS = 1, 500

JOB = """#!/bin/bash
set -eu
cd {work}
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) MASTER_PORT=29518
srun --ntasks 2 --nodes 2 --ntasks-per-node 1 --export=ALL {python} {ddp_job} {work}/ddp \\
    --late-rank {late_rank} --late-ms {late_ms}
"""


def test_a_late_rank_across_two_nodes_is_named_with_its_delay(cluster: Cluster, work: Path) -> None:
    script = work / "job.sh"
    script.write_text(JOB.format(work=work, python=sys.executable, ddp_job=ROOT / "tests" / "traces" / "ddp_job.py",
                                 late_rank=LATE_RANK, late_ms=LATE_MS))
    cluster.sbatch(work, "-N", "2", "--ntasks-per-node=1", str(script), timeout_s=300)
    expected = json.loads((work / "ddp" / "expected.json").read_text())
    assert (expected["late_rank"], expected["late_ms"]) == (LATE_RANK, LATE_MS), job_output(work)

    done = subprocess.run([sys.executable, "-m", "collscope", "trace", str(work / "ddp" / "traces"), "--json"],
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["world_size"] == 2 and len(doc["sources"]) == 2, doc["sources"]
    check_late_rank_report(doc, expected)
