"""The canary verdict's error rates at the default budget shape, side by side with DESIGN.md's targets.

Simulates ``--n`` canaries per scenario (:func:`collscope.canary.verdict_sim.synthetic_frame`: one all_reduce
over 1K-256M by factors of 4, ``--blocks`` ABBA blocks, lognormal run noise per size at each ``--noise``
level, no workload file: one call per measured size) and judges each with :func:`collscope.canary.verdict.judge`
at its defaults (max loss 1%, range share 5%, 95%, 2000 resamples). Scenarios:

* A/A: identical sides; the false no-go rate (target <= 5%);
* B uniformly 3%, 5%, 10% slower at every size: the power to call no-go (DESIGN.md states a target for 5%
  only: >= 80% for a regression on sizes carrying >= 20% of the workload's time; the uniform rows have none);
* B 5% slower on the sizes up to 64M only, which carry about 25% of the workload's time (256M carries the
  rest): the DESIGN.md target itself (power >= 80%).

Prints one table (rates with their binomial standard error) and exits 0.

    .venv/bin/python bench/canary_power.py [--blocks 8] [--noise 0.02,0.03,0.05] [--n 500] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collscope.canary.verdict import judge  # noqa: E402
from collscope.canary.verdict_sim import DEFAULT_SIZES, synthetic_frame  # noqa: E402

Scenario = tuple[str, Callable[[int], float], str, str, float]
"""(name, B's time ratio per size, rate measured, target comparison, target)."""
PART_MAX_BYTES = 64 * 2**20


def _scenarios() -> list[Scenario]:
    return [("A/A (identical sides)", lambda s: 1.0, "no-go", "<=", 0.05),
            ("B 3% slower, all sizes", lambda s: 1.03, "no-go", "", math.nan),
            ("B 5% slower, all sizes", lambda s: 1.05, "no-go", "", math.nan),
            ("B 10% slower, all sizes", lambda s: 1.10, "no-go", "", math.nan),
            ("B 5% slower, sizes <= 64M", lambda s: 1.05 if s <= PART_MAX_BYTES else 1.0, "no-go", ">=", 0.80)]


def _part_share() -> float:
    """The share of the (one call per size) workload's time at sizes up to 64M, from the simulator's model."""
    frame = synthetic_frame(blocks=2, noise=0.0, seed=0)
    a = frame[(frame["side"] == "A") & (frame["block"] == 0) & ~frame["in_place"]]
    return float(a.loc[a["size_bytes"] <= PART_MAX_BYTES, "time_us"].sum() / a["time_us"].sum())


def run(blocks: int, noises: list[float], n: int, seed: int) -> list[list[str]]:
    rows: list[list[str]] = []
    for noise in noises:
        for name, effect, _, cmp, target in _scenarios():
            rng = np.random.default_rng([seed, int(noise * 1e4), len(rows)])
            counts = {"go": 0, "no-go": 0, "inconclusive": 0}
            for i in range(n):
                frame = synthetic_frame(blocks=blocks, noise=noise, effect=effect, seed=rng)
                counts[judge(frame, seed=i).decision] += 1
            rate = counts["no-go"] / n
            se = math.sqrt(rate * (1 - rate) / n)
            if cmp == "<=":
                met = "met" if rate <= target else "NOT met"
            elif cmp == ">=":
                met = "met" if rate >= target else "NOT met"
            else:
                met = "-"
            rows.append([f"{noise * 100:g}%", name, f"{rate * 100:.1f}% +- {se * 100:.1f}",
                         f"{cmp} {target * 100:g}%" if cmp else "-", met,
                         f"{counts['go'] / n * 100:.1f}%", f"{counts['inconclusive'] / n * 100:.1f}%"])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=8, help="ABBA blocks per canary (default 8)")
    parser.add_argument("--noise", default="0.02,0.03,0.05",
                        help="per-run relative noise levels, comma-separated (default 0.02,0.03,0.05)")
    parser.add_argument("--n", type=int, default=500, help="simulated canaries per scenario (default 500)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    noises = [float(x) for x in args.noise.split(",") if x.strip()]
    start = time.perf_counter()
    rows = run(args.blocks, noises, args.n, args.seed)
    head = ["noise/run", "scenario", "no-go rate", "target", "", "go", "inconclusive"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(f"canary verdict at {args.blocks} ABBA blocks, {args.n} simulated canaries per row; workload: one call "
          f"per size 1K-256M (x4), sizes <= 64M carry {_part_share() * 100:.0f}% of its time; max loss 1%, "
          "range share 5%, 95% CI")
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print(f"({time.perf_counter() - start:.0f} s; sizes {len(DEFAULT_SIZES)}; rates +- one binomial standard error)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
