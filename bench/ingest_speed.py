"""How fast ``parse_nccl_tests`` turns nccl-tests text into Measurement records (>= 50 MB/s; DESIGN: 100 MB/s).

Generates, in memory, the stdout of a large realistic run: a 2-node x 8-GPU all_reduce_perf in the
v2.19 format (version lines, 16 rank lines, NCCL INFO noise), ``-d all -o all -N <cycles>`` over
8 B .. 8 GiB, so every (type, redop, size) row repeats per cycle; then parses it and prints MB/s next to
its yardsticks: the required 50 MB/s and DESIGN.md's target of 100 MB/s, as ratios (>= 1.00: met). The figure
is the median over ``--repeat`` parses (min..max beside it), wall clock and CPU time, and the process's peak
memory. ``--pure`` reads every row block with the pure-Python path, for a side-by-side comparison.

    .venv/bin/python bench/ingest_speed.py [--mb 50] [--repeat 5] [--pure]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collscope.collectives.nccl_tests import parse as parse_module  # noqa: E402
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


def _stats(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return ordered[0], statistics.median(ordered), ordered[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=50.0, help="size of the generated output (MB)")
    parser.add_argument("--repeat", type=int, default=5, help="parse this many times; median and spread reported")
    parser.add_argument("--pure", action="store_true",
                        help="read every row block with the pure-Python path (no fixed-width numpy reading)")
    args = parser.parse_args()
    if args.pure:
        parse_module.FIXED_MIN_ROWS = 1 << 62
    text = generate(int(args.mb * 1e6))
    mb = len(text.encode()) / 1e6
    rss_text = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    walls, cpus = [], []
    records = 0
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        run = parse_nccl_tests(text, source="bench")
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        records = len(run.records)
        del run
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lo, med, hi = _stats(walls)
    rate = mb / med
    print(f"{mb:.1f} MB, {records} records, {'pure path' if args.pure else 'default paths'}, {args.repeat} parses: "
          f"wall {med:.3f} s median ({lo:.3f}..{hi:.3f}) = {rate:.1f} MB/s median ({mb / hi:.1f}..{mb / lo:.1f}), "
          f"{records / med / 1e6:.2f} M records/s")
    clo, cmed, chi = _stats(cpus)
    print(f"CPU time {cmed:.3f} s median ({clo:.3f}..{chi:.3f}) = {mb / cmed:.1f} MB/s")
    print(f"required >= {REQUIRED_MB_S:.0f} MB/s: {rate / REQUIRED_MB_S:.2f}x "
          f"({'met' if rate >= REQUIRED_MB_S else 'MISSED'}); DESIGN target {TARGET_MB_S:.0f} MB/s: "
          f"{rate / TARGET_MB_S:.2f}x ({'met' if rate >= TARGET_MB_S else 'MISSED'})")
    print(f"peak memory (max RSS): {rss_text:.0f} MiB with the text generated, {rss_peak:.0f} MiB after the parses")


if __name__ == "__main__":
    main()
