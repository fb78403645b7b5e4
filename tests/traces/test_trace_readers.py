"""The readers on small traces written in each real format: exact ops, sizes (nccl-tests' convention), groups,
steps; cross-rank matching (transfer = minimum duration, skew = start spread) and exposed communication."""

from __future__ import annotations

import gzip
import json

import pytest

from collscope.errors import ParseError
from collscope.traces.load import read_traces
from collscope.traces.report import analyze_traces
from tests.traces import trace_fixtures as fx


def _calls(trace):
    return [(c.op, c.size_bytes, c.step, c.process_group, c.group_size) for c in trace.calls]


def test_nccl_metadata_on_kernels(tmp_path):
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", fx.nccl_kernel_metadata(r, delay_us=250))
    traces = read_traces([tmp_path])
    assert [t.rank for t in traces] == [0, 1]
    t0 = traces[0]
    assert t0.backend == "nccl" and t0.device == "gpu"
    assert _calls(t0) == [("all_reduce", 4194304, 1, "0", 2), ("all_gather", 8000, 1, "0", 2),
                          ("all_reduce", 4194304, 2, "0", 2), ("all_gather", 8000, 2, "0", 2)]
    assert {c.size_source for c in t0.calls} == {"kernel"} and [c.seq for c in t0.calls] == [1, 2, 3, 4]
    report = analyze_traces(traces)
    ar = [row for row in report.collectives if row["op"] == "all_reduce"]
    assert {row["transfer_us"] for row in ar} == {400.0}  # the late rank's duration, not the waiting one's
    assert {row["skew_us"] for row in ar} == {250.0}
    assert ar[0]["busbw_gbps"] == pytest.approx(4194304 / 400e-6 / 1e9 * 1.0)
    rank0 = [s for s in report.steps if s.rank == 0]
    assert [(s.step, s.comm_us, s.exposed_comm_us) for s in rank0] == [(1, 700.0, 600.0), (2, 700.0, 600.0)]
    rank1 = [s for s in report.steps if s.rank == 1]
    assert [(s.comm_us, s.exposed_comm_us) for s in rank1] == [(450.0, 450.0), (450.0, 450.0)]
    row = next(r for r in report.summary if r.op == "all_reduce")
    assert row.calls == 4 and row.busbw_gbps == pytest.approx(10.48576)
    assert row.exposed_us_per_step == pytest.approx((550 * 2 + 400 * 2) / 4)  # per step and rank
    assert report.workload() == {"workload": [{"op": "all_reduce", "size_bytes": 4194304, "calls": 1, "nranks": 2},
                                              {"op": "all_gather", "size_bytes": 8000, "calls": 1, "nranks": 2}]}


def test_nccl_metadata_only_on_cpu_ops_and_no_seq(tmp_path):
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", fx.nccl_kernel_metadata(r, kernel_meta=False, with_seq=False))
    traces = read_traces([tmp_path])
    assert _calls(traces[0])[:2] == [("all_reduce", 4194304, 1, "0", 2), ("all_gather", 8000, 1, "0", 2)]
    assert {c.size_source for c in traces[0].calls} == {"record_param_comms"}
    assert {c.seq for c in traces[0].calls} == {None}
    report = analyze_traces(traces)  # matched by order within group and step
    assert {row["transfer_us"] for row in report.collectives if row["op"] == "all_gather"} == {50.0}


def test_old_kernels_linked_by_correlation_sizes_from_input_dims(tmp_path):
    for r in (0, 1):
        fx.write(tmp_path / f"r{r}.json", fx.nccl_old_input_dims(r))
    traces = read_traces([tmp_path])
    [call] = traces[1].calls
    assert (call.op, call.size_bytes, call.dtype, call.step, call.size_source) == \
        ("all_reduce", 5_000_000, "float16", 7, "input_dims")
    report = analyze_traces(traces)
    assert {row["transfer_us"] for row in report.collectives} == {1000.0}


