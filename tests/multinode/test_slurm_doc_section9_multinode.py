"""docs/slurm.md section 9 ("Try it on a simulated multi-node cluster") runs as written (issue 26 item 6).

The shell blocks of the section are read from the markdown (its fenced blocks) and run, unchanged, with bash
from the repository's checkout, as a reader with the environment active would (``VIRTUAL_ENV`` set, its ``bin``
first on PATH): the cluster comes up (``up`` is idempotent, CI brought it up already), a 2-node sweep and a
4-node topology capture run as batch jobs submitted from a work directory, and the cluster goes down. ``down``
ends the cluster the other multinode tests use, so the test brings it back up (the layout CI uses) afterwards.
Before this, the block's ``cd /var/tmp/cs`` made its next command, ``scripts/local-cluster.sh exec ...``, fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.multinode.conftest import ROOT, Cluster, cluster_env

DOC = ROOT / "docs" / "slurm.md"
SECTION = re.compile(r"^## 9\. [^\n]*\n(.*?)(?=^## |\Z)", re.M | re.S)
FENCE = re.compile(r"^```([A-Za-z]*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
SHELL = ("", "sh", "bash", "shell", "console")
WORK_DIRS = Path("/var/tmp")


def section9_blocks() -> list[str]:
    """The shell blocks of section 9, as written (a ``console`` block keeps only its ``$ `` lines)."""
    found = SECTION.search(DOC.read_text())
    assert found, "docs/slurm.md has no '## 9. ...' section"
    blocks = []
    for info, body in FENCE.findall(found.group(1)):
        if info not in SHELL:
            continue
        if info == "console" or any(line.startswith("$ ") for line in body.splitlines()):
            body = "".join(line[2:] + "\n" for line in body.splitlines() if line.startswith("$ "))
        blocks.append(body)
    return blocks


def test_section9_has_its_commands() -> None:
    """Without a cluster too: the block parses as bash and holds what the section promises."""
    blocks = section9_blocks()
    assert blocks, "section 9 has no shell block"
    script = "\n".join(blocks)
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    for words in ("scripts/local-cluster.sh up", "slurm/sweep.sh", "slurm/collect-topo.sh", "collscope topo cluster",
                  "scripts/local-cluster.sh down"):
        assert words in script, f"section 9 lost {words!r}"
    assert relative_after_cd(script) == [], "a command names the checkout's scripts relative to another directory"


def relative_after_cd(script: str) -> list[str]:
    """Commands of ``script`` that name ``scripts/...`` or ``slurm/...`` relative to the working directory while
    that is not the checkout (after a ``cd`` elsewhere): they fail as written."""
    in_checkout, found = True, []
    for line in script.replace("\\\n", " ").splitlines():
        code = line.split(" # ", 1)[0].strip()
        for command in filter(None, (c.strip() for c in re.split(r"&&|;|\|\|", code))):
            words = command.split()
            if words[0] == "cd":
                in_checkout = len(words) > 1 and words[1].strip('"') in ("$repo", str(ROOT))
            elif not in_checkout and re.search(r"(^|[\s=])(scripts|slurm)/", command):
                found.append(command)
    return found


def _restore(cluster: Cluster) -> None:
    """Bring the cluster back as CI started it (the block's last command took it down)."""
    if cluster.run("status", check=False, timeout_s=60).returncode != 0:
        cluster.run("up", "--nodes", "4", "--rails", "2", timeout_s=300)
    assert cluster.run("status", check=False, timeout_s=60).returncode == 0, "the cluster did not come back"


def test_section9_runs_as_written(cluster: Cluster) -> None:
    script = "\n".join(section9_blocks())
    venv = Path(sys.prefix)
    env = cluster_env()
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}")
    before = set(WORK_DIRS.glob("cs-*"))
    start = time.monotonic()
    try:
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=900)
    finally:
        for made in set(WORK_DIRS.glob("cs-*")) - before:
            shutil.rmtree(made, ignore_errors=True)
        _restore(cluster)
    print(f"section 9 ran in {time.monotonic() - start:.0f} s (exit {run.returncode})")
    print(run.stdout[-4000:])
    print(run.stderr[-4000:])
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    # the sweep: mpi-algos on 2 nodes, every point done (sweep status); the capture: 4 nodes, 2 rails of interfaces
    assert re.search(r": sweep mpi-algos-\w+: 27 points, 27 done, 0 failed", out), out
    assert "4 node(s): node1, node2, node3, node4" in out, out
    assert "rail 0: node1:cl0, node2:cl0, node3:cl0, node4:cl0" in out, out
    assert "rail 1: node1:cl1, node2:cl1, node3:cl1, node4:cl1" in out, out
    assert "RoCE" not in out and "NCCL_IB_GID_INDEX" not in out, out  # plain interfaces: Ethernet
