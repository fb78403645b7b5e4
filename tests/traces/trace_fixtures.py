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
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                               "ts": cpu - 50, "dur": 5, "args": {"correlation": 9000 + ext}})
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


# Issue 25 (honest windows and steps; group-aware sizes and matching): one builder per defect's shape.

def _nccl_call(ext: int, cpu: float, meta: dict[str, Any] | None, c10d: str, kernel: str, gpu: float, dur: float,
               *, launch: bool = True, kernel_meta: bool = True, stream: int = 20) -> list[dict[str, Any]]:
    """One NCCL call as PyTorch >= 2.2 records it: c10d::* > record_param_comms > nccl:* on the CPU thread, the
    cudaLaunchKernel inside it (correlation 50000 + ext), the kernel on ``stream`` with the metadata copied on
    it. ``launch=False``: the launch happened before the profiler window (only the kernel is in the file)."""
    out: list[dict[str, Any]] = []
    if launch:
        out += [{"ph": "X", "cat": "cpu_op", "name": c10d, "pid": 1, "tid": 1, "ts": cpu, "dur": 40,
                 "args": {"External id": ext}},
                {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": cpu + 1,
                 "dur": 35, "args": {"External id": ext + 1, **(meta or {})}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 1, "tid": 1,
                 "ts": cpu + 10, "dur": 6, "args": {"External id": ext + 1, "cbid": 430, "correlation": 50000 + ext}}]
    out.append({"ph": "X", "cat": "kernel", "name": f"ncclDevKernel_{kernel}(ncclDevKernelArgsStorage<4096ul>)",
                "pid": 0, "tid": stream, "ts": gpu, "dur": dur,
                "args": {"External id": ext + 1, "device": 0, "stream": stream, "correlation": 50000 + ext,
                         **(meta if meta and kernel_meta else {})}})
    return out


def _gemm(corr: int, cpu: float, gpu: float, dur: float, *, launch: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if launch:
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": cpu,
                    "dur": 4, "args": {"External id": corr, "cbid": 211, "correlation": corr}})
    out.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "pid": 0,
                "tid": 7, "ts": gpu, "dur": dur, "args": {"External id": corr, "device": 0, "stream": 7,
                                                           "correlation": corr}})
    return out


def nccl_window_opened_late(rank: int, *, with_seq: bool = False) -> dict[str, Any]:
    """Two ranks, two steps (ProfilerStep#5 at STEP0_US, #6 10 ms later), each: a gemm then two all_reduce calls
    of 1 Mi floats (400 us, rank 1's 100 us shorter: rank 0 waits). Rank 0's profiler window opened while three
    kernels of the previous step were still queued: an all_reduce of 256 Ki floats (700 us), an all_gather and a
    gemm, in the file without their launches, running in the first 1.5 ms of the window."""
    ev: list[dict[str, Any]] = []
    if rank == 0:
        ev += _nccl_call(2, 0, _meta("allreduce", 262144, group=2, seq=1 if with_seq else None), "",
                         "AllReduce_Sum_f32_RING_LL", STEP0_US + 20, 700, launch=False)
        ev += _nccl_call(5, 0, _meta("allgather", 1000, 2000, group=2, seq=2 if with_seq else None), "",
                         "AllGather_RING_LL", STEP0_US + 800, 300, launch=False)
        ev += _gemm(7, 0, STEP0_US + 1100, 400, launch=False)
    ext = 100
    for i in range(2):
        t0 = STEP0_US + i * 10_000
        ev.append(_step(5 + i, t0, 6_000))
        ev += _gemm(900 + i, t0 + 50, t0 + 1600, 500)
        for j in range(2):
            seq = 3 + 2 * i + j if with_seq else None
            cpu = t0 + 200 + j * 2000
            ev += _nccl_call(ext, cpu, _meta("allreduce", 1 << 20, group=2, seq=seq), "c10d::allreduce_",
                             "AllReduce_Sum_f32_RING_LL", t0 + 2200 + j * 2000, 400 - 100 * rank)
            ev.append({"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 1, "tid": 1,
                       "ts": cpu + 2, "dur": 30, "args": {"External id": ext + 2}})
            ext += 3
    return {"schemaVersion": 1, "distributedInfo": {**_info(rank, 2), "nccl_version": "2.21.5"}, "traceEvents": ev}


