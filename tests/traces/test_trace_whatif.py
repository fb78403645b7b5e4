"""What a faster collective would save (issue 25 item 5): per (op, size) and per step, at the sweep's or the
model's busbw counting only exposed transfer, and with no late rank (the exposed wait); the one-line verdict."""

from __future__ import annotations

import pytest

from collscope.traces.compare import BenchCurves, ModelFigure
from collscope.traces.render import render_text
from collscope.traces.report import analyze_traces
from tests.traces.rank_traces import call, rank_trace

SIZE = 4_000_000  # 400 us of transfer: algbw 10 GB/s, busbw 10 GB/s on 2 ranks


def _job():
    """2 steps of 10 ms; per step one all_reduce: rank 1 arrives 1 ms late, transfer 400 us; on rank 0 compute
    covers the last 200 us of the transfer, so 200 us of its transfer and all its 1 ms wait are exposed."""
    traces = []
    for rank in (0, 1):
        calls, compute = [], []
        for step in (1, 2):
            t0 = (step - 1) * 10_000.0
            start = t0 + 1000.0 + (1000.0 if rank else 0.0)
            end = t0 + 2400.0
            calls.append(call(rank, start, end - start, seq=step, size_bytes=SIZE, group=2, step=step))
            if rank == 0:
                compute.append((end - 200.0, end + 500.0))
        traces.append(rank_trace(rank, calls, steps=[(1, 0.0, 10_000.0), (2, 10_000.0, 10_000.0)],
                                 compute=compute, world=2))
    return traces


def _sweep(busbw_gbps: float) -> BenchCurves:
    return BenchCurves(curves={("all_reduce", 2): [(1_000_000, busbw_gbps), (16_000_000, busbw_gbps)]},
                       source="sweep/")


def test_a_faster_network_saves_the_exposed_transfer_only():
    report = analyze_traces(_job(), bench=_sweep(40.0))
    # at 40 GB/s the 400 us transfer takes 100 us: 300 us shorter; rank 0 exposes only 200 us of it, and the
    # ranks move in lock step, so a step shortens by the smaller saving
    assert report.what_if["network_us_per_step"] == pytest.approx(200.0)
    assert report.what_if["waiting_us_per_step"] == pytest.approx(1000.0)
    assert report.what_if["reference"] == "sweep"
    [row] = report.summary
    assert (row.network_us_per_step, row.waiting_us_per_step) == (pytest.approx(200.0), pytest.approx(1000.0))
    assert (row.exposed_transfer_us_per_step, row.exposed_wait_us_per_step) == (300.0, 500.0)  # per step and rank
    assert row.wait_us == 2000.0
    assert report.headline == ("communication costs 8% of the step; 3% is transfer, 5% waiting for rank 1; "
                               "a network at the sweep's busbw would save 200 us of 10 ms; "
                               "ranks arriving together would save 1 ms")
    assert render_text(report).startswith(f"verdict: {report.headline}\n")


def test_a_sweep_slower_than_the_job_saves_nothing():
    report = analyze_traces(_job(), bench=_sweep(5.0))
    assert report.what_if["network_us_per_step"] == 0.0


def test_the_model_is_the_reference_without_a_sweep():
    def model(op: str, nranks: int, nnodes: int, sizes: list[int]) -> dict[int, ModelFigure]:
        assert (op, nranks, nnodes) == ("all_reduce", 2, 1)
        return {s: ModelFigure(20.0) for s in sizes}
    report = analyze_traces(_job(), model=model, overrides={"nranks": 2, "nnodes": 1})
    assert report.what_if["reference"] == "model"
    assert report.what_if["network_us_per_step"] == pytest.approx(200.0)  # 400 -> 200 us, rank 0 exposes 200
    assert "a network at the model's busbw would save 200 us" in report.headline


def test_without_a_reference_the_network_saving_is_unknown():
    report = analyze_traces(_job())
    assert report.what_if["network_us_per_step"] is None
    assert report.what_if["calls_without_reference"] == 4
    assert "what a faster network would save is unknown" in report.headline
    assert report.what_if["waiting_us_per_step"] == pytest.approx(1000.0)


def test_one_rank_only_leaves_the_split_unknown():
    report = analyze_traces(_job()[:1], bench=_sweep(40.0))
    assert report.what_if["network_us_per_step"] is None and report.what_if["waiting_us_per_step"] is None
    assert "transfer vs waiting unknown" in report.headline and "waiting for" not in report.headline
    assert "what a faster network would save is unknown (no transfer time)" in report.headline
