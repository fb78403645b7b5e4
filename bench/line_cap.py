"""How long ``nccl-log`` parsing and a topology capture take with one very long line in them (issue 22 item 13:
an 80,000-space line took 18-24 s before the patterns were made linear and lines over 64 KiB skipped). Prints the
seconds for each line length next to the same input without the long line.

    .venv/bin/python bench/line_cap.py [--sizes 80000,1000000,10000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collscope.collectives.nccl_log import parse_nccl_log  # noqa: E402
from collscope.topo.detect import add_capture  # noqa: E402
from collscope.topo.node import NodeCaptures  # noqa: E402

LOG = ROOT / "tests" / "fixtures" / "nccl-debug" / "nccl2.24.3-2node-16rank-pxn-gdr-tuning-blocks.log"
TOPO = ROOT / "tests" / "fixtures" / "nvidia-smi" / "topo-spaces-4gpu-nv18-4nic-legend-gpu-numa-id.txt"


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="80000,1000000,10000000", help="long line lengths (characters)")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    log, topo = LOG.read_text(), TOPO.read_text()
    print(f"nccl-log without a long line: {_timed(lambda: parse_nccl_log(log)):.3f} s; "
          f"topo capture: {_timed(lambda: add_capture(NodeCaptures(), topo, 't')):.3f} s")
    for n in sizes:
        line = "gpu-h07:4412:4412 [0] NCCL INFO " + " " * n + "x"
        t_log = _timed(lambda: parse_nccl_log(line + "\n" + log))  # noqa: B023
        t_topo = _timed(lambda: add_capture(NodeCaptures(), topo + " " * n + "x\n", "t"))  # noqa: B023
        print(f"line of {n:>11,} characters: nccl-log {t_log:.3f} s, topo capture {t_topo:.3f} s")


if __name__ == "__main__":
    main()
