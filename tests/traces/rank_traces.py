"""RankTrace records built directly (what a reader returns), for the step accounting, late-rank and what-if tests:
exact kernels, launches and calls without going through a file format."""

from __future__ import annotations

from collections.abc import Sequence

from collscope.traces.record import CollectiveCall, KernelSpan, RankTrace, StepSpan


def call(rank: int, start_us: float, duration_us: float | None, *, seq: int, op: str = "all_reduce",
         size_bytes: int | None = 4_000_000, group: int = 3, step: int | None = 1) -> CollectiveCall:
    return CollectiveCall(rank=rank, op=op, size_bytes=size_bytes, dtype="float32", group_size=group,
                          process_group="0", seq=seq, step=step, start_us=start_us, duration_us=duration_us,
                          stream="20", size_source="kernel", group_ranks=tuple(range(group)))


def rank_trace(rank: int, calls: Sequence[CollectiveCall], *, steps: Sequence[tuple[int, float, float]] = (),
               compute: Sequence[tuple[float, float]] = (), kernels: Sequence[KernelSpan] = (),
               device: str = "gpu", world: int = 3, outside: tuple[int, float] = (0, 0.0)) -> RankTrace:
    """``steps``: (N, start, period); ``compute``: compute spans; ``kernels``: every kernel of the window."""
    return RankTrace(source=f"rank{rank}.json", kind="kineto", rank=rank, world_size=world,
                     backend="nccl" if device == "gpu" else "gloo", device=device,  # type: ignore[arg-type]
                     calls=tuple(calls), steps=tuple(StepSpan(step=n, start_us=s, duration_us=d) for n, s, d in steps),
                     compute_spans=tuple(compute), kernels=tuple(sorted(kernels, key=lambda k: k.start_us)),
                     outside_window_kernels=outside[0], outside_window_comm_us=outside[1])
