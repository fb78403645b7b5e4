"""Small traces written in the real formats (Kineto Chrome JSON, Flight Recorder, NCCL Inspector), one builder
per variant; the event names and argument keys follow ``reference/traces.md`` and the corpus traces."""

from __future__ import annotations

import json
from typing import Any

STEP0_US = 1_000_000.0


def _step(n: int, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": tid, "ts": ts,
            "dur": dur, "args": {"External id": 1000 + n}}


def _meta(op: str, nelems: int, out: int | None = None, group: int = 2, seq: int | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"Collective name": op, "In msg nelems": nelems, "Out msg nelems": out or nelems,
                         "Group size": group, "dtype": "Float", "In split size": "[]", "Out split size": "[]",
                         "Process Group Name": "0", "Process Group Description": "default_pg",
                         "Process Group Ranks": "[" + ", ".join(str(r) for r in range(group)) + "]"}
    if seq is not None:
        m["Seq"] = seq
    return m


def _info(rank: int, world: int, backend: str = "nccl") -> dict[str, Any]:
    return {"backend": backend, "rank": rank, "world_size": world, "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": f"cuda:{backend}",
                           "pg_size": world, "ranks": list(range(world))}]}


def nccl_kernel_metadata(rank: int, *, world: int = 2, delay_us: float = 0.0, with_seq: bool = True,
                         kernel_meta: bool = True) -> dict[str, Any]:
    """Two steps; each: one 4 MiB all_reduce (1048576 floats) and one all_gather of 1000 floats per rank.
    Rank 1 arrives delay_us late at the all_reduce: rank 0's kernel (stream 20) waits for it and lasts
    400 + delay_us, rank 1's 400 us; a compute kernel on stream 7 covers the first 100 us of rank 0's. The
    all_gather runs 50 us uncovered."""
    events: list[dict[str, Any]] = []
    ext = 10
    for step in range(2):
        t0 = STEP0_US + step * 10_000
        events.append(_step(step + 1, t0, 5_000))
        for i, (op, nelems, out, name, kdur) in enumerate(
                (("allreduce", 1048576, None, "AllReduce_Sum_f32_RING_LL", 400.0 + (0 if rank else delay_us)),
                 ("allgather", 1000, 1000 * world, "AllGather_RING_LL", 50.0))):
            cpu = t0 + 100 + i * 1000
            ext += 3
            meta = _meta(op, nelems, out, world, seq=step * 2 + i + 1 if with_seq else None)
            c10d = "c10d::allreduce_" if op == "allreduce" else "c10d::_allgather_base_"
            events += [
                {"ph": "X", "cat": "cpu_op", "name": c10d, "pid": 1, "tid": 1, "ts": cpu, "dur": 30,
                 "args": {"External id": ext}},
                {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": cpu + 1,
                 "dur": 25, "args": {"External id": ext + 1, **meta}},
                {"ph": "X", "cat": "user_annotation",
                 "name": "nccl:" + ("all_reduce" if i == 0 else "_all_gather_base"), "pid": 1, "tid": 1,
                 "ts": cpu + 2, "dur": 20, "args": {"External id": ext + 2}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": cpu + 3,
                 "dur": 5, "args": {"External id": ext + 1, "correlation": 5000 + ext}},
                {"ph": "X", "cat": "kernel", "name": f"ncclDevKernel_{name}(ncclDevKernelArgsStorage<4096ul>)",
                 "pid": 0, "tid": 20, "ts": cpu + 200 + (delay_us if rank and i == 0 else 0), "dur": kdur,
                 "args": {"External id": ext + 1, "device": 0, "stream": 20, "correlation": 5000 + ext,
                          **(meta if kernel_meta else {})}},
            ]
            if i == 0:
                events.append({"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": 7,
                               "ts": cpu + 200, "dur": 100, "args": {"device": 0, "stream": 7,
                                                                     "correlation": 9000 + ext}})
    return {"schemaVersion": 1, "distributedInfo": {**_info(rank, world), "nccl_version": "2.21.5"},
            "traceEvents": events, "displayTimeUnit": "ms"}


def nccl_old_input_dims(rank: int, *, world: int = 2) -> dict[str, Any]:
    """Older PyTorch: kernels without metadata whose External id is their correlation; the size only in
    ``Input Dims`` of ``nccl:all_reduce``; the launch lies inside the CPU call's span."""
    events = [_step(7, STEP0_US, 5_000)]
    cpu = STEP0_US + 100
    events += [
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": cpu, "dur": 99,
         "args": {"External id": 38875, "Input Dims": [[], [], [], []], "Input type": ["TensorList", "", "Scalar"]}},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": cpu + 5, "dur": 90,
         "args": {"External id": 38876}},
        {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": cpu + 10,
         "dur": 70, "args": {"External id": 38877, "Input Dims": [[2500000]], "Input type": ["c10::Half"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": cpu + 50,
         "dur": 9, "args": {"External id": 777, "cbid": 211, "correlation": 777}},
        {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)", "pid": 0,
         "tid": 21, "ts": cpu + 300, "dur": 1000 + 10 * rank,
         "args": {"External id": 777, "device": 0, "stream": 21, "correlation": 777}},
    ]
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
            "traceEvents": events}


