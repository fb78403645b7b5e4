"""Sweeps across 2 nodes of the simulated cluster: sbatch + srun (PMIx), torch/gloo, mpirun in an allocation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.multinode.conftest import ROOT, Cluster, failures, job_output, records

TINY = ["--max-bytes", "64K", "--iters", "5", "--warmup", "2", "--repeats", "1"]


def _two_node_records(out_dir: Path, points: int) -> list[dict]:
    recs = records(out_dir)
    assert len(list((out_dir / "points").glob("*.jsonl"))) == points, sorted(p.name for p in out_dir.iterdir())
    assert recs
    for rec in recs:
        assert rec["nnodes"] == 2 and rec["nranks"] == 2, rec
        assert rec["hosts"] == ["node1", "node2"], rec["hosts"]
        assert rec["ok"] is True and rec["wrong"] == 0, rec
    return recs


@pytest.mark.parametrize("workers", ["per-point", "persistent"])
def test_sbatch_two_nodes_mpi_algos(cluster: Cluster, work: Path, workers: str) -> None:
    out = work / "mpi-algos"
    cluster.sbatch(work, "-N", "2", "--ntasks-per-node=1", str(ROOT / "slurm" / "sweep.sh"),
                   "--preset", "mpi-algos", *TINY, "--workers", workers, "--out", str(out))
    log = job_output(work)
    assert "ran 9 point(s)" in log and ", 0 failed" in log, log
    recs = _two_node_records(out, 9)
    assert {r["op"] for r in recs} == {"all_reduce", "all_gather"}
    # every point measured the algorithm it asked for (persistent: switched in the running job through MPI_T)
    algos = {(r["op"], r["settings"].get("OMPI_MCA_coll_tuned_allreduce_algorithm",
                                         r["settings"].get("OMPI_MCA_coll_tuned_allgather_algorithm")))
             for r in recs}
    assert len(algos) == 9, algos
    # srun started the ranks through PMIx (Open MPI 5 speaks nothing else).
    logs = "".join(p.read_text() for p in (out / "points").glob("*.log"))
    assert "srun --ntasks 2 --nodes 2 --export=ALL" in logs and "--mpi=pmix" in logs, logs[-3000:]


def test_sbatch_two_nodes_torch_gloo(cluster: Cluster, work: Path) -> None:
    out = work / "torch"
    cluster.sbatch(work, "-N", "2", "--ntasks-per-node=1", str(ROOT / "slurm" / "sweep.sh"),
                   "--preset", "demo", "--engine", "torch", "--backend", "gloo", *TINY, "--out", str(out))
    log = job_output(work)
    assert ", 0 failed" in log, log
    recs = _two_node_records(out, 1)
    assert {r["engine"] for r in recs} == {"torch"} and {r["backend"] for r in recs} == {"gloo"}


def test_srun_pmix_mpi4py_across_nodes(cluster: Cluster, work: Path) -> None:
    code = ("from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; "
            "h = c.allgather(socket.gethostname()); s = c.allreduce(c.rank + 1); "
            "print('RESULT', c.size, s, ','.join(h)) if c.rank == 0 else None")
    out = cluster.run("exec", *cluster.env_args(), "srun", "-N", "2", "--ntasks-per-node=1", "--mpi=pmix",
                      str(Path(__import__("sys").executable)), "-c", code, timeout_s=90, cwd=work)
    assert "RESULT 2 3 node1,node2" in out.stdout, out.stdout + out.stderr


MPIRUN_JOB = """#!/bin/bash
set -eu
cd {work}
# The user's own settings: they must reach the rank on the other node.
export NCCL_MARKER_CS='a value, with "quotes" and spaces'
export UCX_MARKER_CS=ucx
# srun (which mpirun uses to start its daemons) passes on only these, so anything else reaches a remote rank
# only through mpirun's own forwarding (-x).
export SLURM_EXPORT_ENV=PATH,HOME,OMPI_ALLOW_RUN_AS_ROOT,OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
# Every simulated node shares the same 2 cores: binding each rank to core 0 would serialise them.
export OMPI_MCA_hwloc_base_binding_policy=none
args=(sweep run --preset demo --launcher mpirun --nranks 2 --nnodes 2 --max-bytes 1K --iters 3 --warmup 1
      --repeats 1 --out {work}/r)
"$COLLSCOPE" "${{args[@]}}" --dry-run > dry-run.txt
python3 {probe} dry-run.txt NCCL_MARKER_CS UCX_MARKER_CS OMPI_MCA_btl_tcp_if_include > probe.txt
"$COLLSCOPE" "${{args[@]}}"
"""


def test_mpirun_in_allocation_forwards_user_env(cluster: Cluster, work: Path) -> None:
    script = work / "job.sh"
    script.write_text(MPIRUN_JOB.format(work=work, probe=Path(__file__).with_name("probe_env.py")))
    cluster.sbatch(work, "-N", "2", "--ntasks-per-node=1", str(script), timeout_s=120)
    dry = (work / "dry-run.txt").read_text()
    assert "-x NCCL_MARKER_CS" in dry and "-x UCX_MARKER_CS" in dry and "-x OMPI_MCA_btl_tcp_if_include" in dry
    ranks = [json.loads(ln) for ln in (work / "probe.txt").read_text().splitlines() if ln.startswith("{")]
    assert sorted(r["host"] for r in ranks) == ["node1", "node2"], ranks
    for rank in ranks:
        assert rank["env"] == {"NCCL_MARKER_CS": 'a value, with "quotes" and spaces', "UCX_MARKER_CS": "ucx",
                               "OMPI_MCA_btl_tcp_if_include": "cl0"}, rank
    out = work / "r"
    assert not failures(out), failures(out)
    _two_node_records(out, 3)
