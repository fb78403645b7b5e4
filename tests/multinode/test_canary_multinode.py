"""``collscope canary`` inside a Slurm allocation (``sbatch slurm/canary.sh``) on the simulated cluster (issue 28).

A/B across 2 nodes where B's Open MPI TCP transport is pinned to rail 1 and node2's rail 1 is shaped with tbf (A
pinned to rail 0, as the ``mpi-rails`` preset pins a rail): the verdict is no-go, exit 1, naming the sizes that
lose. A node killed mid-canary leaves a results directory that the same command completes, without measuring a
finished point again. The first tests need no cluster: slurm/canary.sh's command and exit status, with a fake
collscope. Without the cluster the others SKIP (CI: COLLSCOPE_REQUIRE_CLUSTER=1 fails them).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from collscope import proc
from collscope.canary.verdict_text import range_label
from collscope.vocab.engines import engine_row
from tests.multinode.conftest import ROOT, Cluster, done_point_files, failures, job_output, records, wait_for

pytestmark = pytest.mark.multinode

CANARY_SH = ROOT / "slurm" / "canary.sh"
SIZES = {256 * 1024, 512 * 1024, 1024 * 1024}


def _rail_env(side: str, rail: int) -> list[str]:
    """``--a-env``/``--b-env`` pinning Open MPI's TCP transport and its runtime to ``cl<rail>``: the variables
    the ``mpi-rails`` preset sets per point (the mpi engine's rail variables)."""
    out = []
    for name in engine_row("mpi").rail_variables:
        out += [f"--{side}-env", f"{name}=cl{rail}"]
    return out


SIDES = [*_rail_env("a", 0), *_rail_env("b", 1), "--a-label", "rail0", "--b-label", "rail1"]


def _measure(iters: int) -> list[str]:
    """Few sizes, few iterations: one point (one side of one block) is one srun launch of about a second."""
    return ["--engine", "mpi", "--op", "all_reduce", "--min-bytes", "256K", "--max-bytes", "1M",
            "--iters", str(iters), "--warmup", "1", "--timeout", "60"]


def _verdict(out: Path) -> dict:
    """verdict.json, in the fields these tests read: DESIGN.md's ``canary --json`` document (``verdict`` the
    decision, ``workload_change.ci``, a range's busbw ``ci``) or the Verdict's own dict under ``verdict``."""
    path = out / "verdict.json"
    assert path.exists(), sorted(p.name for p in out.iterdir())
    doc = json.loads(path.read_text())
    if isinstance(doc["verdict"], dict):  # {"verdict": Verdict.to_dict(), "why": ...}
        v = doc["verdict"]
        return {**v, "ci": [v["workload_change"]["low"], v["workload_change"]["high"]],
                "ranges": [{**r, "ci": [r["busbw_change"]["low"], r["busbw_change"]["high"]]} for r in v["ranges"]]}
    return {**doc, "decision": doc["verdict"], "ci": doc["workload_change"]["ci"]}


def _sides(out: Path) -> dict[str, str]:
    """point id -> side, from canary.json."""
    doc = json.loads((out / "canary.json").read_text())
    return {p["point_id"]: p["side"] for p in doc["points"]}


# --- slurm/canary.sh with a fake collscope (no cluster needed) ------------------------------------------------

FAKE = """#!{python}
import json, os, sys
with open(os.environ["FAKE_ARGV"], "w") as f:
    json.dump(sys.argv[1:], f)
sys.exit(int(os.environ.get("FAKE_RC", "0")))
"""


def _fake(work: Path) -> tuple[Path, Path]:
    exe = work / "collscope"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe, work / "argv.json"


def _run_sh(work: Path, args: list[str], **env: str) -> tuple[proc.ProcResult, list[str] | None]:
    exe, argv = _fake(work)
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k != "COLLSCOPE_OUT"}
    res = proc.run(["bash", str(CANARY_SH), *args], timeout_s=30, cwd=work,
                   env={**base, "COLLSCOPE": str(exe), "FAKE_ARGV": str(argv), **env})
    return res, (json.loads(argv.read_text()) if argv.exists() else None)


@pytest.mark.parametrize(("args", "env", "expected"), [
    (["--b-env", "X=1", "--blocks", "4"], {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "2"},
     ["canary", "--launcher", "srun", "--nranks", "2", "--nnodes", "2", "--out", "results/canary-42",
      "--b-env", "X=1", "--blocks", "4"]),
    # what the user gives wins, in both spellings; values pass through untouched
    (["--launcher=mpirun", "--nranks", "4", "--nnodes=1", "--out", "my dir", "--b-env", "K=a b;'c' $HOME"],
     {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "2", "COLLSCOPE_OUT": "ignored"},
     ["canary", "--launcher=mpirun", "--nranks", "4", "--nnodes=1", "--out", "my dir", "--b-env", "K=a b;'c' $HOME"]),
    (["--blocks", "2"], {"SLURM_JOB_ID": "7", "COLLSCOPE_OUT": "/scratch/c 1"},
     ["canary", "--launcher", "srun", "--out", "/scratch/c 1", "--blocks", "2"]),
], ids=["defaults", "user-options-win", "env-out"])
def test_canary_sh_command(work: Path, args: list[str], env: dict[str, str], expected: list[str]) -> None:
    res, argv = _run_sh(work, args, **env)
    assert res.returncode == 0, res.stderr
    assert argv == expected
    assert "collscope-canary: + " in res.stderr and "--launcher" in res.stderr