def nccl_cpu_ahead(rank: int = 0) -> dict[str, Any]:
    """The CPU runs ahead of the GPU: three steps whose ProfilerStep spans last 800 us of each 1000 us period
    (STEP0_US, +1000, +2000); each step launches a gemm and an all_reduce of 1 Mi floats at +100/+200 us, which
    the GPU runs 2500 us later (gemm 300 us, then the all_reduce 400 us). The last step's kernels end at
    STEP0_US + 2000 + 2700 + 400 = +5100 us."""
    ev: list[dict[str, Any]] = []
    for i in range(3):
        t0 = STEP0_US + i * 1000
        ev.append(_step(1 + i, t0, 800))
        ev += _gemm(800 + i, t0 + 100, t0 + 2600, 300)
        ev += _nccl_call(10 + 3 * i, t0 + 200, _meta("allreduce", 1 << 20, group=2, seq=i + 1), "c10d::allreduce_",
                         "AllReduce_Sum_f32_RING_LL", t0 + 2700, 400)
    return {"schemaVersion": 1, "distributedInfo": {**_info(rank, 2), "nccl_version": "2.21.5"}, "traceEvents": ev}


def _sub_info(rank: int, world: int, group: list[int], *, declare_sub: bool = True) -> dict[str, Any]:
    pgs: list[dict[str, Any]] = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                                  "pg_size": world, "ranks": list(range(world))}]
    if declare_sub:
        pgs.append({"pg_name": "3", "pg_desc": "undefined", "backend_config": "cuda:nccl", "pg_size": len(group),
                    "ranks": group})
    return {"backend": "nccl", "rank": rank, "world_size": world, "pg_count": len(pgs), "pg_config": pgs,
            "nccl_version": "2.21.5"}


def nccl_subgroup_allgather(rank: int, *, world: int = 128, variant: str = "metadata") -> dict[str, Any]:
    """A 128-rank job where the even ranks form process group '3' (64 ranks); rank ``rank`` (even) runs one
    all_gather of 4 Mi bf16 elements per rank in it (nccl-tests size 64 x 8 MiB = 512 MiB) and one all_reduce of
    1 Mi floats in the world group.

    ``variant``: "metadata" (record_param_comms and kernel: Group size 64, Process Group Name '3', its ranks cut
    after 30); "config_only" (the call names group '3' and no size; pg_config declares it); "ranks_only" (no
    Group size, no pg_config entry for it, the ranks list cut after 30 plus Global rank start/stride);
    "input_dims" (older PyTorch: no metadata at all; c10d::allgather_ lists 64 output tensors)."""
    group = list(range(0, world, 2))
    info = _sub_info(rank, world, group, declare_sub=variant != "ranks_only")
    ag: dict[str, Any] = {"Collective name": "allgather", "In msg nelems": 4 << 20, "Out msg nelems": 64 * (4 << 20),
                          "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]",
                          "Process Group Name": "3", "Process Group Description": "undefined", "Seq": 1}
    if variant == "metadata":
        ag |= {"Group size": 64, "Process Group Ranks": "[" + ", ".join(map(str, group[:30])) + ", ...]"}
    elif variant == "ranks_only":
        ag |= {"Process Group Ranks": "[" + ", ".join(map(str, group[:30])) + ", ...]",
               "Global rank start": 0, "Global rank stride": 2}
    ev: list[dict[str, Any]] = [_step(1, STEP0_US, 5000)]
    if variant == "input_dims":
        ev += [{"ph": "X", "cat": "cpu_op", "name": "c10d::allgather_", "pid": 1, "tid": 1, "ts": STEP0_US + 100,
                "dur": 40, "args": {"External id": 11, "Input Dims": [[[4 << 20]] * 64, [[4 << 20]], [], []],
                                    "Input type": ["GenericList", "TensorList", "", "Int"]}},
               {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": STEP0_US + 101,
                "dur": 35, "args": {"External id": 12}},
               {"ph": "X", "cat": "user_annotation", "name": "nccl:all_gather", "pid": 1, "tid": 1,
                "ts": STEP0_US + 102, "dur": 30, "args": {"External id": 13, "Input Dims": [[4 << 20]],
                                                          "Input type": ["c10::BFloat16"]}},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                "ts": STEP0_US + 110, "dur": 6, "args": {"External id": 12, "cbid": 211, "correlation": 5011}},
               {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage)",
                "pid": 0, "tid": 20, "ts": STEP0_US + 300, "dur": 2000,
                "args": {"External id": 12, "device": 0, "stream": 20, "correlation": 5011}}]
    else:
        ev += _nccl_call(10, STEP0_US + 100, ag, "c10d::_allgather_base_", "AllGather_RING_LL", STEP0_US + 300,
                         2000)
    world_meta = _meta("allreduce", 1 << 20, group=world, seq=1)
    world_meta["Process Group Ranks"] = "[" + ", ".join(map(str, range(30))) + ", ...]"
    ev += _nccl_call(20, STEP0_US + 2500, world_meta, "c10d::allreduce_", "AllReduce_Sum_f32_RING_LL",
                     STEP0_US + 2600, 500, stream=21)
    return {"schemaVersion": 1, "distributedInfo": info, "traceEvents": ev}