def gloo_trace(rank: int, *, record_shapes: bool = True) -> dict[str, Any]:
    """torch 2.13 gloo: c10d::* on the main thread, gloo:* on worker threads 50/51; one step with an
    all_reduce of 1000 floats (worker 50), a reduce_scatter of 512 floats in total (run as gloo:all_reduce on
    worker 51) and an all_gather of 100 floats per rank; aten::mm on the main thread covers the all_reduce's
    first 200 us."""
    def dims(d: Any) -> dict[str, Any]:
        return {"Input Dims": d, "Input type": ["float"]} if record_shapes else {}
    t0 = STEP0_US
    ev = [_step(3, t0, 3000),
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 300,
           "args": {"External id": 1}},
          {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": t0 + 100, "dur": 20,
           "args": {"External id": 2, **dims([[[1000]], [], [], []])}},
          {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 50, "ts": t0 + 110,
           "dur": 500, "args": {"External id": 3, **dims([[1000]])}},
          {"ph": "X", "cat": "cpu_op", "name": "c10d::_reduce_scatter_base_", "pid": 1, "tid": 1, "ts": t0 + 700,
           "dur": 20, "args": {"External id": 4, **dims([[256], [512], [], []])}},
          {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 51, "ts": t0 + 705,
           "dur": 300, "args": {"External id": 5, **dims([[512]])}},
          {"ph": "X", "cat": "cpu_op", "name": "c10d::allgather_", "pid": 1, "tid": 1, "ts": t0 + 1100,
           "dur": 20, "args": {"External id": 6, **dims([[[100], [100]], [[100]], [], []])}},
          {"ph": "X", "cat": "user_annotation", "name": "gloo:all_gather", "pid": 1, "tid": 50, "ts": t0 + 1110,
           "dur": 200 + 100 * rank, "args": {"External id": 7, **dims([[100]])}}]
    return {"schemaVersion": 1, "distributedInfo": _info(rank, 2, "gloo"), "traceEvents": ev}


def flight_recorder(rank: int) -> dict[str, Any]:
    """``_dump_fr_trace_json()`` of torch 2.13 with NCCL timing on: an all_reduce of 1000 floats and an
    all_gather of 10 floats per rank (output 2 x 10)."""
    def entry(seq: int, name: str, ins: list[list[int]], outs: list[list[int]], dur_ms: float) -> dict[str, Any]:
        return {"collective_seq_id": seq, "input_dtypes": ["Float"], "input_sizes": ins, "is_p2p": False,
                "op_id": seq, "output_dtypes": ["Float"], "output_sizes": outs, "p2p_seq_id": 0, "pg_id": 0,
                "process_group": ["0", "default_pg"], "profiling_name": name, "record_id": seq - 1,
                "retired": True, "state": "completed", "thread_id": "1", "thread_name": "python",
                "time_created_ns": 1_796_128_018_077_707_923 + seq * 1_000_000,
                "time_discovered_started_ns": 1_796_128_018_077_807_923 + seq * 1_000_000 + rank * 5000,
                "time_discovered_completed_ns": 0, "duration_ms": dur_ms + rank * 0.1, "timeout_ms": 1800000}
    return {"comm_lib_version": "2.21.5", "nccl_comm_state": {}, "version": "2.10",
            "pg_config": {"0": {"desc": "default_pg", "name": "0", "ranks": "[0, 1]"}},
            "pg_status": {}, "entries": [entry(1, "nccl:all_reduce", [[1000]], [[1000]], 0.5),
                                         entry(2, "nccl:all_gather", [[10]], [[2, 10]], 0.2)]}


def inspector_lines(rank: int, n: int = 3) -> str:
    """NCCL Inspector v4.0 JSON lines: n AllReduce of 16 MiB and one ReduceScatter of 1 MiB per rank."""
    lines = []
    for sn in range(1, n + 2):
        coll, size = ("AllReduce", 16 << 20) if sn <= n else ("ReduceScatter", 1 << 20)
        lines.append(json.dumps({
            "header": {"id": "0x7f8c496ae9f661", "rank": rank, "n_ranks": 2, "nnodes": 1},
            "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism":
                         "profiler_plugin", "dump_timestamp_us": 1748030377748202, "hostname": "h", "pid": 1},
            "coll_perf": {"coll": coll, "coll_sn": sn, "coll_msg_size_bytes": size,
                          "coll_exec_time_us": 1000 + 100 * rank, "coll_timing_source": "kernel_gpu",
                          "coll_algobw_gbs": 1.0, "coll_busbw_gbs": 1.0}}))
    return "\n".join(lines) + "\n"


def write(path: Any, doc: dict[str, Any]) -> Any:
    path.write_text(json.dumps(doc))
    return path
