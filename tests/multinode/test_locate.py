"""``collscope locate`` on the real simulated cluster (scripts/local-cluster.sh: 4 nodes x 2 rails, root).

Every test runs locate inside a real allocation (``salloc -N 4 --no-kill``, or ``sbatch slurm/locate.sh``) with
the srun runner, after shaping, killing or nothing: no fault -> no suspects, exit 0; a random slow node -> that
node named with its exclude string, exit 1; node2 slow on rail 1 only -> node2 rail 1, rail 0 healthy; node4
killed -> node4 broken or unreachable, the others tested, no hang, nothing left running; two slow nodes ->
both; bad input -> exit 2 with one line. Without the cluster the tests SKIP, saying why. Every node is made
fast (and node4 revived) whatever happens. Work files go under /var/tmp (every node sees it; /tmp is private).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multinode.conftest import CLUSTER, ROOT, WORK_BASE, Cluster, cluster_env, job_output

pytestmark = pytest.mark.multinode


NODES = [f"node{i}" for i in range(1, 5)]
SIZE = "4M"
# 2 shared cores behind 4 nodes: healthy tests vary up to 3x, a 200mbit node is 40x slower; hence --min-gap 0.8.
FAST_ARGS = ["--size", SIZE, "--iters", "5", "--warmup", "2", "--timeout", "40", "--min-gap", "0.8"]


@pytest.fixture(scope="module")
def sim_cluster(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster (a skip without it, a failure in CI), every node made fast again after the module."""
    yield cluster
    for node in NODES:
        cluster.run("fast", node, check=False)


def _locate(cluster: Cluster, work: Path, *args: str, nodes: int = 4, timeout_s: float = 400
            ) -> tuple[int, dict | None, str]:
    """``collscope locate --json ARGS`` inside ``salloc -N nodes --no-kill``: (exit code, JSON or None, output)."""
    argv = ["exec", *cluster.env_args(), "salloc", "-N", str(nodes), "--ntasks-per-node=2", "--no-kill",
            "--chdir", str(work), sys.executable, "-m", "collscope", "locate", "--json", "--out", str(work / "out"),
            *args]
    done = cluster.run(*argv, timeout_s=timeout_s, check=False)
    text = done.stdout
    doc = json.loads(text[text.index("{"):]) if "{" in text else None
    return done.returncode, doc, text + done.stderr


def _named(doc: dict) -> list[tuple[str, int | None]]:
    return sorted((s["node"], s["rail"]) for s in doc["suspects"])


@pytest.fixture(scope="module")
def no_fault_run(sim_cluster: Cluster) -> Iterator[tuple[dict, Path]]:
    """``sbatch slurm/locate.sh`` on the healthy cluster, as users run it: (locate.json, results directory).
    Its baseline is the 'expected' figure the tests with ``--expect-busbw`` give, as a user would."""
    work = Path(tempfile.mkdtemp(prefix="no-fault-", dir=WORK_BASE))
    work.chmod(0o755)
    state, code = sim_cluster.sbatch(work, "-N", "4", "--chdir", str(work), str(ROOT / "slurm" / "locate.sh"),
                                     "--json", "--out", str(work / "out"), *FAST_ARGS, timeout_s=400, check=False)
    assert (state, code) == ("COMPLETED", "0:0"), job_output(work)[-3000:]
    yield json.loads((work / "out" / "locate.json").read_text()), work / "out"
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def healthy_busbw(no_fault_run: tuple[dict, Path]) -> float:
    doc, _ = no_fault_run
    assert doc["baseline_busbw_gbps"], doc
    return float(doc["baseline_busbw_gbps"])


def test_no_fault_no_suspects_stops_after_the_group_test(no_fault_run):
    doc, out = no_fault_run
    assert doc["suspects"] == [] and doc["exclude"] == ""
    group_round = next(t["round"] for t in doc["tests"] if t["kind"] == "group")
    # the group test, then (no --expect-busbw) its halves as the reference it is judged by
    assert doc["rounds"] <= group_round + 1
    assert all(t["status"] == "ok" for t in doc["tests"])
    assert len(list((out / "points").glob("*.jsonl"))) == len(doc["tests"])


def test_no_fault_with_an_expectation_stops_at_the_group_test(sim_cluster, work, healthy_busbw):
    code, doc, output = _locate(sim_cluster, work, *FAST_ARGS, "--expect-busbw", f"{healthy_busbw / 2:.4g}")
    assert code == 0 and doc is not None, output[-3000:]
    assert doc["suspects"] == [] and doc["rounds"] == 2 and doc["tests"][-1]["kind"] == "group"


