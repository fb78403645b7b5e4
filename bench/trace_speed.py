"""How fast ``collscope trace`` reads profiler traces: MB of JSON per second, against the target of 100 MB/s
(DESIGN.md "Performance targets"), and the peak memory of the reading process.

It writes a generated job (``--ranks`` Kineto traces in the real format: per step thousands of ``aten::`` ops with
``Input Dims``, CUDA launches, compute kernels, flow events and NCCL collectives with metadata on their kernels),
then reads and analyses them in a fresh process (so the peak RSS is the reader's own) and prints the figures.

    python bench/trace_speed.py [--ranks 16] [--steps 20] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

TARGET_MBPS = 100.0


def _events(rank: int, world: int, steps: int) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = []
    ext = corr = 0
    t = 1_000_000.0
    for step in range(steps):
        step_start = t
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                   "ts": t, "dur": 0, "args": {"External id": ext}})
        for i in range(3000):
            ext += 1
            corr += 1
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::linear" if i % 2 else "aten::add_", "pid": 1,
                       "tid": 1, "ts": t, "dur": 8.5, "args": {"External id": ext, "Record function id": 0,
                                                                "Input Dims": [[4096, 4096], [4096]],
                                                                "Input type": ["float", "float"], "Ev Idx": ext}})
            if i % 3 == 0:
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": t + 1, "dur": 4, "args": {"External id": ext, "cbid": 211, "correlation": corr}})
                ev.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "pid": 0,
                           "tid": 7, "ts": t + 20, "dur": 25.0,
                           "args": {"External id": ext, "queued": 0, "device": 0, "context": 1, "stream": 7,
                                    "correlation": corr, "registers per thread": 168, "shared memory": 213000,
                                    "grid": [132, 1, 1], "block": [384, 1, 1]}})
                ev.append({"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": t + 1, "cat": "ac2g", "name": "ac2g"})
                ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": t + 20, "cat": "ac2g", "name": "ac2g",
                           "bp": "e"})
            t += 10
            if i % 150 == 75:
                ext += 1
                corr += 1
                nelems = 1 << (20 + i % 4)
                meta = {"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
                        "Group size": world, "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]",
                        "Process Group Name": "0", "Process Group Description": "default_pg",
                        "Process Group Ranks": str(list(range(min(world, 30)))), "Rank": rank,
                        "Seq": step * 20 + i // 150}
                ev += [{"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": t,
                        "dur": 30, "args": {"External id": ext}},
                       {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": t + 1,
                        "dur": 25, "args": {"External id": ext + 1, **meta}},
                       {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 1, "tid": 1,
                        "ts": t + 5, "dur": 4, "args": {"External id": ext + 1, "cbid": 430, "correlation": corr}},
                       {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)",
                        "pid": 0, "tid": 20, "ts": t + 30, "dur": 300.0 + rank,
                        "args": {"External id": ext + 1, "stream": 20, "correlation": corr, **meta}}]
                ext += 1
        ev[len(ev) - 1]["dur"] = ev[len(ev) - 1].get("dur", 0)
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}x", "pid": 1, "tid": 1,
                   "ts": step_start, "dur": t - step_start, "args": {}})
    return ev


def generate(out: Path, ranks: int, steps: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    encoder = msgspec.json.Encoder()
    for rank in range(ranks):
        events = _events(rank, ranks, steps)
        for e in events:  # the ProfilerStep span gets its real length
            if e["name"].endswith("x"):
                e["name"] = e["name"][:-1]
        events = [e for e in events if not (e["name"].startswith("ProfilerStep#") and e["dur"] == 0)]
        doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
               "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": ranks, "nccl_version": "2.21.5",
                                   "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": ranks,
                                                  "ranks": list(range(ranks))}]},
               "traceEvents": events, "traceName": f"rank{rank}.pt.trace.json"}
        data = encoder.encode(doc)
        (out / f"rank{rank}.pt.trace.json").write_bytes(data)
        total += len(data)
    return total


def read(directory: str) -> None:
    """In a fresh process: read + analyse, print a JSON line of the figures."""
    from collscope.traces.load import read_traces, trace_files
    from collscope.traces.report import analyze_traces

    size = sum(entry.path.stat().st_size for entry in trace_files([directory])[0])
    t0 = time.perf_counter()
    traces = read_traces([directory])
    t1 = time.perf_counter()
    report = analyze_traces(traces)
    t2 = time.perf_counter()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"bytes": size, "read_s": t1 - t0, "analyze_s": t2 - t1, "peak_rss_mb": peak_mb,
                      "calls": len(report.collectives), "files": len(traces)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dir", type=Path, default=None, help="Where to write the traces (default: a temp dir).")
    parser.add_argument("--read", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        read(args.read)
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = args.dir or Path(tmp)
        t0 = time.perf_counter()
        total = generate(out, args.ranks, args.steps)
        print(f"generated {args.ranks} rank traces, {total / 1e6:.0f} MB of JSON, in {time.perf_counter() - t0:.1f} s")
        proc = subprocess.run([sys.executable, __file__, "--read", str(out)], capture_output=True, text=True,
                              check=True)
        fig = json.loads(proc.stdout.strip().splitlines()[-1])
    mbps = fig["bytes"] / 1e6 / fig["read_s"]
    both = fig["bytes"] / 1e6 / (fig["read_s"] + fig["analyze_s"])
    print(f"read {fig['files']} files ({fig['bytes'] / 1e6:.0f} MB) in {fig['read_s']:.2f} s: {mbps:.0f} MB/s "
          f"(target >= {TARGET_MBPS:.0f} MB/s: {mbps / TARGET_MBPS:.2f}x); with the analysis ({fig['calls']} calls) "
          f"{both:.0f} MB/s; peak RSS {fig['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
