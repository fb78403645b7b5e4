"""Late ranks (issue 25 item 4): per matched call the rank that came last and by how much; the ``late_ranks``
table (last_count of matched_calls, others_waited_us) and the evidence for its first row: its GPU waiting on the
host (CPU-bound), its main thread outside profiled ops (CPU traces), or its compute longer (slow GPU)."""

from __future__ import annotations

from typing import Any

import pytest

from collscope.traces.load import read_traces
from collscope.traces.record import KernelSpan
from collscope.traces.render import render_text
from collscope.traces.report import analyze_traces
from tests.traces import trace_fixtures as fx
from tests.traces.rank_traces import call, rank_trace

STEPS, DELAY_US, TRANSFER_US, COMPUTE_US = 4, 5000.0, 300.0, 2000.0


def _kineto_rank(rank: int, *, late: int, world: int = 3) -> dict[str, Any]:
    """A Kineto trace (PyTorch >= 2.2 shape: collective metadata on the NCCL kernel) of one rank of a 3-rank job:
    per 20 ms step a compute kernel on stream 7 then a 16 MB all_reduce on stream 20 that waits for it. Rank
    ``late``'s compute kernel lasts DELAY_US longer, so it starts every all_reduce DELAY_US after the others,
    which sit in their kernels until it arrives; all end together."""
    events: list[dict[str, Any]] = []
    for step in range(STEPS):
        t0 = fx.STEP0_US + step * 20_000
        compute = COMPUTE_US + (DELAY_US if rank == late else 0.0)
        ext, corr = 100 + 10 * step, 7000 + 10 * step
        meta = {"Collective name": "allreduce", "In msg nelems": 4_000_000, "Out msg nelems": 4_000_000,
                "Group size": world, "dtype": "Float", "In split size": "[]", "Out split size": "[]",
                "Process Group Name": "0", "Process Group Description": "default_pg",
                "Process Group Ranks": "[0, 1, 2]", "Seq": step + 1}
        comm_start = t0 + 100 + compute
        comm_end = t0 + 100 + COMPUTE_US + DELAY_US + TRANSFER_US
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1, "ts": t0,
             "dur": 19_000, "args": {"External id": ext}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 20,
             "dur": 4, "args": {"External id": ext + 1, "correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8",
             "pid": 0, "tid": 7, "ts": t0 + 100, "dur": compute,
             "args": {"External id": ext + 1, "device": 0, "stream": 7, "correlation": corr}},
            {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": t0 + 40, "dur": 30,
             "args": {"External id": ext + 2}},
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": t0 + 41,
             "dur": 25, "args": {"External id": ext + 3, **meta}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 45,
             "dur": 5, "args": {"External id": ext + 3, "correlation": corr + 1}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage"
             "<4096ul>)", "pid": 0, "tid": 20, "ts": comm_start, "dur": comm_end - comm_start,
             "args": {"External id": ext + 3, "device": 0, "stream": 20, "correlation": corr + 1, **meta}},
        ]
    return {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms",
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world, "nccl_version": "2.21.5",
                                "pg_count": 1, "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                                                              "backend_config": "cuda:nccl", "pg_size": world,
                                                              "ranks": list(range(world))}]}}


def test_a_rank_planted_late_is_named_first_with_the_others_wait(tmp_path):
    for r in range(3):
        fx.write(tmp_path / f"rank{r}.json", _kineto_rank(r, late=2))
    report = analyze_traces(read_traces([tmp_path]))
    assert {(c["late_rank"], c["late_by_us"]) for c in report.collectives} == {(2, DELAY_US)}
    assert {c["transfer_us"] for c in report.collectives} == {TRANSFER_US}
    assert {c["rank"]: c["wait_us"] for c in report.collectives if c["step"] == 0} == {0: DELAY_US, 1: DELAY_US,
                                                                                       2: 0.0}
    first, *rest = report.late_ranks
    assert (first["rank"], first["last_count"], first["matched_calls"]) == (2, STEPS, STEPS)
    assert first["others_waited_us"] == pytest.approx(2 * DELAY_US * STEPS)
    assert [(r["rank"], r["last_count"], r["others_waited_us"]) for r in rest] == [(0, 0, 0.0), (1, 0, 0.0)]
    # its compute kernels run DELAY_US longer per step than the others': a slow GPU (or more work on it)
    assert first["cause"] == "compute" and "a slow GPU" in first["evidence"]
    assert "7 ms per step (the others: 2 ms median)" in first["evidence"]
    assert report.headline.startswith("communication costs ") and "waiting for rank 2" in report.headline
    text = render_text(report)
    assert "rank 2: last at 4 of 4 matched calls, the others waited 40 ms" in text


