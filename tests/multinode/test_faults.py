"""Faults on the simulated cluster: a node killed in the middle of a sweep, a hung rank on one node."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.multinode.conftest import ROOT, Cluster, done_point_files, failures, job_output, records, wait_for

# 2 points (Open MPI's default, then ring), each about 8 s with node2 slowed: long enough that node2 is killed
# while the second one runs (with 5 iterations, 3.6 s, a persistent run once finished it before the kill landed).
SPEC = """name: faults
engine: mpi
ops: [all_reduce]
min_bytes: 1M
max_bytes: 4M
iters: 12
warmup: 1
repeats: 1
grid: {OMPI_MCA_coll_tuned_allreduce_algorithm: ["", "4"]}
"""


def _spec(work: Path, **fields: object) -> str:
    path = work / "spec.yaml"
    path.write_text(SPEC + "".join(f"{k}: {v}\n" for k, v in fields.items()))
    return str(path)


def _sizes_per_point(out: Path) -> dict[str, list[tuple[int, int]]]:
    found: dict[str, list[tuple[int, int]]] = {}
    for rec in records(out):
        found.setdefault(rec["point_id"], []).append((rec["size_bytes"], rec["repeat"]))
    return found


@pytest.mark.parametrize("workers", ["per-point", "persistent"])
def test_node_killed_mid_sweep_then_rerun_after_revive(cluster: Cluster, work: Path, workers: str) -> None:
    """One launch per point, or one worker job for the sweep: the same guarantees when node2 dies."""
    out = work / "r"
    # --no-requeue: Slurm would otherwise requeue the job after the node failure (slurm/sweep.sh asks for it)
    # and run it again by itself; here the rerun is explicit.
    sweep = ["-N", "2", "-w", "node1,node2", "--ntasks-per-node=1", "--no-requeue",
             str(ROOT / "slurm" / "sweep.sh"), _spec(work), "--timeout", "60", "--workers", workers,
             "--out", str(out)]
    cluster.run("slow", "node2")
    killed = False
    try:
        job = cluster.submit(work, *sweep)
        points = out / "points"
        # Point 1 done, point 2 started (its log exists): kill node2 under the running point.
        wait_for(lambda: len(done_point_files(out)) == 1
                 and len(list(points.glob("*.log"))) == 2, 90, "the first point to finish")
        time.sleep(1.5)
        done_before = {p.name: p.read_text() for p in done_point_files(out)}
        t_kill = time.monotonic()
        cluster.run("kill", "node2")
        killed = True
        state, code = cluster.wait(job, timeout_s=120)
        print(f"job {job}: {state} (exit {code}) {time.monotonic() - t_kill:.1f} s after the kill")
        # Either Slurm declared node2 down and cancelled the job (NODE_FAIL: the sweep, stopped by SIGTERM, wrote
        # the point down as cancelled), or the step failed first and the sweep ended on its own (FAILED, exit 1).
        assert state in ("NODE_FAIL", "FAILED"), state
        log = job_output(work)
        print(log)
        fails = failures(out)
        print(json.dumps(fails, indent=1)[:3000])
        # The running point failed, with a reason that names what happened.
        assert len(fails) == 1, fails
        assert fails[0]["reason"] in ("cancelled", "exit code", "timeout")
        assert any(w in fails[0]["detail"] for w in ("down: node2", "node failure", "not answering")), fails
        assert fails[0]["point_id"] in log and fails[0]["detail"].split(" (")[0] in log
        assert state == "FAILED" or "NODE FAILURE" in log, log
        # Records already written are intact; nothing is left running on either node.
        assert {p.name: p.read_text() for p in done_point_files(out)} == done_before
        assert all(json.loads(line)["ok"] for text in done_before.values() for line in text.splitlines())
        assert cluster.wait_no_job_processes(["node1", "node2"], timeout_s=30) == {}
    finally:
        if killed:
            cluster.run("revive", "node2", timeout_s=90)
        cluster.run("fast", "node2")
    # The same command again (failed points retried) completes the sweep, each point exactly once.
    cluster.sbatch(work, *sweep, "--retry-failed", timeout_s=120)
    per_point = _sizes_per_point(out)
    # done points only: the killed job's partial records stay beside them under its writer's name, never counted
    assert len(per_point) == 2 and len(done_point_files(out)) == 2, per_point
    for point_id, sizes in per_point.items():
        assert len(sizes) == len(set(sizes)) == 3, (point_id, sizes)  # 1M, 2M, 4M, once each
    assert cluster.wait_no_job_processes(["node1", "node2"], timeout_s=30) == {}


def _rank_pids(cluster: Cluster, node: str) -> list[int]:
    found = []
    for pid in cluster.pids(node):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"collscope" in cmd and b"bench" in cmd:
            found.append(pid)
    return found


def test_hung_rank_is_killed_everywhere_within_the_point_timeout(cluster: Cluster, work: Path) -> None:
    out = work / "r"
    timeout_s = 15.0
    stopped: list[int] = []

    def stop_rank_on_node2() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not stopped:
            for pid in _rank_pids(cluster, "node2"):
                time.sleep(0.5)  # inside its collectives (a point lasts several seconds)
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                stopped.append(pid)
                return
            time.sleep(0.1)

    stopper = threading.Thread(target=stop_rank_on_node2, daemon=True)
    stopper.start()
    cluster.sbatch(work, "-N", "2", "-w", "node1,node2", "--ntasks-per-node=1",
                   str(ROOT / "slurm" / "sweep.sh"), _spec(work), "--min-bytes", "1M", "--max-bytes", "1M",
                   "--iters", "3000", "--warmup", "5", "--timeout", str(timeout_s), "--out", str(out), check=False,
                   timeout_s=150)
    stopper.join(5)
    assert stopped, "no rank of the sweep was seen on node2"
    fails = failures(out)
    print(json.dumps(fails, indent=1)[:2000])
    assert len(fails) == 1 and fails[0]["reason"] in ("timeout", "exit code"), fails
    assert fails[0]["duration_s"] <= timeout_s + 5, fails  # the rank's own limit, or the point's kill
    assert not Path(f"/proc/{stopped[0]}").exists() or _comm_state(stopped[0]) == "Z", "the hung rank survived"
    assert cluster.wait_no_job_processes(["node1", "node2"], timeout_s=10) == {}
    # The other point ran normally after it.
    assert len(_sizes_per_point(out)) == 1


def _comm_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
