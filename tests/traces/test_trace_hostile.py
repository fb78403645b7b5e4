"""Hostile input: whatever the bytes, the readers and the analysis raise ParseError or return a report; never
another exception (hypothesis over arbitrary bytes and over trace-shaped JSON with arbitrary values)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collscope.errors import ParseError
from collscope.traces.load import check_siblings, parse_trace_bytes
from collscope.traces.report import analyze_traces

NAMES = ["c10d::allreduce_", "record_param_comms", "nccl:all_reduce", "gloo:all_gather", "c10d::allgather_",
         "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "ncclKernel_Broadcast_RING_LL_Sum_int8_t(x)",
         "ProfilerStep#3", "ProfilerStep#x", "aten::mm", "cudaLaunchKernel", "c10d::_reduce_scatter_base_", "wait"]
CATS = ["cpu_op", "user_annotation", "kernel", "cuda_runtime", "gpu_user_annotation", None]
scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**7), st.floats(allow_nan=False, width=32),
                   st.text(max_size=6))
dims = st.recursive(st.integers(-2, 5000), lambda inner: st.lists(inner, max_size=3), max_leaves=8)
args = st.fixed_dictionaries({}, optional={
    "External id": st.integers(0, 5), "correlation": st.integers(0, 5), "stream": st.sampled_from([7, 20]),
    "Collective name": st.sampled_from(["allreduce", "allgather", "wait", "barrier", "_reduce_scatter_base", "zz"]),
    "In msg nelems": scalar, "Out msg nelems": scalar, "Group size": scalar, "dtype": scalar, "Seq": scalar,
    "Process Group Name": scalar, "Process Group ID": scalar, "Input Dims": dims,
    "Input type": st.lists(st.sampled_from(["float", "c10::Half", "TensorList", "", "Scalar"]), max_size=3)})
event = st.fixed_dictionaries({
    "ph": st.sampled_from(["X", "X", "X", "i", "s"]), "name": st.sampled_from(NAMES), "cat": st.sampled_from(CATS),
    "pid": st.sampled_from([0, 1, "Spans"]), "tid": st.sampled_from([1, 2, 20]),
    "ts": st.floats(0, 1e4, allow_nan=False), "dur": st.floats(0, 500, allow_nan=False), "args": args})
info = st.fixed_dictionaries({}, optional={
    "backend": st.sampled_from(["nccl", "gloo", 3]), "rank": scalar, "world_size": scalar,
    "pg_config": st.one_of(scalar, st.lists(st.fixed_dictionaries({"pg_name": scalar, "pg_size": scalar})))})


def _analyze(data: bytes, source: str = "t.json") -> None:
    try:
        traces = parse_trace_bytes(data, source, rank_hint=0)
        check_siblings(traces)
        analyze_traces(traces)
    except ParseError:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(event, max_size=25), info)
def test_trace_shaped_json_never_raises_anything_but_parse_error(events, dist):
    _analyze(json.dumps({"traceEvents": events, "distributedInfo": dist}).encode())


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data):
    _analyze(data)
    _analyze(b'{"traceEvents": [' + data)
    _analyze(b'{"entries": [' + data)
    _analyze(b'{"header": {"id": "0x1", "rank": 0, "n_ranks": 2}, "coll_perf": ' + data)