def test_ties_have_no_late_rank():
    calls = [call(r, 100.0, 400.0, seq=1) for r in range(3)]
    report = analyze_traces([rank_trace(r, [calls[r]]) for r in range(3)])
    assert {(c["late_rank"], c["late_by_us"], c["wait_us"]) for c in report.collectives} == {(None, 0.0, 0.0)}
    assert [(r["last_count"], r["others_waited_us"], r["cause"]) for r in report.late_ranks] == [(0, 0.0, None)] * 3


def test_late_by_is_the_gap_to_the_next_latest_rank():
    # rank 2 arrives 1 ms after rank 1, which arrives 3 ms after rank 0; all end at 10 ms
    calls = [call(0, 0.0, 10_000.0, seq=1), call(1, 3000.0, 7000.0, seq=1), call(2, 4000.0, 6000.0, seq=1)]
    report = analyze_traces([rank_trace(r, [calls[r]]) for r in range(3)])
    assert {(c["late_rank"], c["late_by_us"]) for c in report.collectives} == {(2, 1000.0)}
    assert report.late_ranks[0]["others_waited_us"] == 4000.0 + 1000.0


def _gpu_host_late(rank: int, late: int) -> Any:
    """Each step: a 1 ms compute kernel, then an all_reduce. Rank ``late``'s host launches the all_reduce 5 ms
    after the compute ended (its GPU idles with nothing queued); the others' is queued long before."""
    calls, kernels, compute = [], [], []
    for step in range(3):
        t0 = step * 20_000.0
        start = t0 + 1000.0 + (DELAY_US if rank == late else 0.0)
        end = t0 + 1000.0 + DELAY_US + TRANSFER_US
        launch = start - 10.0 if rank == late else t0 + 5.0
        kernels += [KernelSpan(t0, t0 + 1000.0, t0 - 10.0, False), KernelSpan(start, end, launch, True)]
        compute.append((t0, t0 + 1000.0))
        calls.append(call(rank, start, end - start, seq=step + 1, step=step))
    return rank_trace(rank, calls, steps=[(s, s * 20_000.0, 20_000.0) for s in range(3)], compute=compute,
                      kernels=kernels)


def test_a_cpu_bound_rank_shows_its_gpu_waiting_on_the_host():
    report = analyze_traces([_gpu_host_late(r, late=1) for r in range(3)])
    first = report.late_ranks[0]
    assert (first["rank"], first["last_count"], first["others_waited_us"]) == (1, 3, 2 * 3 * DELAY_US)
    assert first["cause"] == "host" and "CPU-bound" in first["evidence"]
    assert ("its GPU sat idle waiting on the host for 15 ms since its previous call or step start before them "
            "(the others: 0 us median)") in first["evidence"]
    steps = {(s.rank, s.step): s for s in report.steps}
    # idle 21000..26000 and 26300..40000; launches at 25990 and (the next step's compute) at 39990
    assert (steps[1, 1].gpu_idle_us, steps[1, 1].host_wait_us) == (5000.0 + 13_700.0, 4990.0 + 13_690.0)
    assert (steps[0, 1].gpu_idle_us, steps[0, 1].host_wait_us) == (13_700.0, 13_690.0)  # in its kernel from 21000


def test_a_cpu_trace_rank_outside_profiled_ops_is_late_on_its_host():
    """gloo: every rank computes (aten ops) for 1 ms; rank 0 then sleeps 5 ms (no profiled op) before calling."""
    traces = []
    for rank in range(3):
        calls, compute = [], []
        for step in range(3):
            t0 = step * 20_000.0
            start = t0 + 1000.0 + (DELAY_US if rank == 0 else 0.0)
            calls.append(call(rank, start, t0 + 1000.0 + DELAY_US + TRANSFER_US - start, seq=step + 1, step=step))
            compute.append((t0, t0 + 1000.0))
        traces.append(rank_trace(rank, calls, steps=[(s, s * 20_000.0, 20_000.0) for s in range(3)],
                                 compute=compute, device="cpu"))
    report = analyze_traces(traces)
    first = report.late_ranks[0]
    assert (first["rank"], first["cause"]) == (0, "host")
    assert "its main thread ran no profiled op for 15 ms since its previous call or step start" in first["evidence"]
    assert {s.gpu_idle_us for s in report.steps} == {None}
    assert "GPU idle: n/a (no GPU kernel list: a CPU trace, or a format without kernels)" in render_text(report)


def test_the_html_report_has_the_verdict_the_step_table_and_the_late_ranks(tmp_path):
    from click.testing import CliRunner

    from collscope.cli import main

    for r in range(3):
        fx.write(tmp_path / f"rank{r}.json", _kineto_rank(r, late=2))
    res = CliRunner().invoke(main, ["trace", str(tmp_path), "--report", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "out" / "index.html").read_text()
    assert "<p class='verdict'><b>Verdict:</b> communication costs " in page and "waiting for rank 2" in page
    assert page.count("<tr class='step'>") == 3
    assert "<tr class='late'><td>2</td><td>4</td><td>4</td><td>40000</td></tr>" in page
    assert "Why rank 2 (compute)" in page
