"""How fast ``parse_nccl_tests`` turns nccl-tests text into Measurement records (>= 50 MB/s; DESIGN: 100 MB/s).

Generates, in memory, the stdout of a large realistic run: a 2-node x 8-GPU all_reduce_perf in the
v2.19 format (version lines, 16 rank lines, NCCL INFO noise), ``-d all -o all -N <cycles>`` over
8 B .. 8 GiB, so every (type, redop, size) row repeats per cycle; then parses it and prints MB/s next to
its yardsticks: the required 50 MB/s and DESIGN.md's target of 100 MB/s, as ratios (>= 1.00: met).

    .venv/bin/python bench/ingest_speed.py [--mb 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collscope.collectives.nccl_tests.parse import parse_nccl_tests  # noqa: E402

REQUIRED_MB_S = 50.0
TARGET_MB_S = 100.0
TYPES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
         "double": 8, "bfloat16": 2}
REDOPS = ("sum", "prod", "max", "min", "avg")


def _head(nranks: int) -> list[str]:
    lines = ["# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803",
             "# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0 unalign: 0",
             "#", "# Using devices"]
    for r in range(nranks):
        host = f"node{r // 8:03d}"
        lines.append(f"#  Rank {r:2d} Group  0 Pid {4000 + r:6d} on {host:>10s} device {r % 8:2d} "
                     f"[0000:{0x18 + r % 8:02x}:00] NVIDIA H100 80GB HBM3")
    lines += [f"node000:4000:4000 [0] NCCL INFO NCCL_IB_HCA set to mlx5_{i}" for i in range(4)]
    lines += ["#",
              "#                                                              out-of-place                       "
              "in-place          ",
              "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
              "algbw   busbw  #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  "
              "(GB/s)  (GB/s)         "]
    return lines


def _f(v: float, width: int) -> str:
    for digits in (2, 1, 0):
        s = f"{v:{width}.{digits}f}"
        if len(s) <= width:
            return s
    return f"{v:{width}.1e}"


def generate(target_bytes: int, nranks: int = 16) -> str:
    lines = _head(nranks)
    factor = 2 * (nranks - 1) / nranks
    size_total = sum(len(x) + 1 for x in lines)
    cycle = 0
    while size_total < target_bytes:
        for dtype, width in TYPES.items():
            for redop in REDOPS:
                size = 8
                while size <= 8 << 30:
                    if size >= width:
                        t = 20.0 + size / 180e3 + (cycle % 7) * 0.13
                        alg = size / t / 1e3
                        row = (f"{size:12d}  {size // width:12d}  {dtype:>8s}  {redop:>6s}  {-1:6d}  {_f(t, 7)}  "
                               f"{_f(alg, 6)}  {_f(alg * factor, 6)}  {0:6g}  {_f(t * 0.99, 7)}  "
                               f"{_f(alg / 0.99, 6)}  {_f(alg * factor / 0.99, 6)}  {0:6g}")
                        lines.append(row)
                        size_total += len(row) + 1
                    size *= 2
        lines.append("node000:4000:4000 [0] NCCL INFO comm 0x55d1 rank 0 nranks 16 cudaDev 0 busId 18000 - Abort")
        cycle += 1
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 123.456 ", "#",
              "# Collective test concluded: all_reduce_perf", "#"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=50.0, help="size of the generated output (MB)")
    parser.add_argument("--repeat", type=int, default=3, help="parse this many times, report the best")
    args = parser.parse_args()
    text = generate(int(args.mb * 1e6))
    mb = len(text.encode()) / 1e6
    best = float("inf")
    records = 0
    for _ in range(args.repeat):
        start = time.perf_counter()
        run = parse_nccl_tests(text, source="bench")
        best = min(best, time.perf_counter() - start)
        records = len(run.records)
    rate = mb / best
    print(f"{mb:.1f} MB, {records} records, best of {args.repeat}: {best:.3f} s = {rate:.1f} MB/s "
          f"({records / best / 1e6:.2f} M records/s)")
    print(f"required >= {REQUIRED_MB_S:.0f} MB/s: {rate / REQUIRED_MB_S:.2f}x "
          f"({'met' if rate >= REQUIRED_MB_S else 'MISSED'}); DESIGN target {TARGET_MB_S:.0f} MB/s: "
          f"{rate / TARGET_MB_S:.2f}x ({'met' if rate >= TARGET_MB_S else 'MISSED'})")


if __name__ == "__main__":
    main()
