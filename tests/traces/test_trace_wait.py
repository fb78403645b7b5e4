"""Where the time went (issue 25 item 3): per call wait vs transfer and their exposed / hidden parts; per step and
rank the period's communication, transfer, wait, exposed communication, compute, GPU idle and host wait; calls
in groups of 1 apart; kernels outside the window counted apart; the ``trace --json`` keys."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.cli import main
from collscope.traces.exposure import RankSpans
from collscope.traces.idle import GpuTimeline
from collscope.traces.load import read_traces
from collscope.traces.record import KernelSpan
from collscope.traces.render import render_text
from collscope.traces.report import analyze_traces
from collscope.traces.steps import covered_us, merge
from tests.traces import trace_fixtures as fx
from tests.traces.rank_traces import call, rank_trace


def _two_ranks():
    """One 10 ms step. Rank 1 computes 150 us longer (until 2250) and starts the all_reduce 250 us after rank 0;
    both end at 2650. A compute kernel of rank 0 covers the first 100 us of its wait. Between 2650 and 6000 the
    GPUs are idle; the next kernel is launched at 5000: 2350 us of that gap is host wait."""
    def kernels(compute_end: float, comm_start: float) -> list[KernelSpan]:
        return [KernelSpan(1000.0, compute_end, 900.0, False), KernelSpan(comm_start, 2650.0, 950.0, True),
                KernelSpan(6000.0, 6500.0, 5000.0, False)]
    r0 = rank_trace(0, [call(0, 2000.0, 650.0, seq=1, group=2)], steps=[(1, 0.0, 10_000.0)], world=2,
                    compute=[(1000.0, 2100.0), (6000.0, 6500.0)], kernels=kernels(2100.0, 2000.0))
    r1 = rank_trace(1, [call(1, 2250.0, 400.0, seq=1, group=2)], steps=[(1, 0.0, 10_000.0)], world=2,
                    compute=[(1000.0, 2250.0), (6000.0, 6500.0)], kernels=kernels(2250.0, 2250.0))
    return r0, r1


def test_each_call_splits_into_wait_and_transfer_with_their_exposed_parts():
    report = analyze_traces(_two_ranks())
    by_rank = {row["rank"]: row for row in report.collectives}
    r0, r1 = by_rank[0], by_rank[1]
    assert (r0["transfer_us"], r0["wait_us"], r0["late_rank"], r0["late_by_us"]) == (400.0, 250.0, 1, 250.0)
    assert (r0["exposed_wait_us"], r0["hidden_wait_us"]) == (150.0, 100.0)  # compute covers 2000..2100
    assert (r0["exposed_transfer_us"], r0["hidden_transfer_us"]) == (400.0, 0.0)
    assert (r1["wait_us"], r1["exposed_wait_us"], r1["exposed_transfer_us"]) == (0.0, 0.0, 400.0)
    assert r0["exposed_us"] == r0["exposed_wait_us"] + r0["exposed_transfer_us"]


def test_each_step_and_rank_says_where_its_period_went():
    report = analyze_traces(_two_ranks())
    s0, s1 = sorted(report.steps, key=lambda s: s.rank)
    assert s0.to_dict() == {"rank": 0, "step": 1, "duration_us": 10_000.0, "comm_us": 650.0,
                            "exposed_comm_us": 550.0, "transfer_us": 400.0, "wait_us": 250.0,
                            "exposed_transfer_us": 400.0, "exposed_wait_us": 150.0, "compute_us": 1600.0,
                            "gpu_idle_us": 7850.0, "host_wait_us": 900.0 + 2350.0 + 3500.0, "unsplit_calls": 0}
    assert (s1.comm_us, s1.transfer_us, s1.wait_us, s1.compute_us, s1.gpu_idle_us) == \
        (400.0, 400.0, 0.0, 1750.0, 7850.0)


def test_a_call_across_two_periods_counts_in_each_for_its_part():
    steps = [(1, 0.0, 5000.0), (2, 5000.0, 5000.0)]
    r0 = rank_trace(0, [call(0, 4000.0, 2000.0, seq=1, group=2)], steps=steps, world=2)
    r1 = rank_trace(1, [call(1, 4500.0, 1500.0, seq=1, group=2)], steps=steps, world=2)
    report = analyze_traces([r0, r1])
    s = {(x.rank, x.step): x for x in report.steps}
    assert (s[0, 1].comm_us, s[0, 2].comm_us) == (1000.0, 1000.0)
    assert (s[0, 1].wait_us, s[0, 1].transfer_us) == (500.0, 500.0)  # the wait is the call's first 500 us
    assert (s[0, 2].wait_us, s[0, 2].transfer_us) == (0.0, 1000.0)
    assert all(x.exposed_comm_us <= x.comm_us <= x.duration_us for x in report.steps)


def test_what_a_trace_cannot_say_is_none_never_zero():
    cpu = rank_trace(0, [call(0, 100.0, 500.0, seq=1, group=2)], steps=[(1, 0.0, 1000.0)], device="cpu",
                     compute=[(0.0, 200.0)], world=2)
    gpu_without_kernels = rank_trace(0, [call(0, 100.0, 500.0, seq=1, group=2)], steps=[(1, 0.0, 1000.0)],
                                     compute=[(0.0, 200.0)], world=2)
    for trace in (cpu, gpu_without_kernels):
        [step] = analyze_traces([trace]).steps
        assert (step.gpu_idle_us, step.host_wait_us) == (None, None)
        assert (step.transfer_us, step.wait_us, step.unsplit_calls) == (None, None, 1)  # one rank: no split
        assert (step.comm_us, step.exposed_comm_us, step.compute_us) == (500.0, 400.0, 200.0)
    [row] = analyze_traces([cpu]).collectives
    assert (row["wait_us"], row["late_rank"], row["late_by_us"]) == (None, None, None)


def test_groups_of_one_rank_are_no_communication():
    solo = [call(0, 100.0 * i, 50.0, seq=i, op="broadcast", group=1) for i in (1, 2)]
    real = call(0, 500.0, 80.0, seq=3, group=2)
    report = analyze_traces([rank_trace(0, [*solo, real], steps=[(1, 0.0, 1000.0)], world=2)])
    assert report.no_communication == {"calls": 2, "ops": {"broadcast": 2}}
    assert [r["op"] for r in report.collectives] == ["all_reduce"]
    assert [r.op for r in report.summary] == ["all_reduce"]
    assert report.steps[0].comm_us == 80.0
    assert "no communication: 2 calls in groups of 1 rank (broadcast x2)" in render_text(report)


def test_kernels_outside_the_window_are_counted_apart():
    traces = [rank_trace(r, [call(r, 100.0, 50.0, seq=1, group=2)], world=2, outside=(3 - r, 100.0 - 20 * r))
              for r in (0, 1)]
    report = analyze_traces(traces)
    assert report.outside_window == {"kernels": 5, "comm_us": 180.0}
    assert "outside the profiled window: 5 kernels launched before it opened (180 us of communication)" in \
        render_text(report)


def test_trace_json_carries_the_new_fields(tmp_path):
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", fx.nccl_kernel_metadata(r, delay_us=250))
    res = CliRunner().invoke(main, ["trace", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    ar0 = [c for c in doc["collectives"] if c["op"] == "all_reduce" and c["rank"] == 0]
    assert [(c["group_size"], c["group_ranks"], c["wait_us"], c["late_rank"], c["late_by_us"]) for c in ar0] == \
        [(2, [0, 1], 250.0, 1, 250.0)] * 2
    assert set(doc["steps"][0]) >= {"duration_us", "comm_us", "transfer_us", "wait_us", "exposed_comm_us",
                                    "compute_us", "gpu_idle_us", "host_wait_us"}
    assert [(r["rank"], r["last_count"], r["matched_calls"], r["others_waited_us"]) for r in doc["late_ranks"]] \
        == [(1, 2, 4, 500.0), (0, 0, 4, 0.0)]
    assert set(doc["what_if"]) >= {"network_us_per_step", "waiting_us_per_step"}
    assert doc["what_if"]["waiting_us_per_step"] == pytest.approx(150.0)  # 250 waited, 100 of it under compute
    assert doc["outside_window"] == {"kernels": 0, "comm_us": 0.0}
    assert doc["verdict"].startswith("communication costs ")


def test_a_job_of_one_rank_is_no_communication_in_the_cli(tmp_path):
    doc = fx.nccl_kernel_metadata(0, world=1)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "kernel" or "nccl" not in e["name"]]
    fx.write(tmp_path / "rank0.json", doc)  # NCCL launches no kernel for a group of 1: only the CPU calls remain
    res = CliRunner().invoke(main, ["trace", str(tmp_path / "rank0.json")])
    assert res.exit_code == 0, res.output
    assert "groups of 1 rank" in res.output and "busbw" not in res.output


_kernel = st.tuples(st.integers(0, 900), st.integers(1, 80), st.integers(0, 120)).map(
    lambda t: KernelSpan(float(t[0]), float(t[0] + t[1]), float(t[0] - t[2]), False))


@settings(max_examples=150, deadline=None)
@given(kernels=st.lists(_kernel, min_size=1, max_size=25), lo=st.integers(-50, 1000), width=st.integers(0, 1100))
def test_idle_and_host_wait_match_a_microsecond_by_microsecond_count(kernels, lo, width):
    """idle: no kernel runs at t; host wait: idle, and no kernel that starts later was launched by t (after the
    last kernel nothing is queued)."""
    timeline = GpuTimeline(kernels)
    idle = host = 0
    for t in range(lo, lo + width):
        mid = t + 0.5
        if any(k.start_us <= mid < k.end_us for k in kernels):
            continue
        idle += 1
        later = [k for k in kernels if k.start_us > mid]
        if not any((k.launch_us or 0.0) <= mid for k in later):
            host += 1
    got = timeline.idle_in(float(lo), float(lo + width))
    assert got[0] == pytest.approx(idle) and got[1] == pytest.approx(host)


@settings(max_examples=200, deadline=None)
@given(spans=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 100)), max_size=30),
       lo=st.integers(-50, 1100), width=st.integers(-5, 1200))
def test_the_prefix_sum_coverage_equals_the_interval_walk(spans, lo, width):
    compute = tuple((float(a), float(a + d)) for a, d in spans)
    rank = RankSpans.of(rank_trace(0, [], compute=compute))
    merged = merge(compute)
    expected = covered_us(lo, lo + width, merged, [a for a, _ in merged]) if width > 0 else 0.0
    assert rank.covered(float(lo), float(lo + width)) == pytest.approx(expected)
    assert rank.exposed(float(lo), float(lo + width)) == pytest.approx(max(width, 0) - expected)


def test_an_uneven_alltoall_is_one_row_with_busbw_from_the_total_bytes(tmp_path):
    """alltoallv: rank 0 sends 400 x 4 KiB, rank 1 1200 x 4 KiB; each keeps its own size, the busbw and the
    summary row take the matched size (their mean, nccl-tests' size when even); rank 0 came last (900 us)."""
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", fx.nccl_alltoallv(r))
    report = analyze_traces(read_traces([tmp_path]))
    a2a = [c for c in report.collectives if c["op"] == "alltoall"]
    assert [(c["size_bytes"], c["matched_size_bytes"], c["wait_us"], c["late_rank"]) for c in a2a] == \
        [(400 * 4096, 800 * 4096, 0.0, 0), (1200 * 4096, 800 * 4096, 200.0, 0)]
    [row] = [r for r in report.summary if r.op == "alltoall"]
    assert (row.size_bytes, row.calls, row.wait_us) == (800 * 4096, 2, 200.0)
    assert row.busbw_gbps == pytest.approx(800 * 4096 / 900e-6 / 1e9 * 0.5)  # (n-1)/n on 2 ranks


def test_gpu_work_counts_in_the_period_it_ran_in_when_the_cpu_runs_ahead(tmp_path):
    """The CPU issues three steps' calls 2.5 ms before the GPU runs them: all GPU work lands in the last period
    (which lasts until the last kernel ends); the earlier periods hold no communication (0.0, a float)."""
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", fx.nccl_cpu_ahead(r))
    report = analyze_traces(read_traces([tmp_path]))
    rank0 = sorted((s for s in report.steps if s.rank == 0), key=lambda s: s.step)
    assert [(s.duration_us, s.comm_us, s.transfer_us) for s in rank0] == \
        [(1000.0, 0.0, 0.0), (1000.0, 0.0, 0.0), (3100.0, 1200.0, 1200.0)]
    assert all(isinstance(s.to_dict()["comm_us"], float) for s in rank0)
    assert sum(s.duration_us for s in rank0) == 5100.0  # the periods add up to the window


def test_calls_that_overlap_on_a_rank_count_once_in_transfer_and_wait():
    """Two process groups in flight at once on rank 0 (DDP's concurrent buckets): per step, the time waiting and the
    time transferring are unions, so transfer + wait never exceeds the communication time (H3's 150 ms run had
    transfer 25.7 ms against 19.3 ms of communication when each call was summed)."""
    def job(rank, late_us):
        a = call(rank, 1000.0, 600.0 - late_us, seq=1, group=2)
        b = call(rank, 1100.0, 600.0 - late_us, seq=2, group=2)
        b = type(b)(**{**b.to_dict(), "process_group": "1", "group_ranks": (0, 1)})
        return rank_trace(rank, [a, b], steps=[(1, 0.0, 5000.0)], world=2)
    report = analyze_traces([job(0, 0.0), job(1, 300.0)])
    s0 = next(s for s in report.steps if s.rank == 0)
    assert s0.comm_us == 700.0  # 1000..1700
    assert s0.wait_us == 400.0  # waiting 1000..1300 and 1100..1400: union 1000..1400
    assert s0.transfer_us == 300.0  # transferring 1300..1600 and 1400..1700, less the waiting: 1400..1700
    assert s0.transfer_us + s0.wait_us <= s0.comm_us
