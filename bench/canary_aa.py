"""False no-go rate of real A/A canaries on this machine, next to DESIGN.md's target (<= 5%).

Each run is a whole ``collscope canary`` with identical sides, through the library (``run_canary`` +
``judge_canary``), into its own results directory: Open MPI (pip) under mpirun, 2 ranks, engine mpi, all_reduce
64 KiB..4 MiB by 2, ``--blocks`` ABBA blocks (6 by default, the size of the test suite's A/A canary), 20 iterations
+ 3 warm-up per size. Both sides inherit ``OMPI_MCA_btl=^ofi`` (no fabric here; 1 s per MPI_Init saved) and
``OMPI_MCA_mpi_yield_when_idle=1`` (2 ranks on 2 shared cores), unless the environment sets them.

A no-go of identical sides is a false alarm; the rate is ``no-go / runs`` with its 95% Wilson interval (with 20
runs one false no-go is already 5%, so the interval says how much the figure can be trusted). Inconclusive and go
are both correct answers for A/A; their counts are printed too. Also printed: the wall clock per canary and the
median A/A noise the verdicts estimated from their blocks.

    python bench/canary_aa.py [--runs 20] [--blocks 6] [--out /tmp/collscope-canary-aa] [--max-loss 0.01]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from collscope.canary.plan import parse_side
from collscope.canary.run import CanaryRequest, run_canary
from collscope.canary.run_judge import judge_canary

TARGET = 0.05


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a rate k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--max-loss", type=float, default=0.01)
    parser.add_argument("--out", type=Path, default=Path("/tmp/collscope-canary-aa"))
    args = parser.parse_args()
    os.environ.setdefault("OMPI_MCA_btl", "^ofi")
    os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    venv_bin = str(Path(sys.executable).parent)
    os.environ["PATH"] = f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    shutil.rmtree(args.out, ignore_errors=True)
    decisions: Counter[str] = Counter()
    noise: list[float] = []
    walls: list[float] = []
    for run in range(args.runs):
        out = args.out / f"aa-{run:02d}"
        request = CanaryRequest(out_dir=out, a=parse_side("A"), b=parse_side("B"), launcher="mpirun",
                                oversubscribe=True, engine="mpi", ops=("all_reduce",), nranks=2,
                                min_bytes=64 << 10, max_bytes=4 << 20, iters=20, warmup=3, blocks=args.blocks,
                                max_loss=args.max_loss)
        started = time.monotonic()
        ran = run_canary(request, echo=lambda _line: None)
        verdict = judge_canary(out).verdict
        walls.append(time.monotonic() - started)
        decisions[verdict.decision] += 1
        noise.append(verdict.aa_noise)
        failed = f", {len(ran.failed)} point(s) failed" if ran.failed else ""
        print(f"A/A run {run + 1:2d}/{args.runs}: {verdict.decision:<12} workload change "
              f"{verdict.workload_change.estimate:+.1%} [{verdict.workload_change.low:+.1%}, "
              f"{verdict.workload_change.high:+.1%}], A/A noise {verdict.aa_noise:.1%}, {walls[-1]:.0f} s{failed}",
              flush=True)
    n = sum(decisions.values())
    k = decisions["no-go"]
    low, high = wilson(k, n)
    rate = k / n if n else float("nan")
    print(f"\nfalse no-go rate: {k}/{n} = {rate:.1%} (95% Wilson interval {low:.1%}..{high:.1%}); target <= "
          f"{TARGET:.0%}: {'met' if rate <= TARGET else 'NOT met'} (ratio to target {rate / TARGET:.2f})")
    print(f"go {decisions['go']}, inconclusive {decisions['inconclusive']}, no-go {k}; blocks per canary "
          f"{args.blocks}; wall clock per canary median {statistics.median(walls):.1f} s; A/A noise median "
          f"{statistics.median(noise):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
