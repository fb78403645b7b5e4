"""The records every trace reader returns: one :class:`CollectiveCall` per collective seen on one rank, the
steps and compute spans of that rank, gathered in a :class:`RankTrace`.

Times are microseconds on the trace's own clock (Kineto: ``ts`` + ``baseTimeNanoseconds``; Flight Recorder:
``time_created_ns``), sizes follow nccl-tests (all_gather / reduce_scatter / alltoall: the total over ranks).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import msgspec

__all__ = ["CollectiveCall", "StepSpan", "KernelSpan", "RankTrace", "TraceClue", "Backend", "SizeSource",
           "release_text"]

Backend = Literal["nccl", "gloo", "unknown"]
SizeSource = Literal["kernel", "record_param_comms", "input_dims", "flight_recorder", "inspector", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCall:
    """One collective on one rank."""

    rank: int
    op: str
    """collscope's name (:data:`collscope.vocab.ops.OPS`)."""
    size_bytes: int | None
    """nccl-tests' size: all_gather / reduce_scatter / alltoall the total over the group; None when the trace
    does not carry it (gloo without ``record_shapes=True``)."""
    dtype: str | None
    group_size: int | None
    """Ranks in the call's process group (never the world's size unless the group is the world); None when the
    trace does not say (then its busbw is unknown)."""
    process_group: str | None
    seq: int | None
    """The per-process-group sequence number, when the trace records one (``Seq``, Flight Recorder)."""
    step: int | None
    """N of the ``ProfilerStep#N`` the call was issued in."""
    start_us: float
    duration_us: float | None
    stream: str | None
    """The CUDA stream (GPU kernels) or the thread (gloo worker) the call ran on."""
    size_source: SizeSource = "none"
    exposed_us: float | None = None
    """The part of the call not overlapped by compute on the same rank (set by the step analysis)."""
    group_ranks: tuple[int, ...] | None = None
    """The global ranks of the call's process group, when the trace lists them (Flight Recorder ``pg_config``)."""
    group_nnodes: int | None = None
    """How many nodes the call's communicator spans, when the trace says (Inspector ``nnodes`` / ``n_nodes``)."""
    group_evidence: tuple[str, ...] = ()
    """Where ``group_size`` was read (``Group size 64 in record_param_comms``, ``Process Group Ranks lists 64
    ranks``, ``pg_size 64 of process group '1' in distributedInfo.pg_config``)."""
    algorithm: str | None = None
    """The algorithm NCCL ran the call with, when the trace says (Inspector v4.2+ ``coll_algo``, Prometheus
    ``algo_proto``), in collscope's spelling (:data:`collscope.vocab.nccl.ALGORITHMS`)."""
    protocol: str | None = None
    """The protocol (Inspector ``coll_proto``), in collscope's spelling (:data:`collscope.vocab.nccl.PROTOCOLS`)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSpan:
    """A ``ProfilerStep#N`` span on the rank's main thread."""

    step: int
    start_us: float
    duration_us: float


class KernelSpan(msgspec.Struct, frozen=True, gc=False):
    """One GPU kernel of the rank (GPU traces): when it ran, and when the host launched it. A msgspec struct, not a
    dataclass: a trace holds tens of thousands of kernels and a frozen dataclass takes 10x longer to build (the
    reader's 100 MB/s)."""

    start_us: float
    end_us: float
    launch_us: float | None
    """The start of its ``cudaLaunchKernel`` (matched by ``correlation``); None when the launch is not in the file
    (the kernel was launched before the profiler window opened)."""
    comm: bool
    """An NCCL (communication) kernel."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankTrace:
    """What one file tells about one rank."""

    source: str
    kind: Literal["kineto", "flight_recorder", "inspector", "inspector_prom"]
    rank: int
    world_size: int | None
    backend: Backend
    device: Literal["gpu", "cpu"]
    calls: tuple[CollectiveCall, ...]
    """In the order the rank issued them (matching across ranks relies on it)."""
    steps: tuple[StepSpan, ...] = ()
    compute_spans: tuple[tuple[float, float], ...] = ()
    """Compute intervals (start, end) in us: kernels on non-NCCL streams (GPU) or the main thread's
    ``aten::`` ops (CPU); communication hidden under them is not exposed."""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    host: str | None = None
    """The host the rank ran on, when the trace names it (Inspector ``hostname`` / ``node``)."""
    kernels: tuple[KernelSpan, ...] = ()
    """Every GPU kernel of the rank inside the profiled window, in start order (GPU traces; empty for CPU traces):
    for GPU idle time and the host-wait split."""
    outside_window_kernels: int = 0
    """Kernels whose launch is not in the file (launched before the profiler window): they belong to no step."""
    outside_window_comm_us: float = 0.0
    """The summed duration of the communication kernels among them."""
    clues: tuple[TraceClue, ...] = ()
    """What the file says about the job's geometry (``world_size 128 in distributedInfo``), read by
    :func:`collscope.traces.geometry.job_geometry`."""
    gpu: str | None = None
    """The GPU the file names (Kineto's ``deviceProperties``), when it names exactly one model."""
    nccl_version: str | None = None
    """The NCCL release the file names: Kineto's ``distributedInfo.nccl_version`` (PyTorch writes it for the nccl
    backend, torch/profiler/profiler.py), a Flight Recorder dump's ``nccl_version``; None where it names none."""


@dataclass(frozen=True, slots=True)
class TraceClue:
    """One clue about the job's geometry: the field ``name`` (:data:`collscope.geometry.GEOMETRY_FIELDS`) lies in
    [low, high] (None: unbounded), as ``says`` says."""

    name: str
    low: int | None
    high: int | None
    says: str


def release_text(value: object) -> str | None:
    """A trace's NCCL version field as text (``"2.21.5"``); None when absent or empty (gloo jobs)."""
    text = str(value).strip() if isinstance(value, (str, int, float)) else ""
    return text or None