def test_gloo_pairs_caller_and_worker_events(tmp_path):
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", fx.gloo_trace(r))
    traces = read_traces([tmp_path])
    t = traces[0]
    assert (t.backend, t.device) == ("gloo", "cpu")
    assert _calls(t) == [("all_reduce", 4000, 3, "0", 2), ("reduce_scatter", 2048, 3, "0", 2),
                         ("all_gather", 800, 3, "0", 2)]
    assert [c.duration_us for c in t.calls] == [500, 300, 200]
    assert any("reduce_scatter as an all-reduce" in w for w in t.warnings)
    report = analyze_traces(traces)
    step = next(s for s in report.steps if s.rank == 0)
    assert step.comm_us == 1000 and step.exposed_comm_us == 1000 - 200  # aten::mm hides 200 us of the all_reduce
    assert step.exposed_comm_us <= step.comm_us <= step.duration_us


def test_gloo_without_record_shapes_says_sizes_are_absent(tmp_path):
    fx.write(tmp_path / "rank0.json", fx.gloo_trace(0, record_shapes=False))
    [t] = read_traces([tmp_path / "rank0.json"])
    assert [c.size_bytes for c in t.calls] == [None, None, None]
    assert any("record_shapes=True" in w for w in t.warnings)


def test_flight_recorder_dumps(tmp_path):
    for r in (0, 1):
        fx.write(tmp_path / f"nccl_trace_rank_{r}", fx.flight_recorder(r))
    traces = read_traces([tmp_path / "nccl_trace_rank_0", tmp_path / "nccl_trace_rank_1"])
    assert [(t.kind, t.rank) for t in traces] == [("flight_recorder", 0), ("flight_recorder", 1)]
    assert _calls(traces[1]) == [("all_reduce", 4000, None, "0", 2), ("all_gather", 80, None, "0", 2)]
    report = analyze_traces(traces)
    ar = [row for row in report.collectives if row["op"] == "all_reduce"]
    assert {row["transfer_us"] for row in ar} == {500.0}
    assert [row["skew_us"] for row in ar] == [pytest.approx(5.0, abs=0.5)] * 2


def test_inspector_jsonl(tmp_path):
    for r in (0, 1):
        (tmp_path / f"insp-{r}.log").write_text(fx.inspector_lines(r))
    traces = read_traces([tmp_path])
    assert [t.rank for t in traces] == [0, 1]
    assert _calls(traces[0])[-1] == ("reduce_scatter", 2 << 20, None, "0x7f8c496ae9f661", 2)
    report = analyze_traces(traces)
    row = next(r for r in report.summary if r.op == "all_reduce")
    assert row.busbw_gbps == pytest.approx((16 << 20) / 1000e-6 / 1e9 * 1.0)  # rank 0's 1000 us, not rank 1's
    assert row.calls_per_step == 3 and any("no ProfilerStep" in w for w in report.warnings)


def test_gzip_and_plain_give_the_same_calls(tmp_path):
    doc = fx.nccl_kernel_metadata(0)
    fx.write(tmp_path / "a_rank0.json", doc)
    (tmp_path / "b_rank0.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    [a] = read_traces([tmp_path / "a_rank0.json"])
    [b] = read_traces([tmp_path / "b_rank0.json.gz"])
    assert a.calls == b.calls


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_trace_is_a_parse_error_naming_the_file(tmp_path, cut):
    text = json.dumps(fx.nccl_kernel_metadata(0))
    path = tmp_path / "rank0.json"
    path.write_text(text[: int(len(text) * cut)])
    with pytest.raises(ParseError) as err:
        read_traces([path])
    assert str(path) in str(err.value) and "truncated" in str(err.value)


def test_truncated_gzip_is_a_parse_error(tmp_path):
    data = gzip.compress(json.dumps(fx.nccl_kernel_metadata(0)).encode())
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match="gzip"):
        read_traces([path])


def test_a_sibling_of_another_rank_count_is_named(tmp_path):
    fx.write(tmp_path / "rank0.json", fx.nccl_kernel_metadata(0, world=2))
    fx.write(tmp_path / "rank1.json", fx.nccl_kernel_metadata(1, world=2))
    fx.write(tmp_path / "rank2.json", fx.nccl_kernel_metadata(2, world=4))
    with pytest.raises(ParseError) as err:
        read_traces([tmp_path])
    assert "rank2.json" in str(err.value) and "world_size 2" in str(err.value)


def test_two_files_of_one_rank_are_refused(tmp_path):
    fx.write(tmp_path / "a_rank0.json", fx.nccl_kernel_metadata(0))
    fx.write(tmp_path / "b_rank0.json", fx.nccl_kernel_metadata(0))
    with pytest.raises(ParseError, match="one file per rank"):
        read_traces([tmp_path])


