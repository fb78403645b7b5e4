"""Locate against an all-pairs schedule: rounds and wall time to find one slow node, and one slow rail.

DESIGN.md target: one slow node among N found in at most ceil(log2 N) + 2 rounds of parallel tests (all-pairs
needs N - 1 rounds of disjoint pairs), and never a healthy node named.

Two parts, each printing its figures and the ratio to the yardstick, measured side by side in one run:

``sim``      the simulated fabric (collscope.locate.SimFabric), N = 4 .. 64, ``--trials`` random faults each:
             one slow node (every rail), and one slow rail of one node (``--rails 2``). Locate's rounds, tests
             and simulated wall time (per round the slowest test: 1 s launch per repeat plus the collective)
             against the all-pairs schedule run on the same fabric (round-robin pairing, N - 1 rounds per rail,
             after the same node round), and whether exactly the faulty node was named.
``cluster``  the real simulated cluster (scripts/local-cluster.sh, 4 nodes x 2 rails, must be up; root): a random
             node slowed (``slow nodeX``), then a random rail of a random node; each time ``collscope locate``
             inside ``salloc -N 4 --no-kill``, then the all-pairs schedule with the same runner (SrunRunner,
             same repeats and size) inside another salloc; wall clock of both. Every node is made fast again.

    python bench/locate_rounds.py sim [--trials 20]
    python bench/locate_rounds.py cluster [--size 4M] [--repeats 3] [--work /var/tmp/collscope-locate-bench]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from collscope.locate import LocateConfig, SimFabric, TestSpec, locate
from collscope.locate.model import Runner, TestOutcome

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "scripts" / "local-cluster.sh"


def round_robin(nodes: Sequence[str]) -> list[list[tuple[str, str]]]:
    """N - 1 rounds (N even; N rounds with a bye when odd) of disjoint pairs covering every pair once."""
    ring = list(nodes) + ([""] if len(nodes) % 2 else [])
    rounds = []
    for _ in range(len(ring) - 1):
        pairs = [(ring[i], ring[-1 - i]) for i in range(len(ring) // 2)]
        rounds.append([p for p in pairs if "" not in p])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def all_pairs(nodes: Sequence[str], runner: Runner, repeats: int, rails: Sequence[int | None]) -> dict[str, float]:
    """The yardstick: node round, then every pair on every rail in round-robin rounds; wall and simulated time."""
    start = time.monotonic()
    sim_s = 0.0
    rounds = 0
    schedule: list[list[TestSpec]] = [[TestSpec(kind="node", nodes=(n,)) for n in nodes]]
    for rail in rails:
        schedule += [[TestSpec(kind="pair", nodes=p, rail=rail) for p in rnd] for rnd in round_robin(nodes)]
    for specs in schedule:
        with ThreadPoolExecutor(max_workers=len(specs)) as pool:
            outcomes: list[TestOutcome] = list(pool.map(lambda s: runner(s, repeats), specs))
        sim_s += max(o.duration_s for o in outcomes)
        rounds += 1
    return {"rounds": rounds, "tests": sum(len(s) for s in schedule), "wall_s": time.monotonic() - start,
            "sim_s": sim_s}


def _sim_seconds(result) -> float:
    per_round: dict[int, float] = {}
    for t in result.tests:
        per_round[t.round] = max(per_round.get(t.round, 0.0), t.outcome.duration_s)
    return sum(per_round.values())


def bench_sim(trials: int) -> bool:
    ok = True
    print("simulated fabric: one slow node (rails=1) / one slow rail of one node (rails=2); "
          f"{trials} random faults per N")
    print(f"{'case':<10} {'N':>3} {'budget':>6} {'rounds max':>10} {'median':>6} {'all-pairs':>9} {'tests':>6} "
          f"{'ap tests':>8} {'sim s':>7} {'ap sim s':>8} {'time ratio':>10} {'right':>6}")
    for case in ("node", "rail"):
        rails = 1 if case == "node" else 2
        for n in (4, 8, 16, 32, 64):
            nodes = [f"node{i}" for i in range(1, n + 1)]
            rng = random.Random(n * 7 + rails)
            rounds, tests, sims, right = [], [], [], 0
            ap = None
            for trial in range(trials):
                bad = rng.choice(nodes)
                rail = None if case == "node" else rng.randrange(rails)
                fabric = SimFabric(nodes=nodes, rails=rails, slow={(bad, rail): 0.05}, seed=trial)
                result = locate(nodes, fabric, LocateConfig(rails=rails))
                rounds.append(result.rounds)
                tests.append(len(result.tests))
                sims.append(_sim_seconds(result))
                right += {(s.node, s.rail) for s in result.suspects} == {(bad, rail)}
                if ap is None:
                    ap = all_pairs(nodes, SimFabric(nodes=nodes, rails=rails, slow={(bad, rail): 0.05}), 3,
                                   [None] if rails == 1 else list(range(rails)))
            assert ap is not None
            budget = math.ceil(math.log2(n)) + 2
            ok &= right == trials and (case == "rail" or max(rounds) <= budget)
            print(f"{case:<10} {n:>3} {budget if case == 'node' else '-':>6} {max(rounds):>10} "
                  f"{statistics.median(rounds):>6g} {ap['rounds']:>9} {statistics.median(tests):>6g} {ap['tests']:>8} "
                  f"{statistics.median(sims):>7.1f} {ap['sim_s']:>8.1f} {statistics.median(sims) / ap['sim_s']:>10.2f} "
                  f"{right:>3}/{trials}")
    print("target (one slow node in <= ceil(log2 N) + 2 rounds, the right node every time):",
          "met" if ok else "NOT met")
    return ok


# ---- the real simulated cluster ------------------------------------------------------------------------


def _cluster(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CLUSTER), *args], capture_output=True, text=True, timeout=timeout_s)


def _in_allocation(work: Path, argv: list[str],
                   timeout_s: float = 600) -> tuple[subprocess.CompletedProcess[str], float]:
    env = ["env", f"PYTHONPATH={ROOT}", f"PATH={Path(sys.executable).parent}:/usr/bin:/bin:/usr/sbin:/sbin"]
    start = time.monotonic()
    done = _cluster("exec", *env, "salloc", "-N", "4", "--ntasks-per-node=2", "--no-kill", "--chdir", str(work),
                    *argv, timeout_s=timeout_s)
    return done, time.monotonic() - start


def _all_pairs_inner(args: argparse.Namespace) -> None:
    """Inside an allocation: the all-pairs schedule with the real runner; prints one JSON line."""
    import os

    from collscope.locate import SrunRunner, StepOptions, parse_nodelist

    nodes = parse_nodelist(os.environ["SLURM_JOB_NODELIST"])
    runner = SrunRunner(options=StepOptions(python=sys.executable, size_bytes=args.size,
                                            rank_timeout_s=0.9 * args.timeout),
                        work_dir=Path(args.work) / "all-pairs-steps", timeout_s=args.timeout)
    rails = [None] if args.rails == 1 else list(range(args.rails))
    print(json.dumps(all_pairs(nodes, runner, args.repeats, rails)))


def bench_cluster(args: argparse.Namespace) -> bool:
    status = _cluster("status", timeout_s=60)
    if status.returncode != 0:
        print(f"cluster: not up ({status.stdout.strip().splitlines()[-1:] or status.stderr.strip()}); "
              "run 'scripts/local-cluster.sh up' first")
        return False
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random()
    ok = True
    py = sys.executable
    print(f"real simulated cluster, 4 nodes x 2 rails, all_reduce {args.size} bytes, {args.repeats} repeats, "
          f"--min-gap {args.min_gap:g}")
    print(f"{'case':<22} {'rounds':>6} {'target':>6} {'wall s':>7} {'all-pairs rounds':>16} {'ap wall s':>9} "
          f"{'ratio':>6} {'named':<16}")
    for case in ("node", "rail"):
        node = f"node{rng.randint(1, 4)}"
        rail = rng.randrange(2) if case == "rail" else None
        rails = 1 if case == "node" else 2
        _cluster("slow", node, *(["--rail", str(rail)] if rail is not None else []))
        try:
            out = work / f"locate-{case}"
            done, wall = _in_allocation(work, [py, "-m", "collscope", "locate", "--rails", str(rails), "--json",
                                               "--size", str(args.size), "--repeats", str(args.repeats),
                                               "--timeout", str(args.timeout), "--min-gap", str(args.min_gap),
                                               "--out", str(out)])
            try:
                doc = json.loads(done.stdout[done.stdout.index("{"):])
            except ValueError:
                print(f"{case}: locate printed no JSON (exit {done.returncode}):\n{done.stdout[-2000:]}\n"
                      f"{done.stderr[-2000:]}")
                ok = False
                continue
            ap_done, ap_wall = _in_allocation(work, [py, str(Path(__file__).resolve()), "_all_pairs", "--size",
                                                     str(args.size), "--repeats", str(args.repeats), "--rails",
                                                     str(rails), "--timeout", str(args.timeout), "--work",
                                                     str(work)])
            ap = json.loads(ap_done.stdout.strip().splitlines()[-1]) if ap_done.returncode == 0 else {}
        finally:
            _cluster("fast", node)
        named = [(s["node"], s["rail"]) for s in doc["suspects"]]
        right = named == [(node, rail)]
        ok &= right
        label = f"slow {node}" + (f" rail {rail}" if rail is not None else "")
        target = str(math.ceil(math.log2(4)) + 2) if rail is None else "-"
        print(f"{label:<22} {doc['rounds']:>6} {target:>6} {wall:>7.1f} {ap.get('rounds', '?'):>16} "
              f"{ap.get('wall_s', float('nan')):>9.1f} {wall / ap['wall_s'] if ap else float('nan'):>6.2f} "
              f"{','.join(f'{n}' + ('' if r is None else f' r{r}') for n, r in named) or 'none':<16}"
              f"{'' if right else '  WRONG'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=["sim", "cluster", "_all_pairs"])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--size", type=int, default=4 << 20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rails", type=int, default=1)
    parser.add_argument("--min-gap", type=float, default=0.8,
                        help="cluster: locate's --min-gap; 2 shared cores behind 4 nodes make healthy tests vary up "
                             "to 3x, and a slowed node is about 40x slower (the multinode tests use 0.8 too)")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--work", default="/var/tmp/collscope-locate-bench")
    args = parser.parse_args(argv)
    if args.part == "_all_pairs":
        _all_pairs_inner(args)
        return 0
    ok = bench_sim(args.trials) if args.part == "sim" else bench_cluster(args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
