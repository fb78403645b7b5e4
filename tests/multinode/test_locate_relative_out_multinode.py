"""``collscope locate`` as docs/locate.md shows it: under ``salloc``, started from a working directory that is not
the checkout, with a relative ``--out`` (and with none: ``results/locate-<job id>``) (issue 26 item 4).

``scripts/local-cluster.sh exec`` enters the cluster's namespaces keeping the caller's directory (``nsenter
--wd``), so salloc and locate run in a directory of another mount namespace: the condition in which a temporary
file named by its absolute path and a target named relative to the working directory are two mounts of one file
system, and the rename between them failed with ``OSError: [Errno 18] Invalid cross-device link``. Every path
locate writes is now absolute from the start and each temporary is renamed within its own directory.
Without the cluster the tests SKIP (CI sets COLLSCOPE_REQUIRE_CLUSTER=1: they fail instead).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.load import load_results
from collscope.cli import main
from tests.multinode.conftest import Cluster

pytestmark = pytest.mark.multinode

FAST_ARGS = ["--size", "4M", "--iters", "5", "--warmup", "2", "--timeout", "40", "--min-gap", "0.8"]


@pytest.mark.parametrize("out", [None, "rel/locate-out"], ids=["default-out", "relative-out"])
def test_locate_under_salloc_from_another_directory(cluster: Cluster, work: Path, out: str | None) -> None:
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    argv = ["exec", *cluster.env_args(), "salloc", "-N", "4", "--ntasks-per-node=2", "--no-kill",
            sys.executable, "-m", "collscope", "locate", "--rails", "2", *FAST_ARGS,
            *(["--out", out] if out is not None else [])]
    done = cluster.run(*argv, timeout_s=400, check=False, cwd=elsewhere)
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "cross-device" not in output, output[-3000:]
    assert done.returncode == 0, output[-3000:]
    found = [elsewhere / out] if out is not None else sorted((elsewhere / "results").glob("locate-*"))
    assert len(found) == 1, (found, output[-2000:])
    root = found[0]
    assert f"results: {root}" in done.stdout, done.stdout[-2000:]
    doc = json.loads((root / "locate.json").read_text())
    assert doc["out"] == str(root) and doc["suspects"] == []
    assert len(list((root / "points").glob("*.jsonl"))) == len(doc["tests"])
    assert not list(root.rglob(".*.tmp"))  # no temporary left behind
    # the results directory analyses as its tests: rail tests never pooled with all-rail tests
    frame = load_results(root)
    for config, rows in frame.groupby("config", observed=True):
        rails = set(rows["rail"].astype(object).where(rows["rail"].notna(), None))
        assert len(rails) == 1, (config, rails)
    analyzed = CliRunner().invoke(main, ["analyze", str(root)])
    assert analyzed.exit_code in (0, 1), analyzed.output[-2000:]
    assert "rail=cl1" in analyzed.output