@pytest.mark.parametrize("code", [0, 1, 3, 2])
def test_canary_sh_exits_with_the_decision(work: Path, code: int) -> None:
    """go 0, no-go 1, inconclusive 3, bad input 2: the job's exit status is collscope's."""
    res, argv = _run_sh(work, ["--blocks", "2"], SLURM_JOB_ID="5", FAKE_RC=str(code))
    assert argv is not None and res.returncode == code, res.stderr


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--blocks", "2"], {}, "not inside a Slurm allocation"),
    (["--blocks", "2"], {"SLURM_JOB_ID": "9", "SLURM_ARRAY_JOB_ID": "8", "SLURM_ARRAY_TASK_ID": "1"},
     "a canary is one job"),
    ([], {"SLURM_JOB_ID": "9"}, "nothing to compare"),
    (["--from-results", "a", "b"], {"SLURM_JOB_ID": "9"}, "needs no allocation"),
    (["report", "r", "--out", "x"], {"SLURM_JOB_ID": "9"}, "needs no allocation"),
    (["--blocks", "2"], {"SLURM_JOB_ID": "9", "COLLSCOPE": "/nonexistent/collscope"}, "is not an executable"),
], ids=["outside-slurm", "array", "no-args", "from-results", "report", "bad-COLLSCOPE"])
def test_canary_sh_refuses(work: Path, args: list[str], env: dict[str, str], message: str) -> None:
    res, argv = _run_sh(work, args, **env)
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert argv is None and "Traceback" not in res.stderr


def test_canary_sh_is_an_sbatch_script() -> None:
    res = proc.run(["bash", "-n", str(CANARY_SH)], timeout_s=15)
    assert res.returncode == 0, res.stderr
    lines = CANARY_SH.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash" and "set -euo pipefail" in lines and os.access(CANARY_SH, os.X_OK)
    sbatch = [line for line in lines if line.startswith("#SBATCH")]
    assert {"#SBATCH --requeue", "#SBATCH --open-mode=append",
            "#SBATCH --output=collscope-canary-%j.out"} <= set(sbatch)
    # sbatch stops reading #SBATCH lines at the first command: all of them come before it
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < first_command
    assert not [line for line in lines if not line.lstrip().startswith("#") and "eval" in line.split()]


# --- on the cluster ---------------------------------------------------------------------------------------------

def test_b_on_a_shaped_rail_is_no_go_naming_the_losing_sizes(cluster: Cluster, work: Path) -> None:
    cluster.run("slow", "node2", "--rail", "1")
    try:
        # no --out: the script's default, results/canary-<job id> in the directory sbatch ran from
        job = cluster.submit(work, "-N", "2", "-w", "node1,node2", "--ntasks-per-node=1", str(CANARY_SH),
                             *SIDES, *_measure(20), "--blocks", "4")
        state, code = cluster.wait(job, timeout_s=240)
    finally:
        cluster.run("fast", "node2")
    out = work / "results" / f"canary-{job}"
    log = job_output(work)
    print(log[-4000:])
    print("ranges:", json.dumps(_verdict(out)["ranges"]) if (out / "verdict.json").exists() else None)
    # the decision is the job's exit status: no-go is 1 (Slurm: FAILED, 1:0)
    assert (state, code) == ("FAILED", "1:0"), log[-4000:]
    assert "--launcher srun --nranks 2 --nnodes 2" in log  # what the script added inside the allocation
    verdict = _verdict(out)
    assert verdict["decision"] == "no-go" and verdict["exit_code"] == 1, verdict
    assert verdict["blocks"] == 4 and verdict["interleaved"] is True
    assert verdict["ci"][0] > verdict["max_loss"], verdict["ci"]  # the workload's time: B takes more, beyond noise
    # the shaped rail costs B at every measured size (10-100x here): B's busbw interval lies below 0 in every range,
    # and beyond the A/A noise in at least one (all of 256K-1M on a quiet machine; a loaded one widens the noise)
    assert (min(r["min_bytes"] for r in verdict["ranges"]), max(r["max_bytes"] for r in verdict["ranges"])) \
        == (min(SIZES), max(SIZES))
    assert all(r["ci"][1] < 0 and r["b_busbw_gbps"] < r["a_busbw_gbps"] for r in verdict["ranges"])
    losing = [r for r in verdict["ranges"] if r["verdict"] == "loses"]
    assert losing, verdict["ranges"]
    # the job's log says the decision and names each losing range ("all_reduce  256K-1M ... loses")
    assert "NO-GO (exit 1)" in log, log[-4000:]
    table = [line.split() for line in log.splitlines() if line.startswith("  all_reduce ")]
    for r in losing:
        label = range_label(r["min_bytes"], r["max_bytes"])
        assert any(words[1] == label and words[-1] == "loses" for words in table), (label, log[-4000:])
    # both sides ran on both nodes, each over its own rail, in the one allocation
    sides = _sides(out)
    recs = records(out)
    assert {r["size_bytes"] for r in recs} == SIZES
    assert not failures(out), failures(out)
    for rec in recs:
        assert rec["hosts"] == ["node1", "node2"] and rec["nnodes"] == 2 and rec["ok"], rec
        assert rec.get("rail") == {"A": "cl0", "B": "cl1"}[sides[rec["point_id"]]], rec
    assert len(done_point_files(out)) == 8  # 4 blocks x 2 sides


