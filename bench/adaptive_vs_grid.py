"""Adaptive sweep against the exhaustive grid, on this machine, same spec.

DESIGN.md target: the adaptive planner finds a configuration within 2% of the exhaustive best with at most 30%
of the exhaustive sweep's run time.

Spec: all_reduce on 2 local ranks (mpirun), 8 B .. 4 MiB by 2, Open MPI's allreduce algorithms 1..6 and the
default, 3 repeats, 20 iterations + 5 warm-up per size. Both sweeps run through the library (``run_sweep`` and
``run_adaptive``), each into its own results directory. The grid's data is the reference: per size, its best
configuration is the one with the highest **median busbw over the 3 repeats**, and the adaptive choice is
scored by the grid's median of the configuration adaptive chose at that size (gap = 1 - that / best). On two
CPU cores the repeat-to-repeat noise of a cell is often 10-50%, so a gap below the grid's own spread of the
best cell is reported as "within noise" next to the strict 2% figure, and a second exhaustive grid is run
after the adaptive sweep and scored the same way: the gap a grid itself gets against another grid is the
floor of what this metric can show on this machine.

With persistent workers (the default) the grid is one worker job, and so is the adaptive sweep: one job serves
every round (the runner feeds it the next round's points while it waits); the number of launches of each sweep
is printed (counted from the points' logs). The verdict on quality says whether 2% can be judged at all here:
when a second exhaustive grid is not within 2% of the first at every size, this machine's noise floor is above
2% and the adaptive sweep's gaps are reported against that floor.

Run time is reported three ways: wall clock of each sweep, the sum of its point durations, and the time spent
inside collectives (sum over records of time_us x (iters + warm-up + 1 check)); on this machine a launch
(mpirun + Python + MPI_Init) costs ~1.4 s whatever the sizes (~0.4 s with OMPI_MCA_btl=^ofi exported), so
with one launch per point the first two are dominated by the number of launches; the third follows the sizes
measured (what dominates on GPU clusters with large messages).

    python bench/adaptive_vs_grid.py [--out /tmp/collscope-adaptive-bench] [--repeats 3] [--min-gain 0.02]
        [--workers persistent|per-point]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from collscope.analysis.fit import aggregate
from collscope.analysis.load import load_results
from collscope.sweeps.adaptive.planner import size_ranges
from collscope.sweeps.adaptive.run import AdaptiveOptions, run_adaptive
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.plan import plan_sweep
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.sweeps.spec import SweepSpec
from collscope.units import format_size
from collscope.vocab.knobs import ompi_algorithm_knob

TARGET_GAP = 0.02
TARGET_TIME = 0.30


def _spec(repeats: int) -> SweepSpec:
    return SweepSpec(name="adaptive-bench", engine="mpi", ops=("all_reduce",), min_bytes=8, max_bytes=4 << 20,
                     nranks=2, repeats=repeats, timeout_s=180.0, iters=20, warmup=5,
                     grid={ompi_algorithm_knob("allreduce"): ("1", "2", "3", "4", "5", "6")})


WORKERS = {"value": "persistent"}


def _options() -> RunOptions:
    mpirun = shutil.which("mpirun") or str(Path(sys.executable).parent / "mpirun")
    launch = LaunchOptions(python=sys.executable, as_root=os.geteuid() == 0, mpirun=mpirun)
    return RunOptions(launcher="mpirun", launch=launch, progress=False, workers=WORKERS["value"])  # type: ignore[arg-type]


def _short(config: str) -> str:
    return "default" if config == "default" else "algo " + config.rsplit("=", 1)[-1]


def _canon(config: str) -> str:
    """The configuration by the grid's knob alone: a variable of the user's environment that the records captured
    (e.g. ``OMPI_MCA_btl`` exported for every run) is the same in every configuration and is left out."""
    knob = ompi_algorithm_knob("allreduce")
    kept = [item for item in config.split(";") if item.split("=", 1)[0] == knob]
    return ";".join(kept) or "default"


def _cells(directory: Path) -> pd.DataFrame:
    df = load_results(directory)
    df["config"] = df["config"].astype(str).map(_canon)
    agg = aggregate(df)
    agg["spread"] = (agg["busbw_max_gbps"] - agg["busbw_min_gbps"]) / agg["busbw_gbps"]
    return agg


def _collective_s(directory: Path) -> float:
    df = load_results(directory)
    return float((df["time_us"] * (df["iters"].astype(float) + df["warmup"].astype(float) + 1)).sum() * 1e-6)


def _launches(directory: Path) -> int:
    """Launches a sweep made: distinct worker jobs named in the points' logs, plus one per per-point attempt."""
    jobs: set[str] = set()
    attempts = 0
    for log in (directory / "points").glob("*.log"):
        lines = log.read_text().splitlines()
        named = [line.split()[4].rstrip(",") for line in lines if line.startswith("# persistent worker job")]
        jobs.update(named)
        attempts += sum(line.startswith("=== collscope attempt") for line in lines) - len(named)
    return len(jobs) + attempts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/collscope-adaptive-bench"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min-gain", type=float, default=0.02)
    ap.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    ap.add_argument("--workers", choices=["per-point", "persistent"], default="persistent",
                    help="how every sweep launches its points (persistent: one worker job per sweep, all rounds)")
    args = ap.parse_args(argv)
    WORKERS["value"] = args.workers
    os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    if args.out.exists():
        shutil.rmtree(args.out)
    spec = _spec(args.repeats)
    quiet = lambda _m: None  # noqa: E731

    t0 = time.monotonic()
    grid_out = run_sweep(plan_sweep(spec), args.out / "grid", _options(), meta={"strategy": "grid"}, echo=quiet)
    grid_wall = time.monotonic() - t0
    t0 = time.monotonic()
    ad = run_adaptive(spec, args.out / "adaptive", _options(), AdaptiveOptions(min_gain=args.min_gain),
                      echo=quiet)
    ad_wall = time.monotonic() - t0
    run_sweep(plan_sweep(spec), args.out / "grid-again", _options(), meta={"strategy": "grid"}, echo=quiet)
    again = _cells(args.out / "grid-again")
    again_best = {int(s): str(c) for s, c in
                  again.pivot(index="size_bytes", columns="config", values="busbw_gbps").idxmax(axis=1).items()}

    grid_points = [o for o in grid_out.outcomes if o.status != "skipped"]
    ad_points = [o for out in ad.outcomes for o in out.outcomes if o.status != "skipped"]
    grid_sum = sum(o.duration_s for o in grid_points)
    ad_sum = sum(o.duration_s for o in ad_points)
    grid_coll, ad_coll = _collective_s(args.out / "grid"), _collective_s(args.out / "adaptive")

    cells = _cells(args.out / "grid")
    median = cells.pivot(index="size_bytes", columns="config", values="busbw_gbps")
    spread = cells.pivot(index="size_bytes", columns="config", values="spread")
    leaders = {size: _canon(c) for size, c in ad.decisions["all_reduce"].leaders.items()}
    rows: list[dict[str, Any]] = []
    for size in median.index:
        best = str(median.loc[size].idxmax())
        chosen = leaders.get(int(size), "default")
        gap = 1 - float(median.loc[size, chosen]) / float(median.loc[size, best])
        gap2 = 1 - float(median.loc[size, again_best[int(size)]]) / float(median.loc[size, best])
        rows.append({"size_bytes": int(size), "grid_best": best, "adaptive": chosen, "gap": gap,
                     "grid_again": again_best[int(size)], "grid_again_gap": gap2,
                     "best_gbps": float(median.loc[size, best]), "best_spread": float(spread.loc[size, best])})

    print(f"spec: all_reduce, 2 ranks (mpirun), {format_size(spec.min_bytes)}..{format_size(spec.max_bytes)} by 2, "
          f"Open MPI allreduce algorithms 1..6 + default, {spec.repeats} repeats, {spec.iters} iters")
    print("busbw compared as the median over repeats; on 2 CPU cores a cell's repeats spread 10-50%\n")
    print(f"{'size':>8} {'grid best':>10} {'GB/s':>7} {'spread':>7} {'adaptive':>10} {'gap':>7} "
          f"{'2nd grid':>10} {'gap':>7}")
    for r in rows:
        print(f"{format_size(r['size_bytes']):>8} {_short(r['grid_best']):>10} {r['best_gbps']:7.3f} "
              f"{r['best_spread']:7.0%} {_short(r['adaptive']):>10} {r['gap']:7.1%} "
              f"{_short(r['grid_again']):>10} {r['grid_again_gap']:7.1%}")
    print("\nbest per size range, grid:     " + ", ".join(
        f"{format_size(x['min_bytes'])}..{format_size(x['max_bytes'])} {_short(x['config'])}"
        for x in size_ranges({r["size_bytes"]: r["grid_best"] for r in rows})))
    print("best per size range, adaptive: " + ", ".join(
        f"{format_size(x['min_bytes'])}..{format_size(x['max_bytes'])} {_short(x['config'])}"
        for x in size_ranges(leaders)))
    dropped = {c: why for r in ad.rounds for c, why in r["decisions"]["all_reduce"]["dropped"].items()}
    for c, why in dropped.items():
        print(f"  adaptive dropped {_short(c)}: {why}")

    within = [r for r in rows if r["gap"] <= TARGET_GAP]
    within_noise = [r for r in rows if r["gap"] <= max(TARGET_GAP, r["best_spread"])]
    worst = max(rows, key=lambda r: r["gap"])
    frac_wall, frac_sum, frac_coll = ad_wall / grid_wall, ad_sum / grid_sum, ad_coll / grid_coll
    print(f"\ngap <= 2% at {len(within)}/{len(rows)} sizes; within max(2%, the grid's spread of its best cell) at "
          f"{len(within_noise)}/{len(rows)}; worst gap {worst['gap']:.1%} at {format_size(worst['size_bytes'])}; "
          f"mean gap {sum(r['gap'] for r in rows) / len(rows):.1%}")
    again_within = sum(r["grid_again_gap"] <= TARGET_GAP for r in rows)
    print(f"reference, a 2nd grid scored against the 1st: gap <= 2% at {again_within}/{len(rows)} sizes, worst "
          f"{max(r['grid_again_gap'] for r in rows):.1%}, "
          f"mean {sum(r['grid_again_gap'] for r in rows) / len(rows):.1%}")
    print(f"points: grid {len(grid_points)}, adaptive {len(ad_points)} in {len(ad.rounds)} rounds; launches: grid "
          f"{_launches(args.out / 'grid')}, adaptive {_launches(args.out / 'adaptive')} ({args.workers} workers)")
    print(f"wall clock: grid {grid_wall:.1f} s, adaptive {ad_wall:.1f} s -> {frac_wall:.0%}")
    print(f"sum of point durations: grid {grid_sum:.1f} s, adaptive {ad_sum:.1f} s -> {frac_sum:.0%}")
    print(f"time inside collectives: grid {grid_coll:.2f} s, adaptive {ad_coll:.2f} s -> {frac_coll:.0%}")
    quality = len(within) == len(rows)
    cost = frac_wall <= TARGET_TIME
    measurable = again_within == len(rows)
    print(f"\n{'PASS' if quality and cost else 'MISS'}: within 2% at every size: {'yes' if quality else 'no'}; "
          f"<= 30% of the grid's wall clock: {'yes' if cost else 'no'} ({frac_wall:.0%}; "
          f"collective time {frac_coll:.0%})")
    if measurable:
        print("noise floor: a second grid is within 2% of the first at every size, so the 2% test is measurable here")
    else:
        print(f"noise floor: a second exhaustive grid is within 2% of the first at only {again_within}/{len(rows)} "
              f"sizes (mean gap {sum(r['grid_again_gap'] for r in rows) / len(rows):.1%}): 2% is below this "
              f"machine's noise, so the quality half cannot be judged here; against that floor the adaptive sweep is "
              f"within 2% at {len(within)}/{len(rows)} sizes, the second grid at {again_within}/{len(rows)}")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "rows": rows, "grid_wall_s": grid_wall, "adaptive_wall_s": ad_wall, "grid_points": len(grid_points),
            "adaptive_points": len(ad_points), "rounds": len(ad.rounds), "grid_sum_s": grid_sum,
            "adaptive_sum_s": ad_sum, "grid_collective_s": grid_coll, "adaptive_collective_s": ad_coll,
            "dropped": dropped, "grid_launches": _launches(args.out / "grid"),
            "adaptive_launches": _launches(args.out / "adaptive"), "grid_again_within": again_within}, indent=2))
    return 0 if quality and cost else 1


if __name__ == "__main__":
    raise SystemExit(main())
