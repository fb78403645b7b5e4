"""How fast ``observe ingest`` adds nccl-tests outputs to a store (issue 27: >= 1 M records a minute).

Generates ``--files`` nccl-tests text outputs on disk, each a 2-node x 8-GPU all_reduce_perf run in the v2.19 format
(version lines, 16 rank lines, NCCL INFO lines with the version, git version and plugins) over 8 B .. 8 GiB
(31 sizes x 2 placements = 62 records), on distinct node pairs and nights; ingests them into a new store, then
again (idempotency: nothing added), and prints records per second and per minute next to the 1 M a minute
yardstick (ratio >= 1.00: met), the store's size, and a one-series point query's time.

Then ``observe changes`` over ``--changes-records`` (10 M) records: a fleet's 90 nights written straight into a
store in its documented layout (two clusters x 5 ops x 4 node counts = 40 series, 31 sizes x 2 placements a run,
about 4,000 runs a series on rotating node pairs, one planted -10 % at 64 MiB..1 GiB with an NCCL upgrade), then
``find_changes`` over the whole store, its time printed next to the 10 s target (ratio <= 1.00: met).

    .venv/bin/python bench/observe_scale.py [--files 1600] [--changes-records 10000000]
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

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from collscope.observe import ingest, query  # noqa: E402
from collscope.observe.schema import RECORDS_SCHEMA, SOURCES_SCHEMA  # noqa: E402
from collscope.observe.series import changes_report  # noqa: E402

REQUIRED_PER_MIN = 1_000_000
CHANGES_TARGET_S = 10.0
OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast")
NODES = (2, 4, 8, 16)
NIGHTS = 90
FIRST_US = 1_756_692_000_000_000  # 2025-09-01T02:00Z


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


def _fleet_store(root: Path, records: int) -> tuple[int, int]:
    """A store of about ``records`` records written in its documented layout (records/date=/cluster=/part-*.parquet,
    one ledger batch); (records written, runs)."""
    sizes = np.array([8 << i for i in range(31)], dtype=np.int64)
    per_run = 2 * len(sizes)
    series = [(c, op, n) for c in ("alpha", "beta") for op in OPS for n in NODES]
    runs_per_night = max(records // (per_run * len(series) * NIGHTS), 1)
    rng = np.random.default_rng(7)
    batch = "bench0000000000a"
    written = runs = 0
    (root / "sources").mkdir(parents=True)
    size_col = np.tile(np.repeat(sizes, 2), runs_per_night * len(series))
    in_place = np.tile(np.array([False, True]), len(sizes) * runs_per_night * len(series))
    curve = 380.0 * sizes / (sizes + (32 << 20))
    for night in range(NIGHTS):
        for cluster in ("alpha", "beta"):
            rows = [(op, n, k) for (c, op, n) in series if c == cluster for k in range(runs_per_night)]
            count = len(rows) * per_run
            planted = cluster == "alpha" and night >= 60
            factor = np.ones((len(rows), len(sizes)))
            if planted:
                hit = np.array([op == "all_reduce" and n == 2 for op, n, _ in rows])
                factor[np.ix_(hit, (sizes >= 64 << 20) & (sizes <= 1 << 30))] = 0.9
            busbw = (curve * factor)[:, :, None] * np.exp(rng.normal(0, 0.02, (len(rows), len(sizes), 2)))
            busbw = busbw.reshape(-1)
            run_of = np.repeat(np.arange(len(rows)), per_run)
            times = FIRST_US + night * 86_400_000_000 + np.arange(len(rows)) * 1_000_000
            run_ids = pa.array([f"{cluster}-{night}-{i}" for i in range(len(rows))]).take(pa.array(run_of))
            hosts = pa.array([[f"{cluster}{(night * 31 + k) % 997:04d}", f"{cluster}{(night * 31 + k + 1) % 997:04d}"]
                              for _, _, k in rows]).take(pa.array(run_of))
            version = "2.29.2" if planted else "2.28.9"
            cols = {"run_time": pa.array(times[run_of], pa.timestamp("us", tz="UTC")),
                    "run_time_source": pa.repeat(pa.scalar("record"), count), "run_id": run_ids,
                    "kind": pa.repeat(pa.scalar("records"), count), "engine": pa.repeat(pa.scalar("nccl-tests"), count),
                    "backend": pa.repeat(pa.scalar("nccl"), count),
                    "op": pa.array([op for op, _, _ in rows]).take(pa.array(run_of)),
                    "size_bytes": pa.array(size_col[:count]), "dtype": pa.repeat(pa.scalar("float"), count),
                    "in_place": pa.array(in_place[:count]),
                    "nranks": pa.array(np.array([8 * n for _, n, _ in rows])[run_of]),
                    "nnodes": pa.array(np.array([n for _, n, _ in rows])[run_of]),
                    "time_us": pa.array(size_col[:count] / (busbw * 1e3)), "algbw_gbps": pa.array(busbw),
                    "busbw_gbps": pa.array(busbw), "ok": pa.repeat(pa.scalar(True), count),
                    "repeat": pa.repeat(pa.scalar(0), count), "settings_text": pa.repeat(pa.scalar("default"), count),
                    "hosts": hosts, "gpu": pa.repeat(pa.scalar("NVIDIA H200"), count),
                    "nccl_version": pa.repeat(pa.scalar(version), count),
                    "source": pa.repeat(pa.scalar(f"/fleet/{cluster}/night-{night}.jsonl"), count),
                    "batch_id": pa.repeat(pa.scalar(batch), count)}
            table = pa.Table.from_arrays([cols[f.name].cast(f.type) if f.name in cols else pa.nulls(count, f.type)
                                          for f in RECORDS_SCHEMA], schema=RECORDS_SCHEMA)
            day = (FIRST_US // 86_400_000_000 + night)
            directory = root / "records" / f"date={np.datetime64(day, 'D')}" / f"cluster={cluster}"
            directory.mkdir(parents=True)
            pq.write_table(table, directory / f"part-{batch}-0.parquet", compression="zstd")
            written += count
            runs += len(rows)
    ledger = pa.Table.from_pylist([{"source_sha256": "0" * 64, "source": "/fleet", "kind": "records",
                                    "records": written, "runs": runs, "batch_id": batch, "ingested_at": None,
                                    "notes": []}], schema=SOURCES_SCHEMA)
    pq.write_table(ledger, root / "sources" / f"batch-{batch}.parquet")
    return written, runs


def bench_changes(work: Path, records: int) -> None:
    t = time.perf_counter()
    written, runs = _fleet_store(work / "fleet", records)
    print(f"changes: fleet store of {written:,} records ({runs:,} runs, 40 series, {NIGHTS} nights) written in "
          f"{time.perf_counter() - t:.1f} s")
    cpu, t = time.process_time(), time.perf_counter()
    report = changes_report(work / "fleet", since=None)
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    found = "; ".join(f"{c.kind} {c.cluster} {c.op} {c.nnodes} nodes {c.size_min_bytes >> 20}M.."
                      f"{c.size_max_bytes >> 20}M {c.change_pct:+.1f}% {sorted(c.coincides_with)}"
                      for c in report.changes)
    print(f"observe changes over {written / 1e6:.1f} M records: {wall:.2f} s wall ({cpu:.2f} s CPU) vs target "
          f"{CHANGES_TARGET_S:.0f} s: ratio {wall / CHANGES_TARGET_S:.2f} ({report.series} series, "
          f"{report.runs:,} runs; {len(report.changes)} changes: {found or 'none'}; {len(report.outliers)} outliers)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1600, help="nccl-tests outputs to generate (62 records each)")
    parser.add_argument("--changes-records", type=int, default=10_000_000,
                        help="records of the fleet store observe changes reads (0: skip)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="observe-scale-"))
    try:
        if args.changes_records:
            bench_changes(work, args.changes_records)
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
