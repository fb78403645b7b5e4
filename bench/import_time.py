"""Import time of the light paths: ``import collscope.proc`` and the per-rank ``collscope bench --engine mpi``.

DESIGN.md target ("Sweep cost"): ``collscope bench`` imports no pandas or networkx, import time under 150 ms.
Each path runs ``--repeat`` times as a fresh ``python -X importtime`` process; the figure is the sum of the
top-level imports' cumulative times, the median with min..max beside the 150 ms yardstick, and whether pandas,
networkx or matplotlib were loaded. Two imports are shown apart and not counted: ``mpi4py.MPI``, whose import
runs ``MPI_Init`` (here about 1 s: Open MPI probing this machine, not Python loading modules), and the finder
of an editable install (``pip install -e``; absent from a plain install). The bench rank runs as a singleton
(no launcher), one 8-byte all_reduce.

    .venv/bin/python bench/import_time.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

TARGET_MS = 150.0
HEAVY = ("pandas", "networkx", "matplotlib")
ROOT = Path(__file__).resolve().parents[1]
PATHS = {
    "import collscope.proc": ["-c", "import collscope.proc"],
    "collscope bench --engine mpi (one rank)": ["-m", "collscope", "bench", "--engine", "mpi", "--op", "all_reduce",
                                                "--min-bytes", "8", "--max-bytes", "8", "--iters", "2",
                                                "--warmup", "1"],
}


def import_times(stderr: str) -> tuple[float, float, float, set[str]]:
    """(counted ms, mpi4py.MPI ms, editable finder ms, every module name) of one ``-X importtime`` report."""
    counted = mpi = finder = 0.0
    names: set[str] = set()
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        top = name.startswith(" ") and not name.startswith("  ")
        module = name.strip()
        names.add(module)
        ms = int(cumulative) / 1000
        if module.startswith("__editable__") and module.endswith("_finder"):
            finder += ms  # loaded by site (counted in its time) or on its own
            counted -= 0.0 if top else ms
        elif top and module == "mpi4py.MPI":
            mpi += ms
        elif top:
            counted += ms
    return counted, mpi, finder, names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="fresh processes per path")
    args = parser.parse_args()
    for label, argv in PATHS.items():
        counted, mpi, finder, heavy = [], [], [], set()
        for _ in range(args.repeat):
            done = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=ROOT, capture_output=True,
                                  text=True, timeout=120, check=False)
            if done.returncode != 0:
                print(f"{label}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
                break
            ms, mpi_ms, finder_ms, names = import_times(done.stderr)
            counted.append(ms)
            mpi.append(mpi_ms)
            finder.append(finder_ms)
            heavy |= {m.split(".")[0] for m in names} & set(HEAVY)
        if not counted:
            continue
        med = statistics.median(counted)
        print(f"{label}: {med:.0f} ms median ({min(counted):.0f}..{max(counted):.0f}) over {len(counted)} processes; "
              f"target < {TARGET_MS:.0f} ms: {med / TARGET_MS:.2f}x ({'met' if med < TARGET_MS else 'MISSED'})")
        extra = []
        if max(mpi):
            extra.append(f"mpi4py.MPI (MPI_Init) {statistics.median(mpi):.0f} ms")
        if max(finder):
            extra.append(f"editable-install finder {statistics.median(finder):.0f} ms")
        print(f"  not counted: {', '.join(extra) or 'nothing'}; pandas/networkx/matplotlib loaded: "
              f"{', '.join(sorted(heavy)) or 'none'}")


if __name__ == "__main__":
    main()
