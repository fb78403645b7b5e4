"""A sweep under srun in an allocation that cannot hold its steps (issue 22 item 5, on the simulated cluster):
``salloc -N 4 --ntasks-per-node 1`` and a sweep of 8 ranks on 2 nodes exit 2 before the first point, naming the
allocation's shape and the fix; nothing is recorded as failed.

Without the cluster the test SKIPS (a failure in CI, where COLLSCOPE_REQUIRE_CLUSTER=1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.multinode.conftest import Cluster

pytestmark = pytest.mark.multinode

SPEC = "name: shape\nengine: mpi\nops: [all_reduce]\nmin_bytes: 8\nmax_bytes: 64\nrepeats: 1\n"


def test_a_sweep_in_a_one_task_per_node_allocation_exits_2_naming_the_shape(cluster: Cluster, work: Path) -> None:
    spec = work / "spec.yaml"
    spec.write_text(SPEC)
    out = work / "out"
    argv = ["exec", *cluster.env_args(), "salloc", "-N", "4", "--ntasks-per-node", "1", "--no-kill",
            "--chdir", str(work), sys.executable, "-m", "collscope", "sweep", "run", str(spec), "--launcher", "srun",
            "--nranks", "8", "--nnodes", "2", "--timeout", "60", "--out", str(out), "--no-progress"]
    done = cluster.run(*argv, timeout_s=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output[-3000:]
    assert "this allocation has 1 task(s) per node on 4 node(s)" in output, output[-3000:]
    assert "the sweep needs 8 ranks on 2 node(s) (4 per node)" in output
    assert "salloc -N 2 --ntasks-per-node 4" in output and "nothing was run or recorded" in output
    assert "Traceback" not in output
    assert not (out / "failures.jsonl").exists()
