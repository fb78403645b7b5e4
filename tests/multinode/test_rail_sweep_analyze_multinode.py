"""A rail sweep on the simulated cluster with node2's rail 1 slowed: ``analyze``, ``report`` and ``recommend`` show
each rail as its own configuration, and the slow rail is visible (issue 26 item 2).

``mpi-rails`` pins Open MPI's TCP transport to one interface per point (``OMPI_MCA_btl_tcp_if_include``: plumbing,
so the rail is named ``rail=cl<r>``); ``gloo-rails`` pins gloo's (``GLOO_SOCKET_IFNAME``). Before, the three points
of ``mpi-rails`` (default, cl0, cl1) had one configuration name and were pooled into one spread, and gloo records
did not say their interface. Without the cluster the tests SKIP (CI: COLLSCOPE_REQUIRE_CLUSTER=1 fails them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from tests.multinode.conftest import ROOT, Cluster, job_output, records

pytestmark = pytest.mark.multinode

SMALL = ["--min-bytes", "4M", "--max-bytes", "4M", "--iters", "3", "--warmup", "1", "--repeats", "2"]


@pytest.mark.parametrize(("preset", "names"), [
    ("mpi-rails", {"default": None, "rail=cl0": "cl0", "rail=cl1": "cl1"}),
    ("gloo-rails", {"default": None, "GLOO_SOCKET_IFNAME=cl0": "cl0", "GLOO_SOCKET_IFNAME=cl1": "cl1"}),
])
def test_the_slow_rail_is_its_own_configuration(cluster: Cluster, work: Path, preset: str,
                                                names: dict[str, str | None]) -> None:
    out = work / "rails"
    cluster.run("slow", "node2", "--rail", "1")
    try:
        cluster.sbatch(work, "-N", "2", "--ntasks-per-node=1", str(ROOT / "slurm" / "sweep.sh"), "--preset", preset,
                       *SMALL, "--out", str(out), timeout_s=240)
    finally:
        cluster.run("fast", "node2")
    assert ", 0 failed" in job_output(work), job_output(work)
    recs = records(out)
    # every record carries the rail its point pinned (None for the default, whatever the ranks inherited)
    assert {r.get("rail") for r in recs} == set(names.values()), {r.get("rail") for r in recs}
    result = CliRunner().invoke(main, ["analyze", str(out), "--json"])
    assert result.exit_code in (0, 1), result.output[-3000:]
    peaks = {c["config"]: c["peak_busbw_gbps"] for c in json.loads(result.output)["configs"]}
    print(preset, "peak busbw per configuration, GB/s:", peaks)
    assert set(peaks) == set(names), peaks
    slow = next(k for k, v in names.items() if v == "cl1")
    fast = next(k for k, v in names.items() if v == "cl0")
    assert peaks[slow] * 5 <= peaks[fast], peaks  # the slowed rail shows, never pooled into one spread
    report = CliRunner().invoke(main, ["report", str(out), "--out", str(work / "report")])
    assert report.exit_code in (0, 1), report.output[-3000:]
    assert slow.replace("_", "\\_") in (work / "report" / "report.md").read_text()  # markdown escapes _
    recommended = CliRunner().invoke(main, ["recommend", str(out), "--format", "json"])
    assert recommended.exit_code in (0, 1), recommended.output[-3000:]
    doc = json.loads(recommended.output)
    assert slow not in {r["config"] for g in doc["groups"] for r in g["ranges"]}  # a slow rail is never chosen