def test_node_killed_mid_canary_then_rerun_completes(cluster: Cluster, work: Path) -> None:
    """node2 dies while a B point runs; the same command again measures only what was not finished, and the
    canary ends with the verdict of all its blocks (both jobs' points)."""
    out = work / "canary"
    # --no-requeue: Slurm would otherwise requeue the job after the node failure (canary.sh asks for it) and
    # rerun it by itself about 2 minutes later; here the rerun is explicit. B's slow rail makes its points last
    # a few seconds (20 iterations of up to 1 MiB at 200 Mbit/s) so that the kill lands inside one.
    job_args = ["-N", "2", "-w", "node1,node2", "--ntasks-per-node=1", "--no-requeue", str(CANARY_SH), *SIDES,
                *_measure(20), "--blocks", "3", "--out", str(out)]
    cluster.run("slow", "node2", "--rail", "1")  # kill/revive keep it: the shaping is on the switch's port too
    try:
        killed = False
        try:
            job = cluster.submit(work, *job_args)
            # Block 0 (A, B) done and block 1's first point (B) started: kill node2 under it.
            wait_for(lambda: (out / "points").is_dir() and len(done_point_files(out)) == 2
                     and len(list((out / "points").glob("*.log"))) >= 3, 120, "block 0 to finish")
            time.sleep(1.0)
            done_before = {p.name: p.read_text() for p in done_point_files(out)}
            cluster.run("kill", "node2")
            killed = True
            state, code = cluster.wait(job, timeout_s=120)
            log = job_output(work)
            print(f"job {job}: {state} (exit {code})\n{log[-3000:]}")
            assert state in ("NODE_FAIL", "FAILED"), state
            assert len(done_point_files(out)) < 6, "the canary finished before node2 was killed"
            assert {p.name: p.read_text() for p in done_point_files(out)} == done_before  # finished points intact
            assert cluster.wait_no_job_processes(["node1", "node2"], timeout_s=30) == {}
        finally:
            if killed:
                cluster.run("revive", "node2", timeout_s=90)
        # The same command, the same --out: the canary resumes and ends with a verdict.
        for old in work.glob("job-*.out"):
            old.rename(old.with_suffix(".first"))
        state, code = cluster.sbatch(work, *job_args, check=False, timeout_s=240)
    finally:
        cluster.run("fast", "node2")
    log = job_output(work)
    print(f"rerun: {state} (exit {code})\n{log[-3000:]}")
    files = {p.name: p.read_text() for p in done_point_files(out)}
    # 3 blocks x 2 sides, each once. A point still missing was not measured again by the rerun: its failure (the
    # last line of failures.jsonl for it) was not taken for a node lost under it, and a canary has no --retry-failed
    missing = set(_sides(out)) - {name[:-len(".jsonl")] for name in files}
    assert not missing, [(f.get("reason"), f.get("detail")) for f in failures(out) if f["point_id"] in missing]
    assert len(files) == 6, sorted(files)
    assert {k: files[k] for k in done_before} == done_before  # finished points were not measured again
    assert not [name for name in done_before if f"point {name[:-len('.jsonl')]}: done" in log], log
    per_point: dict[str, list[int]] = {}
    for rec in records(out):
        per_point.setdefault(rec["point_id"], []).append(rec["size_bytes"])
    assert set(per_point) == set(_sides(out)) and all(sorted(v) == sorted(SIZES) for v in per_point.values())
    # the verdict of all 3 blocks, the points of both jobs together; the job's exit status is its decision
    verdict = _verdict(out)
    assert verdict["blocks"] == 3 and verdict["decision"] == "no-go", verdict
    assert (state, code) == ("FAILED", "1:0") and "NO-GO (exit 1)" in log, log[-3000:]
    assert cluster.wait_no_job_processes(["node1", "node2"], timeout_s=30) == {}