def nccl_sendrecv_under_allreduce(rank: int, *, link: str = "launch") -> dict[str, Any]:
    """A trace whose only NCCL kernels are SendRecv kernels while the CPU side records two all_reduce calls of 1 Mi
    floats and one all_gather: the kernels' ids match no CPU op of theirs. ``link``: "launch" (their launch lies
    inside the all_reduce's CPU span, the kernels carry no External id of a CPU op); "external_id" (older PyTorch
    copies the correlation into the kernel's External id, which here collides with the all_reduce's
    record_param_comms id)."""
    ev: list[dict[str, Any]] = [_step(1, STEP0_US, 9000)]
    for i, (op, c10d, out) in enumerate((("allreduce", "c10d::allreduce_", None),
                                          ("allgather", "c10d::_allgather_base_", 2 << 20),
                                          ("allreduce", "c10d::allreduce_", None))):
        cpu = STEP0_US + 100 + 3000 * i
        ext = 40 + 3 * i
        meta = _meta(op, 1 << 20, out, group=2)
        ev += [{"ph": "X", "cat": "cpu_op", "name": c10d, "pid": 1, "tid": 1, "ts": cpu, "dur": 60,
                "args": {"External id": ext}},
               {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": cpu + 1,
                "dur": 55, "args": {"External id": ext + 1, **meta}}]
        corr = ext + 1 if link == "external_id" else 7000 + i
        ev += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                "ts": cpu + 20, "dur": 6, "args": {"External id": corr, "cbid": 211, "correlation": corr}},
               {"ph": "X", "cat": "kernel", "name": "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)",
                "pid": 0, "tid": 21, "ts": cpu + 500, "dur": 800 + 50 * rank,
                "args": {"External id": corr if link == "external_id" else 0, "device": 0, "stream": 21,
                         "correlation": corr}}]
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
            "traceEvents": ev}


def nccl_alltoallv(rank: int, *, with_seq: bool = True) -> dict[str, Any]:
    """Two ranks, one step: an alltoall_base with uneven splits (rank 0 sends 100 + 300 rows of 1024 floats,
    rank 1 sends 500 + 700: In msg nelems 409600 and 1228800), recorded as 'all_to_allv' with its split
    sizes, then an all_reduce of 1 Mi floats."""
    splits = {0: ([100, 300], [100, 500]), 1: ([500, 700], [300, 700])}[rank]
    nelems_in, nelems_out = sum(splits[0]) * 1024, sum(splits[1]) * 1024
    meta = _meta("all_to_allv", nelems_in, nelems_out, group=2, seq=1 if with_seq else None)
    meta |= {"In split size": str(splits[0]), "Out split size": str(splits[1])}
    ev: list[dict[str, Any]] = [_step(1, STEP0_US, 9000)]
    ev += _nccl_call(10, STEP0_US + 100, meta, "c10d::alltoall_base_", "SendRecv", STEP0_US + 300,
                     900 + 200 * rank)
    ev += _nccl_call(20, STEP0_US + 3000, _meta("allreduce", 1 << 20, group=2, seq=2 if with_seq else None),
                     "c10d::allreduce_", "AllReduce_Sum_f32_RING_LL", STEP0_US + 3100, 400)
    return {"schemaVersion": 1, "distributedInfo": {**_info(rank, 2), "nccl_version": "2.21.5"}, "traceEvents": ev}