def test_a_random_slow_node_is_named(sim_cluster, work):
    node = random.choice(NODES)
    sim_cluster.run("slow", node)
    try:
        code, doc, output = _locate(sim_cluster, work, *FAST_ARGS)
    finally:
        sim_cluster.run("fast", node)
    assert doc is not None, output[-3000:]
    assert code == 1 and _named(doc) == [(node, None)], output[-3000:]
    assert doc["exclude"] == node and doc["suspects"][0]["kind"] == "slow"
    assert doc["rounds"] <= 4  # ceil(log2 4) + 2


def test_node2_slow_on_rail_1_only(sim_cluster, work):
    sim_cluster.run("slow", "node2", "--rail", "1")
    try:
        code, doc, output = _locate(sim_cluster, work, *FAST_ARGS, "--rails", "2")
    finally:
        sim_cluster.run("fast", "node2")
    assert doc is not None, output[-3000:]
    assert code == 1 and _named(doc) == [("node2", 1)], output[-3000:]
    rail0 = [t for t in doc["tests"] if t["rail"] == 0]
    assert rail0 and all(t["status"] == "ok" for t in rail0)


def test_a_killed_node_is_reported_and_nothing_hangs(sim_cluster, work):
    """node4 dies once the allocation holds it; locate must still test the others and end."""
    gate = work / "go"
    granted = work / "granted"
    wrapper = ("import os, sys, time\n"
               f"open({str(granted)!r}, 'w').close()\n"
               f"while not os.path.exists({str(gate)!r}): time.sleep(0.2)\n"
               "os.execv(sys.executable, [sys.executable, '-m', 'collscope', *sys.argv[1:]])\n")
    argv = ["bash", str(CLUSTER), "exec", *sim_cluster.env_args(), "salloc", "-N", "4", "--ntasks-per-node=2",
            "--no-kill", "--chdir", str(work), sys.executable, "-c", wrapper, "locate", "--json", "--out",
            str(work / "out"), *FAST_ARGS, "--timeout", "30"]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster_env())
    try:
        deadline = time.monotonic() + 60
        while not granted.exists():
            assert time.monotonic() < deadline and child.poll() is None, "no allocation"
            time.sleep(0.2)
        sim_cluster.run("kill", "node4")
        gate.touch()
        start = time.monotonic()
        out, err = child.communicate(timeout=400)
        elapsed = time.monotonic() - start
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
        sim_cluster.run("revive", "node4", timeout_s=120, check=False)
    doc = json.loads(out[out.index("{"):]) if "{" in out else None
    assert doc is not None, out[-3000:] + err[-3000:]
    assert child.returncode == 1
    assert [(s["node"], s["kind"] in ("broken", "unreachable")) for s in doc["suspects"]] == [("node4", True)]
    assert doc["exclude"] == "node4"
    tested = {n for t in doc["tests"] if t["kind"] != "node" for n in t["nodes"]}
    assert tested == {"node1", "node2", "node3"}
    assert elapsed < 300
    assert sim_cluster.wait_no_job_processes(["node1", "node2", "node3"]) == {}


def test_two_slow_nodes_are_both_named(sim_cluster, work, healthy_busbw):
    pair = sorted(random.sample(NODES, 2))
    for node in pair:
        sim_cluster.run("slow", node)
    try:
        code, doc, output = _locate(sim_cluster, work, *FAST_ARGS, "--expect-busbw", f"{healthy_busbw / 2:.4g}")
    finally:
        for node in pair:
            sim_cluster.run("fast", node)
    assert doc is not None, output[-3000:]
    assert code == 1 and _named(doc) == [(n, None) for n in pair], output[-3000:]


@pytest.mark.parametrize(("nodes", "args", "message"), [
    (4, ["--nodes", "node9"], "node9 not in this allocation"),
    (2, ["--nodes", "node[1-4]"], "not in this allocation"),
    (4, ["--nodes", "node1"], "at least 2 nodes"),
])
def test_bad_input_exits_2(sim_cluster, work, nodes, args, message):
    code, doc, output = _locate(sim_cluster, work, *args, nodes=nodes, timeout_s=120)
    assert code == 2 and doc is None, output[-2000:]
    assert message in output and "Traceback" not in output