@pytest.mark.parametrize("text", ["hello", "{\"a\": 1}", "[1, 2]", ""])
def test_not_a_trace(tmp_path, text):
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(ParseError) as err:
        read_traces([path])
    assert str(path) in str(err.value)


@pytest.mark.parametrize(("name", "dims", "expected"), [
    ("c10d::_allgather_base_", [[6000], [3000], [], []], 6000 * 4),  # output (gathered), input
    ("c10d::allgather_", [[[3000], [3000]], [[3000]], [], []], 6000 * 4),  # output list, input list
    ("gloo:all_gather", [[3000]], 6000 * 4),  # the worker lists the input only
])
def test_all_gather_size_from_input_dims_is_the_gathered_total(tmp_path, name, dims, expected):
    doc = fx.gloo_trace(0)
    doc["traceEvents"] = [fx._step(1, fx.STEP0_US, 1000),
                          {"ph": "X", "cat": "user_annotation" if name.startswith("gloo") else "cpu_op",
                           "name": name, "pid": 1, "tid": 50, "ts": fx.STEP0_US + 10, "dur": 100,
                           "args": {"Input Dims": dims, "Input type": ["float"]}}]
    fx.write(tmp_path / "rank0.json", doc)
    [t] = read_traces([tmp_path])
    assert [(c.op, c.size_bytes) for c in t.calls] == [("all_gather", expected)]


def test_gloo_workers_starting_out_of_issue_order_still_pair_and_match(tmp_path):
    """Two buckets issued A then B; on rank 1 the second worker thread starts B before the first starts A."""
    def doc(rank: int) -> dict:
        t0 = fx.STEP0_US
        starts = {"A": t0 + 110, "B": t0 + 160} if rank == 0 else {"A": t0 + 170, "B": t0 + 155}
        ev = [fx._step(1, t0, 2000)]
        for name, elems, issued, tid in (("A", 1000, t0 + 100, 50), ("B", 2000, t0 + 150, 51)):
            ev += [{"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": issued,
                    "dur": 5, "args": {"Input Dims": [[[elems]], [], []], "Input type": ["TensorList", "", ""]}},
                   {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": tid,
                    "ts": starts[name], "dur": 100 + elems / 100 + rank,
                    "args": {"Input Dims": [[elems]], "Input type": ["float"]}}]
        return {"distributedInfo": fx._info(rank, 2, "gloo"), "traceEvents": ev}
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", doc(r))
    traces = read_traces([tmp_path])
    for t in traces:
        assert [c.size_bytes for c in t.calls] == [4000, 8000]  # issue order, each with its own worker's size
    report = analyze_traces(traces)
    assert sorted(row["transfer_us"] for row in report.collectives) == [110.0, 110.0, 120.0, 120.0]


def test_each_reader_keeps_the_nccl_release_its_file_names(tmp_path):
    """Kineto: ``distributedInfo.nccl_version`` (nccl backend only); Flight Recorder: ``comm_lib_version`` (torch
    2.13), ``nccl_version`` before it; a gloo job names none."""
    fx.write(tmp_path / "rank0.json", fx.nccl_kernel_metadata(0))
    fx.write(tmp_path / "gloo0.json", fx.gloo_trace(0))
    fr = fx.flight_recorder(0)
    fx.write(tmp_path / "nccl_trace_rank_0", fr)
    older = {("nccl_version" if k == "comm_lib_version" else k): v for k, v in fr.items()}
    older["comm_lib_version"] = None
    (tmp_path / "older").mkdir()
    fx.write(tmp_path / "older" / "nccl_trace_rank_0", older)
    (kineto,) = read_traces([str(tmp_path / "rank0.json")])
    (gloo,) = read_traces([str(tmp_path / "gloo0.json")])
    (flight,) = read_traces([str(tmp_path / "nccl_trace_rank_0")])
    (old,) = read_traces([str(tmp_path / "older" / "nccl_trace_rank_0")])
    assert (kineto.nccl_version, gloo.nccl_version, flight.nccl_version, old.nccl_version) == (
        "2.21.5", None, "2.21.5", "2.21.5")
