"""The profiled window of one rank's Kineto trace: which GPU kernels lie inside it, and the steps as periods.

A kernel belongs to the window when its host launch is in the file: the ``cuda_runtime`` / ``cuda_driver`` event
with the kernel's ``correlation`` (``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cuLaunchKernel``,
``cudaGraphLaunch``...). A kernel whose launch is not in the file was queued before the profiler started: its
GPU time is in the file but it belongs to no step and is no call of any step (counted apart). A trace that holds
no runtime event at all cannot tell them apart: every kernel is then taken as inside, and that is said.

Steps are periods: ``ProfilerStep#N`` lasts from its start to the next step's start, the last one to the end of
its CPU span, of its last kernel or of its last collective's CPU event, whichever is latest. They never overlap
and their durations add up to the profiled window (the CPU runs ahead of the GPU, so a step's kernels may run
in the next step's period: they still belong to the step whose period holds their launch).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec

from collscope.traces.kineto_schema import Event, RawEvent
from collscope.traces.record import KernelSpan, StepSpan

__all__ = ["Launches", "KernelWindow", "launches_of", "split_window", "step_periods", "OUTSIDE_WINDOW"]

OUTSIDE_WINDOW = ("{n} GPU kernels ({comm} of them NCCL, {comm_us:.0f} us) have no launch event in the file: they "
                  "were queued before the profiler window opened, so they belong to no step, are no call and are "
                  "left out of the steps and of the matching across ranks")
NO_LAUNCHES = ("the trace holds no CUDA runtime events: kernels queued before the profiler window cannot be told "
               "apart from the others, all are taken as inside it")


class _LaunchArgs(msgspec.Struct, gc=False):
    correlation: int | str | None = None


_DECODE = msgspec.json.Decoder(_LaunchArgs)


class Launches:
    """correlation -> the runtime/driver launch event of that correlation (``cudaLaunchKernel``,
    ``cudaLaunchKernelExC``, ``cuLaunchKernel``, ``cudaGraphLaunch``...: the kernels that carry it), with its start
    on the trace's clock (µs)."""

    __slots__ = ("events", "base_us")

    def __init__(self, events: dict[Any, RawEvent], base_us: float) -> None:
        self.events = events
        self.base_us = base_us

    def __contains__(self, corr: Any) -> bool:
        return corr in self.events

    def __bool__(self) -> bool:
        return bool(self.events)

    def ts(self, corr: Any) -> float | None:
        raw = self.events.get(corr)
        return None if raw is None else raw.ts + self.base_us

    def tid(self, corr: Any) -> Any:
        return self.events[corr].tid


def launches_of(runtime: Sequence[RawEvent], base_us: float) -> Launches:
    """The launches of a trace's runtime/driver events, by correlation."""
    out: dict[Any, RawEvent] = {}
    for raw in runtime:
        if "Launch" in raw.name and len(raw.args):
            try:
                corr = _DECODE.decode(raw.args).correlation
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if corr is not None:
                out[corr] = raw
    return Launches(out, base_us)


class _KernelArgs(msgspec.Struct, gc=False):
    correlation: int | str | None = None
    stream: int | str | None = None


_KERNEL_ARGS = msgspec.json.Decoder(_KernelArgs)
_NO_ARGS = _KernelArgs()


@dataclass(frozen=True, slots=True)
class KernelWindow:
    """The kernels of a rank split by the profiler window."""

    nccl: list[Event]
    """NCCL kernels inside the window (their launch is in the file)."""
    other: list[tuple[float, float, Any]]
    """(start, end, stream) of the other kernels inside the window."""
    kernels: tuple[KernelSpan, ...]
    """Every kernel inside the window, in start order."""
    outside: int
    outside_comm: int
    outside_comm_us: float
    warnings: tuple[str, ...]


def split_window(nccl: Sequence[Event], other: Sequence[RawEvent], base_us: float, launches: Launches,
                 any_runtime: bool) -> KernelWindow:
    """Keep the kernels whose launch is in the file (all of them when the file has no runtime event).

    ``other``: the non-NCCL kernels as decoded (their start not yet moved by ``base_us``): only their
    correlation and stream are read, the tens of thousands of them never become :class:`Event` objects."""
    in_nccl: list[Event] = []
    in_other: list[tuple[float, float, Any]] = []
    spans: list[KernelSpan] = []
    outside = outside_comm = 0
    outside_comm_us = 0.0
    events, launch_base = launches.events, launches.base_us
    for k in nccl:
        launch = events.get(k.args.correlation) if k.args is not None else None
        if launch is None and any_runtime:
            outside += 1
            outside_comm += 1
            outside_comm_us += k.dur
            continue
        in_nccl.append(k)
        spans.append(KernelSpan(k.ts, k.ts + k.dur, None if launch is None else launch.ts + launch_base, True))
    get, span, keep_other, keep_span = events.get, KernelSpan, in_other.append, spans.append
    for raw in other:
        args = _kernel_args(raw.args)
        launch = get(args.correlation)
        if launch is None and any_runtime:
            outside += 1
            continue
        start = raw.ts + base_us
        end = start + raw.dur
        keep_other((start, end, args.stream))
        keep_span(span(start, end, None if launch is None else launch.ts + launch_base, False))
    spans.sort(key=_START)
    warnings: list[str] = []
    if outside:
        warnings.append(OUTSIDE_WINDOW.format(n=outside, comm=outside_comm, comm_us=outside_comm_us))
    if spans and not any_runtime:
        warnings.append(NO_LAUNCHES)
    return KernelWindow(nccl=in_nccl, other=in_other, kernels=tuple(spans), outside=outside,
                        outside_comm=outside_comm, outside_comm_us=outside_comm_us, warnings=tuple(warnings))


def _kernel_args(raw: msgspec.Raw) -> _KernelArgs:
    if not len(raw):
        return _NO_ARGS
    try:
        return _KERNEL_ARGS.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _NO_ARGS


_START = attrgetter("start_us")


def step_periods(spans: Sequence[StepSpan], kernels: Sequence[KernelSpan],
                 cpu_ends: Iterable[tuple[float, float]]) -> list[StepSpan]:
    """The steps as periods (each to the next one's start, the last to its latest end), in start order.

    ``spans``: the ``ProfilerStep#N`` CPU spans; ``kernels``: the window's kernels in start order;
    ``cpu_ends``: (start, end) of the other CPU events read (collectives' events, gloo worker spans). Two steps
    starting at the same time (a damaged trace) keep the first."""
    steps: list[StepSpan] = []
    for step in sorted(spans, key=lambda s: s.start_us):
        if not steps or step.start_us > steps[-1].start_us:
            steps.append(step)
    out: list[StepSpan] = []
    for i, step in enumerate(steps):
        if i + 1 < len(steps):
            out.append(StepSpan(step=step.step, start_us=step.start_us,
                                duration_us=steps[i + 1].start_us - step.start_us))
            continue
        end = step.start_us + step.duration_us
        first = bisect.bisect_left(kernels, step.start_us, key=_START)  # a kernel starts after its launch
        for k in kernels[first:]:  # kernels launched in the last step (or, without launches, run in it)
            issued = k.start_us if k.launch_us is None else k.launch_us
            if issued >= step.start_us and k.end_us > end:
                end = k.end_us
        for start, stop in cpu_ends:
            if start >= step.start_us and stop > end:
                end = stop
        out.append(StepSpan(step=step.step, start_us=step.start_us, duration_us=end - step.start_us))
    return out
