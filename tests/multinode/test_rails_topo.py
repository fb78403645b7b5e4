"""Rails on the simulated cluster: a rail point's traffic goes over its interface; topo collect + topo cluster see
4 nodes x 2 rails and flag the node whose rail is down."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.multinode.conftest import ROOT, Cluster, job_output, records


def test_a_slowed_rail_slows_only_that_rails_point(cluster: Cluster, work: Path) -> None:
    out = work / "rails"
    cluster.run("slow", "node2", "--rail", "1")
    try:
        cluster.sbatch(work, "-N", "2", "--ntasks-per-node=1", str(ROOT / "slurm" / "sweep.sh"), "--preset",
                       "mpi-rails", "--min-bytes", "4M", "--max-bytes", "4M", "--iters", "3", "--warmup", "1",
                       "--repeats", "1", "--out", str(out), timeout_s=120)
    finally:
        cluster.run("fast", "node2")
    assert ", 0 failed" in job_output(work), job_output(work)
    # The default point runs over what the user set (the cluster's env: cl0); its records hold that as inherited
    # (environment), the rail points as forced (settings).
    def rail(r: dict) -> str:
        forced = r["settings"].get("OMPI_MCA_btl_tcp_if_include")
        inherited = (r.get("environment") or {}).get("OMPI_MCA_btl_tcp_if_include")
        if forced:
            return forced
        return f"{inherited or '?'} (default)" if "-default-" in r["point_id"] else "?"

    by_rail = {rail(r): r["time_us"] / 1000 for r in records(out)}
    print("4 MiB all_reduce per rail, ms:", by_rail)
    assert set(by_rail) == {"cl0 (default)", "cl0", "cl1"}, by_rail  # the default: the user's cl0 (cluster env)
    assert by_rail["cl1"] >= 5 * max(by_rail["cl0"], by_rail["cl0 (default)"]), by_rail
    assert all(r["hosts"] == ["node1", "node2"] for r in records(out))


def test_collect_topo_on_four_nodes_then_cluster(cluster: Cluster, work: Path) -> None:
    topo = work / "topo"
    subprocess.run(["ip", "-n", "cs-node4", "link", "set", "cl1", "down"], check=True, timeout=10)
    try:
        cluster.sbatch(work, "-N", "4", str(ROOT / "slurm" / "collect-topo.sh"), str(topo), timeout_s=120)
    finally:
        subprocess.run(["ip", "-n", "cs-node4", "link", "set", "cl1", "up"], check=True, timeout=10)
    shown = subprocess.run([sys.executable, "-m", "collscope", "topo", "cluster", str(topo), "--json"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    print(json.dumps({k: doc[k] for k in ("nodes", "rails", "warnings")}, indent=1))
    assert doc["nodes"] == ["node1", "node2", "node3", "node4"]
    assert [[tuple(m) for m in r["members"]] for r in doc["rails"]] == [
        [("node1", "cl0"), ("node2", "cl0"), ("node3", "cl0"), ("node4", "cl0")],
        [("node1", "cl1"), ("node2", "cl1"), ("node3", "cl1")]]
    assert "node4 differs from the majority: active NICs 1 (majority 2)" in doc["warnings"]
    assert "rail 1: no active NIC on node4" in doc["warnings"]
    for node in doc["nodes"]:
        assert sorted(p.name for p in (topo / node).iterdir()) >= ["ip-addr.json", "ip-link.json", "meta.json"]
