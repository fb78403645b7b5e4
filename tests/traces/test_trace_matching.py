"""Issue 25 item 2, group-aware sizes and matching: a sub-group call sized by its own group; kernels that run
another op than the CPU call they link to; matching by (group, sequence number), else by position only when every
position agrees; uneven alltoall (alltoallv) matched; groups of 1 are no communication."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collscope.traces.load import read_traces
from collscope.traces.match import match_calls
from collscope.vocab.ops import busbw_factor
from tests.traces import trace_fixtures as fx


def _read(tmp_path, docs):
    for rank, doc in docs.items():
        fx.write(tmp_path / f"rank{rank}.json", doc)
    return read_traces([tmp_path])


@pytest.mark.parametrize("variant", ["metadata", "config_only", "ranks_only", "input_dims"])
def test_subgroup_call_sized_by_its_group_not_the_world(tmp_path, variant):
    t = _read(tmp_path, {4: fx.nccl_subgroup_allgather(4, variant=variant)})[0]
    assert t.world_size == 128
    ag, ar = t.calls
    assert (ag.op, ag.group_size, ag.size_bytes) == ("all_gather", 64, 64 * (4 << 20) * 2)  # 512 MiB, not 1 GiB
    assert ag.group_ranks in (tuple(range(0, 128, 2)), None)
    if variant != "input_dims":
        assert ag.process_group == "3" and ag.group_ranks == tuple(range(0, 128, 2))
    assert any("64" in e for e in ag.group_evidence)
    assert (ar.op, ar.group_size, ar.size_bytes) == ("all_reduce", 128, 4 << 20)
    # busbw factor of the group's size: (64-1)/64, not (128-1)/128
    assert busbw_factor(ag.op, ag.group_size) == pytest.approx(63 / 64)


@pytest.mark.parametrize("link", ["launch", "external_id"])
def test_kernels_that_run_another_op_are_not_given_the_cpu_calls_size(tmp_path, link):
    t0, t1 = _read(tmp_path, {r: fx.nccl_sendrecv_under_allreduce(r, link=link) for r in (0, 1)})
    # the SendRecv kernels are not all_reduce / all_gather calls of 4 MiB: their op is the kernel's, size unknown
    assert [(c.op, c.size_bytes, c.size_source) for c in t0.calls] == [("sendrecv", None, "none")] * 3
    said = [w for w in t0.warnings if "run another op than the CPU call" in w]
    assert len(said) == 1 and said[0].startswith("3 NCCL kernels")
    assert "2 sendrecv kernels under all_reduce" in said[0] and "1 sendrecv kernels under all_gather" in said[0]
    assert not any("record_shapes" in w for w in t0.warnings)  # not mistaken for an old trace without shapes
    assert all(c.seq is None for c in t0.calls)


def test_kernels_of_the_calls_op_raise_nothing(tmp_path):
    t0, _ = _read(tmp_path, {r: fx.nccl_alltoallv(r) for r in (0, 1)})  # alltoall runs as SendRecv kernels
    assert [c.op for c in t0.calls] == ["alltoall", "all_reduce"]
    assert not any("another op" in w for w in t0.warnings)


def test_alltoallv_uneven_sizes_match_with_per_rank_sizes_kept(tmp_path):
    traces = _read(tmp_path, {r: fx.nccl_alltoallv(r) for r in (0, 1)})
    assert [c.size_bytes for t in traces for c in t.calls if c.op == "alltoall"] == [400 * 4096, 1200 * 4096]
    matched, warnings = match_calls(traces)
    a2a = next(m for m in matched if m.calls[0].op == "alltoall")
    assert a2a.consistent and len(a2a.calls) == 2
    assert [c.size_bytes for c in a2a.calls] == [400 * 4096, 1200 * 4096]  # each rank keeps its own
    assert a2a.size_bytes == 800 * 4096  # total bytes over the ranks: nccl-tests' size when the splits are even
    assert a2a.transfer_us == 900.0 and a2a.skew_us == 0.0
    assert not any("differ in op or size" in w for w in warnings)


@pytest.mark.parametrize("with_seq", [True, False])
def test_alltoallv_without_sequence_numbers_matches_by_position(tmp_path, with_seq):
    traces = _read(tmp_path, {r: fx.nccl_alltoallv(r, with_seq=with_seq) for r in (0, 1)})
    matched, _ = match_calls(traces)
    assert len(matched) == 2 and all(m.consistent and len(m.calls) == 2 for m in matched)


def test_one_missing_call_leaves_its_step_unmatched_not_misaligned(tmp_path):
    traces = _read(tmp_path, {r: fx.nccl_missing_call(r) for r in (0, 1)})
    assert [len(t.calls) for t in traces] == [6, 5]
    matched, warnings = match_calls(traces)
    step1 = [m for m in matched if m.calls[0].step == 1]
    # no collective of step 1 pairs two ranks: by position rank 0's first all_reduce would pair rank 1's second
    assert len(step1) == 7 and all(len(m.calls) == 1 and not m.consistent for m in step1)
    assert all(m.transfer_us is None for m in step1)
    step2 = [m for m in matched if m.calls[0].step == 2]
    assert len(step2) == 2 and all(m.consistent and len(m.calls) == 2 for m in step2)
    said = [w for w in warnings if "left unmatched" in w]
    assert len(said) == 1 and said[0].startswith("7 calls of 1 (process group, step) sets left unmatched")


def test_one_rank_job_is_no_communication(tmp_path):
    t = _read(tmp_path, {0: fx.nccl_one_rank()})[0]
    assert {(c.op, c.group_size) for c in t.calls} == {("broadcast", 1), ("all_reduce", 1)}
    assert not any("no GPU kernels" in w for w in t.warnings)  # NCCL launches nothing for a group of 1
    assert t.device == "gpu"  # its gemms are in the file
    matched, warnings = match_calls([t])
    assert len(matched) == 4 and all(m.no_communication and m.transfer_us is None for m in matched)
    assert any(w.startswith("4 calls are in process groups of 1 rank: no communication") for w in warnings)


def test_group_of_one_inside_a_larger_job_is_never_matched(tmp_path):
    docs = {r: fx.nccl_kernel_metadata(r, with_seq=False) for r in (0, 1)}
    traces = _read(tmp_path, docs)
    traces = [replace(t, calls=tuple(replace(c, group_size=1) if c.op == "all_gather" else c for c in t.calls))
              for t in traces]
    matched, _ = match_calls(traces)
    gathers = [m for m in matched if m.calls[0].op == "all_gather"]
    assert len(gathers) == 4 and all(m.no_communication and len(m.calls) == 1 for m in gathers)
    assert [len(m.calls) for m in matched if m.calls[0].op == "all_reduce"] == [2, 2]