def nccl_missing_call(rank: int) -> dict[str, Any]:
    """Older PyTorch (no Seq): two ranks, two steps. Step 1: rank 0 runs three all_reduce of 1 Mi floats and an
    all_gather; rank 1's trace lacks the first all_reduce (three calls). Step 2: both run the same two calls."""
    ev: list[dict[str, Any]] = []
    ext = 10
    plan = {1: [("allreduce", 1 << 20)] * 3 + [("allgather", 1000)], 2: [("allreduce", 1 << 20), ("allgather", 1000)]}
    for step, calls in plan.items():
        t0 = STEP0_US + (step - 1) * 20_000
        ev.append(_step(step, t0, 15_000))
        for j, (op, n) in enumerate(calls):
            if step == 1 and j == 0 and rank == 1:
                continue
            cpu = t0 + 100 + 3000 * j
            ag = op == "allgather"
            ev += _nccl_call(ext, cpu, _meta(op, n, 2 * n if ag else None, group=2),
                             "c10d::_allgather_base_" if ag else "c10d::allreduce_",
                             "AllGather_RING_LL" if ag else "AllReduce_Sum_f32_RING_LL", cpu + 500, 400 + 10 * j)
            ext += 3
    return {"schemaVersion": 1, "distributedInfo": {**_info(rank, 2), "nccl_version": "2.21.5"}, "traceEvents": ev}


def nccl_one_rank(*, world: int = 1) -> dict[str, Any]:
    """A 1-rank job (world_size 1, NCCL): each step broadcasts 424 bytes and all-reduces 2 Mi floats in the
    group of 1 (record_param_comms Group size 1, Process Group Ranks '[0]', the older 'Process Group ID' key).
    NCCL launches no kernel for a group of 1: the file holds only the gemms the CPU launched."""
    ev: list[dict[str, Any]] = []
    ext = 10
    for step in range(2):
        t0 = STEP0_US + step * 10_000
        ev.append(_step(101 + step, t0, 9_000))
        ev += _gemm(600 + step, t0 + 20, t0 + 300, 2000)
        for j, (op, nelems, dtype) in enumerate((("broadcast", 424, "Byte"), ("allreduce", 2 << 20, "Float"))):
            cpu = t0 + 100 + 1000 * j
            meta = {"Collective name": op, "dtype": dtype, "In msg nelems": nelems, "Out msg nelems": nelems,
                    "Group size": 1, "Process Group Ranks": "[0]", "Global rank start": 0,
                    "Global rank stride": 1, "Process Group ID": 0}
            ev += [{"ph": "X", "cat": "cpu_op", "name": f"c10d::{op}_", "pid": 1, "tid": 1, "ts": cpu, "dur": 30,
                    "args": {"External id": ext}},
                   {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": cpu + 1,
                    "dur": 25, "args": {"External id": ext + 1, **meta}},
                   {"ph": "X", "cat": "user_annotation", "name": f"nccl:{op.replace('allreduce', 'all_reduce')}",
                    "pid": 1, "tid": 1, "ts": cpu + 2, "dur": 20, "args": {"External id": ext + 2}}]
            ext += 3
    info = {"backend": "nccl", "rank": 0, "world_size": world, "pg_count": 1,
            "pg_config": [{"pg_name": "0", "uid": 0, "backend_config": "cuda:nccl", "pg_size": 1, "ranks": [0]}],
            "nccl_version": "2.17.1"}
    return {"schemaVersion": 1, "distributedInfo": info, "traceEvents": ev}
