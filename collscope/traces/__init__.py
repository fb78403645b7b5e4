"""Training traces: PyTorch profiler (Kineto), Flight Recorder and NCCL Inspector readers -> CollectiveCall
records; cross-rank matching, exposed communication per step, goodput against a sweep or a model.

Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.traces.compare import BenchCurves, bench_curves
    from collscope.traces.load import parse_trace_bytes, read_traces
    from collscope.traces.record import CollectiveCall, RankTrace, StepSpan
    from collscope.traces.render import render_text
    from collscope.traces.report import TraceReport, analyze_traces

__all__ = [
    "BenchCurves",
    "CollectiveCall",
    "RankTrace",
    "StepSpan",
    "TraceReport",
    "analyze_traces",
    "bench_curves",
    "parse_trace_bytes",
    "read_traces",
    "render_text",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.traces.compare": ["BenchCurves", "bench_curves"],
        "collscope.traces.load": ["parse_trace_bytes", "read_traces"],
        "collscope.traces.record": ["CollectiveCall", "RankTrace", "StepSpan"],
        "collscope.traces.render": ["render_text"],
        "collscope.traces.report": ["TraceReport", "analyze_traces"],
    })
