"""Issue 25 item 1, honest windows and steps: kernels queued before the profiler window (no launch in the file)
belong to no step and are no call; steps are periods (ProfilerStep#N start to the next one's start, the last to
its latest end) that never overlap and add up to the profiled window; every kernel of the window is listed with
its launch (for GPU idle and host-wait time)."""

from __future__ import annotations

import pytest

from collscope.traces.load import read_traces
from collscope.traces.match import match_calls
from tests.traces import trace_fixtures as fx


def _read(tmp_path, docs):
    for rank, doc in enumerate(docs):
        fx.write(tmp_path / f"rank{rank}.json", doc)
    return read_traces([tmp_path])


@pytest.mark.parametrize("with_seq", [False, True])
def test_kernels_queued_before_the_window_are_no_calls(tmp_path, with_seq):
    traces = _read(tmp_path, [fx.nccl_window_opened_late(r, with_seq=with_seq) for r in (0, 1)])
    t0, t1 = traces
    # the two NCCL kernels launched before the window are neither calls nor communication of step 5
    assert [(c.op, c.size_bytes, c.step) for c in t0.calls] == [("all_reduce", 4 << 20, 5)] * 2 + [
        ("all_reduce", 4 << 20, 6)] * 2
    assert [(c.op, c.step) for c in t0.calls] == [(c.op, c.step) for c in t1.calls]
    matched, warnings = match_calls(traces)
    assert len(matched) == 4 and all(m.consistent and len(m.calls) == 2 for m in matched)
    assert {m.transfer_us for m in matched} == {300.0}  # rank 1's duration: rank 0 waited 100 us
    assert not any("unmatched" in w for w in warnings)
    # counted apart, with one warning saying how many and that they were left out
    assert (t0.outside_window_kernels, t0.outside_window_comm_us) == (3, 1000.0)
    assert (t1.outside_window_kernels, t1.outside_window_comm_us) == (0, 0.0)
    said = [w for w in t0.warnings if "no launch event" in w]
    assert len(said) == 1 and said[0].startswith("3 GPU kernels (2 of them NCCL, 1000 us)")
    assert not any("no launch event" in w for w in t1.warnings)


def test_window_kernels_listed_with_their_launch(tmp_path):
    t0 = _read(tmp_path, [fx.nccl_window_opened_late(0, with_seq=True)])[0]
    starts = [k.start_us for k in t0.kernels]
    assert starts == sorted(starts) and len(t0.kernels) == 6  # 2 gemms + 4 all_reduce, none of the 3 queued
    assert all(k.launch_us is not None and k.launch_us < k.start_us for k in t0.kernels)
    assert [k.comm for k in t0.kernels] == [False, True, True, False, True, True]
    first = t0.kernels[1]  # step 5's first all_reduce: launched at +210, runs at +2200 for 400 us
    assert (first.launch_us, first.start_us, first.end_us) == (fx.STEP0_US + 210, fx.STEP0_US + 2200,
                                                               fx.STEP0_US + 2600)
    # compute spans are the window's compute kernels only (the queued gemm at +1100 is not among them)
    assert sorted(t0.compute_spans) == [(fx.STEP0_US + 1600, fx.STEP0_US + 2100),
                                        (fx.STEP0_US + 11600, fx.STEP0_US + 12100)]


def test_steps_are_periods_that_add_up_to_the_window(tmp_path):
    t = _read(tmp_path, [fx.nccl_cpu_ahead(0)])[0]
    # ProfilerStep spans last 800 us of each 1000 us period; the GPU runs 2.5 ms behind the CPU
    assert [(s.step, s.start_us) for s in t.steps] == [(1, fx.STEP0_US), (2, fx.STEP0_US + 1000),
                                                       (3, fx.STEP0_US + 2000)]
    assert [s.duration_us for s in t.steps] == [1000.0, 1000.0, 3100.0]  # the last: to its last kernel's end
    ends = [s.start_us + s.duration_us for s in t.steps]
    assert all(end == nxt.start_us for end, nxt in zip(ends, t.steps[1:], strict=False))  # never overlap
    last_kernel = max(k.end_us for k in t.kernels)
    assert sum(s.duration_us for s in t.steps) == last_kernel - fx.STEP0_US  # the whole profiled window
    # a call belongs to the step whose period holds its CPU launch, though its kernel runs 2.5 ms later
    assert [(c.step, c.start_us) for c in t.calls] == [(1, fx.STEP0_US + 2700), (2, fx.STEP0_US + 3700),
                                                       (3, fx.STEP0_US + 4700)]


def test_gloo_last_step_ends_with_its_last_worker_event(tmp_path):
    t = _read(tmp_path, [fx.gloo_trace(0)])[0]
    # ProfilerStep#3 lasts 3000 us; its all_gather's worker event ends at +1110 + 200: inside it
    assert [(s.step, s.duration_us) for s in t.steps] == [(3, 3000.0)]
    assert t.kernels == () and t.outside_window_kernels == 0


def test_no_runtime_events_keeps_every_kernel_and_says_so(tmp_path):
    doc = fx.nccl_window_opened_late(0, with_seq=True)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cuda_runtime"]
    t = _read(tmp_path, [doc])[0]
    assert t.outside_window_kernels == 0 and len(t.calls) == 6
    assert all(k.launch_us is None for k in t.kernels) and len(t.kernels) == 9
    assert any("no CUDA runtime events" in w for w in t.warnings)
