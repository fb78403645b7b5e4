"""How fast ``observe ingest`` adds nccl-tests outputs to a store (issue 27: >= 1 M records a minute).

Generates ``--files`` nccl-tests text outputs on disk, each a 2-node x 8-GPU all_reduce_perf run in the v2.19 format
(version lines, 16 rank lines, NCCL INFO lines with the version, git version and plugins) over 8 B .. 8 GiB
(31 sizes x 2 placements = 62 records), on distinct node pairs and nights; ingests them into a new store, then
again (idempotency: nothing added), and prints records per second and per minute next to the 1 M a minute
yardstick (ratio >= 1.00: met), the store's size, and a one-series point query's time.

    .venv/bin/python bench/observe_scale.py [--files 1600]

Not measured here yet: ``observe changes`` over 10 M records (that command does not exist yet).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collscope.observe import ingest, query  # noqa: E402

REQUIRED_PER_MIN = 1_000_000


def _output(k: int) -> str:
    a, b = f"gpu{2 * k:05d}", f"gpu{2 * k + 1:05d}"
    lines = ["# nccl-tests version 2.19.6 nccl-headers=22902 nccl-library=22902",
             "# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0 unalign: 0", "#", "# Using devices"]
    for r in range(16):
        lines.append(f"#  Rank {r:2d} Group  0 Pid {5000 + r:6d} on {a if r < 8 else b} device  {r % 8} "
                     f"[0000:{0x19 + r % 8:02x}:00] NVIDIA H200")
    lines += [f"{a}:5000:5000 [0] NCCL INFO NCCL version 2.29.2+cuda13.0",
              f"{a}:5000:5000 [0] NCCL INFO NCCL git version v2.29 v2.29.2-1-g5067397",
              f"{a}:5000:5010 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v11 (v11)", "#",
              "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
              "algbw   busbw  #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  "
              "(GB/s)"]
    total = 0.0
    for i in range(31):
        size = 8 << i
        t = 20.0 + size / 180e3 * (1.0 + (k % 7) * 0.001)
        alg = size / (t * 1e-6) / 1e9
        bus = alg * 2 * 15 / 16
        total += 2 * round(bus, 2)
        lines.append(f"{size:>12d}  {max(size // 4, 2):>12d}     float     sum      -1  {t:8.2f}  {alg:6.2f}  "
                     f"{bus:6.2f}       0  {t:8.2f}  {alg:6.2f}  {bus:6.2f}       0")
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {total / 62:.2f}", "#",
              "# Collective test concluded: all_reduce_perf", "#"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1600, help="nccl-tests outputs to generate (62 records each)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="observe-scale-"))
    try:
        inputs = work / "night"
        inputs.mkdir()
        for k in range(args.files):
            path = inputs / f"all_reduce-{k:05d}.txt"
            path.write_text(_output(k))
            stamp = 1764640800 + 86400 * (k % 60)
            os.utime(path, (stamp, stamp))
        store = work / "store"
        cpu = time.process_time()
        report = ingest([inputs], store, cluster="bench")
        cpu = time.process_time() - cpu
        per_min = report.records_per_s * 60
        print(f"ingest: {report.records} records of {report.sources} nccl-tests outputs in {report.elapsed_s:.2f} s "
              f"wall ({cpu:.2f} s CPU): {report.records_per_s:,.0f} records/s = {per_min / 1e6:.2f} M/min; "
              f"ratio to 1 M/min: {per_min / REQUIRED_PER_MIN:.2f}")
        again = ingest([inputs], store, cluster="bench")
        print(f"again: {again.records} records added, {again.skipped} inputs skipped in {again.elapsed_s:.2f} s")
        size = sum(p.stat().st_size for p in store.rglob("*.parquet"))
        print(f"store: {size / 1e6:.1f} MB of Parquet ({size / max(report.records, 1):.1f} bytes/record)")
        t = time.perf_counter()
        rows = query(store, "SELECT run_time, busbw_gbps FROM records WHERE cluster = 'bench' AND op = 'all_reduce' "
                            "AND size_bytes = 1073741824 AND NOT in_place AND hosts = ['gpu00000', 'gpu00001'] "
                            "ORDER BY run_time").num_rows
        print(f"point query (one series, {rows} rows): {time.perf_counter() - t:.3f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
