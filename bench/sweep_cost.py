"""Sweep cost: the ``mpi-algos`` preset on 2 local ranks, one launch per point against persistent workers.

DESIGN.md target ("Sweep cost"): with persistent workers the grid runs at least 5x faster in wall clock than
one launch per point, and at least half of its wall clock is spent inside the collectives.

Both modes run the same plan through the library (``run_sweep``), each into a fresh results directory, the
modes interleaved (per-point, persistent, per-point, ...) for ``--rounds`` rounds so that a change in the
machine's load hits both. Per run: wall clock, the time inside collectives (sum over records of
time_us x (iters + warm-up + 1 check call when checked): every call a point makes), and that share of the wall
clock. The ratio is per round (per-point wall / persistent wall), then its median and range.

    python bench/sweep_cost.py [--rounds 3] [--out /tmp/collscope-sweep-cost] [--max-bytes 1M]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.plan import plan_sweep, preset
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.units import parse_size

TARGET_SPEEDUP = 5.0
TARGET_SHARE = 0.5


def _options(workers: str) -> RunOptions:
    mpirun = shutil.which("mpirun") or str(Path(sys.executable).parent / "mpirun")
    launch = LaunchOptions(python=sys.executable, as_root=os.geteuid() == 0, mpirun=mpirun,
                           local_cores=len(os.sched_getaffinity(0)))
    return RunOptions(launcher="local", launch=launch, progress=False, workers=workers)  # type: ignore[arg-type]


def _one(plan, out: Path, workers: str, tries: int = 3) -> dict[str, float]:
    """One sweep into a fresh directory; a run with a failed point is thrown away and run again (said so): on a
    shared machine mpirun sometimes fails to start ("The PMIx server's listener thread failed to start")."""
    for attempt in range(1, tries + 1):
        shutil.rmtree(out, ignore_errors=True)
        start = time.monotonic()
        outcome = run_sweep(plan, out, _options(workers), meta={}, echo=lambda m: None)
        wall = time.monotonic() - start
        failed = [o for o in outcome.outcomes if o.status != "done"]
        if not failed:
            break
        print(f"  ({workers}: {len(failed)} point(s) failed ({failed[0].reason}: {failed[0].detail[:120]}); "
              f"run {'thrown away, again' if attempt < tries else 'failed too often'})", flush=True)
    else:
        raise SystemExit(f"{workers}: {len(failed)} point(s) did not finish in {tries} tries: {failed[:3]}")
    results = ResultsDir(out)
    inside_us = 0.0
    for point in plan.points:
        for r in results.read_point(point.point_id):
            if r.iters is None or r.warmup is None:
                raise SystemExit(f"{point.point_id}: a record without its iteration counts: the time inside "
                                 "collectives cannot be counted")
            inside_us += r.time_us * (r.iters + r.warmup + (0 if r.wrong is None else 1))
    return {"wall_s": wall, "inside_s": inside_us / 1e6, "share": inside_us / 1e6 / wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("/tmp/collscope-sweep-cost"))
    parser.add_argument("--max-bytes", default=None, help="override the preset's 1 MiB")
    args = parser.parse_args()
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    overrides = {"nranks": 2}
    if args.max_bytes:
        overrides["max_bytes"] = parse_size(args.max_bytes)
    plan = plan_sweep(preset("mpi-algos", **overrides))
    print(f"mpi-algos: {len(plan.points)} points on 2 local ranks, {args.rounds} rounds, modes interleaved")
    runs: dict[str, list[dict[str, float]]] = {"per-point": [], "persistent": []}
    for r in range(args.rounds):
        for workers in ("per-point", "persistent"):
            got = _one(plan, args.out / f"{workers}-{r}", workers)
            runs[workers].append(got)
            print(f"  round {r + 1} {workers:>10}: wall {got['wall_s']:7.2f} s, inside collectives "
                  f"{got['inside_s']:6.3f} s ({100 * got['share']:5.1f} %)", flush=True)
    ratios = [a["wall_s"] / b["wall_s"] for a, b in zip(runs["per-point"], runs["persistent"], strict=True)]
    print()
    print("| mode | wall clock (s), median (min..max) | inside collectives (s) | share of wall clock |")
    print("|---|---|---|---|")
    for workers, figures in runs.items():
        walls = [g["wall_s"] for g in figures]
        shares = [g["share"] for g in figures]
        print(f"| {workers} | {statistics.median(walls):.2f} ({min(walls):.2f}..{max(walls):.2f}) | "
              f"{statistics.median([g['inside_s'] for g in figures]):.3f} | {100 * statistics.median(shares):.1f} % "
              f"({100 * min(shares):.1f}..{100 * max(shares):.1f}) |")
    speedup = statistics.median(ratios)
    share = statistics.median([g["share"] for g in runs["persistent"]])
    print(f"\nspeed-up per-point / persistent: {speedup:.1f}x ({min(ratios):.1f}..{max(ratios):.1f}); target "
          f">= {TARGET_SPEEDUP:g}x: {'PASS' if min(ratios) >= TARGET_SPEEDUP else 'MISS'}")
    print(f"persistent, share inside collectives: {100 * share:.1f} %; target >= {100 * TARGET_SHARE:g} %: "
          f"{'PASS' if share >= TARGET_SHARE else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
