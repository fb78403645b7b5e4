"""A sharded sweep with one slow node compares settings, not nodes (issue 26, item 1).

Two shards of one sweep run at the same time on two node pairs (node1,node2 and node3,node4) while node3 is
slowed (scripts/local-cluster.sh slow node3), as the tasks of a job array placed on different nodes do; the
same spec runs unsharded on node1,node2 as the reference. Before shards split by repeat, each configuration of
this 4-configuration plan ran entirely on one pair, so half of them looked 20x slower than the others with no
warning. Now each shard measures every configuration: the sharded sweep ranks the configurations as the
unsharded one does at the sizes the slow node shapes, or warns (run-to-run spread, or hosts that differ), and it
never claims a difference beyond noise that the reference does not show without saying that hosts differ.
"""

from __future__ import annotations

import math
from itertools import permutations
from pathlib import Path

from collscope.analysis.compare import analyze
from collscope.analysis.crossovers import sample
from collscope.analysis.load import load_results
from collscope.analysis.noise import Sample, beyond_noise
from tests.multinode.conftest import ROOT, Cluster, job_output, records

SPEC = """\
name: shards-slow-node
engine: mpi
ops: [all_reduce]
min_bytes: 1024
max_bytes: 262144
repeats: 4
iters: 5
warmup: 2
grid:
  OMPI_MCA_coll_tuned_allreduce_algorithm: [default, "3", "4", "6"]
"""
SHAPED_FROM = 64 << 10
"""Sizes from here on are shaped by the slow node (200 Mbit/s: 64 KiB takes ~3 ms, ~0.1 ms between fast nodes)."""
PAIRS = ("node1,node2", "node3,node4")


def _cells(out: Path) -> dict[str, dict[int, Sample]]:
    sizes = analyze(load_results(out)).sizes
    cells: dict[str, dict[int, Sample]] = {}
    for row in sizes[(sizes["size_bytes"] >= SHAPED_FROM) & (sizes["n"] > 0)].to_dict(orient="records"):
        cells.setdefault(str(row["config"]), {})[int(row["size_bytes"])] = sample(row)
    return cells


def _claims(cells: dict[str, dict[int, Sample]]) -> set[tuple[str, str]]:
    """(winner, loser): the winner beats the loser beyond noise (the analysis' one rule) at the shaped sizes."""
    order = sorted({s for by_size in cells.values() for s in by_size})
    return {(a, b) for a, b in permutations(cells, 2)
            if any(beyond_noise([(cells[a].get(s), cells[b].get(s)) for s in order], 0.03))}


def _ranking(cells: dict[str, dict[int, Sample]]) -> list[str]:
    largest = max(s for by_size in cells.values() for s in by_size)
    return sorted(cells, key=lambda c: -cells[c][largest].median_gbps)


def test_sharded_sweep_with_a_slow_node_ranks_settings_or_warns(cluster: Cluster, work: Path) -> None:
    spec = work / "spec.yaml"
    spec.write_text(SPEC)
    sharded, reference = work / "sharded", work / "reference"
    sweep = str(ROOT / "slurm" / "sweep.sh")
    common = ["-N", "2", "--ntasks-per-node=1"]
    cluster.run("slow", "node3")
    try:
        jobs = [cluster.submit(work, *common, "-w", nodes, sweep, str(spec), "--shard", f"{k}/2",
                               "--workers", "persistent", "--out", str(sharded)) for k, nodes in enumerate(PAIRS)]
        for job in jobs:
            assert cluster.wait(job, timeout_s=400) == ("COMPLETED", "0:0"), job_output(work)
    finally:
        cluster.run("fast", "node3")
    cluster.sbatch(work, *common, "-w", PAIRS[0], sweep, str(spec), "--workers", "persistent", "--out",
                   str(reference), timeout_s=400)

    # every configuration was measured on both node pairs: shards split repeats, not configurations
    placed: dict[str, set[str]] = {}
    for rec in records(sharded):
        placed.setdefault(rec["settings"].get("OMPI_MCA_coll_tuned_allreduce_algorithm", "default"), set()).add(
            ",".join(rec["hosts"]))
    assert placed == {c: set(PAIRS) for c in ("default", "3", "4", "6")}, placed

    result = analyze(load_results(sharded))
    warned_hosts = {h.config for h in result.host_differences} | {h.baseline for h in result.host_differences}
    spread = {(a.config, a.size_bytes) for a in result.anomalies if a.kind == "spread"}
    ref, got = _cells(reference), _cells(sharded)
    assert set(ref) == set(got) and len(ref) == 4, (sorted(ref), sorted(got))

    # no difference beyond noise that the reference does not show, unless the hosts differ and it says so
    for winner, loser in sorted(_claims(got) - _claims(ref)):
        assert {winner, loser} & warned_hosts, (
            f"the sharded sweep says {winner} beats {loser} beyond noise, the unsharded one does not, and nothing "
            f"warns: {got[winner]} vs {got[loser]}")

    # the same ranking at the largest size, or a warning on every configuration that moved
    largest = max(got[next(iter(got))])
    ref_rank, got_rank = _ranking(ref), _ranking(got)
    moved = [c for c, r in zip(got_rank, ref_rank, strict=True) if c != r]
    unwarned = [c for c in moved if (c, largest) not in spread and c not in warned_hosts]
    assert not unwarned, (f"ranking at {largest} B: sharded {got_rank}, unsharded {ref_rank}; no warning for "
                          f"{unwarned} (spread anomalies: {sorted(spread)})")
    # the slow node shows as spread of every configuration, never as one configuration's speed
    slow_share = [got[c][largest].max_gbps / got[c][largest].min_gbps for c in got]
    assert all(math.isfinite(r) and r > 2 for r in slow_share), slow_share
