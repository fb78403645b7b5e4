"""Read a PyTorch profiler (Kineto) Chrome trace into a :class:`RankTrace`.

NCCL backend: one call per NCCL kernel (``ncclKernel_*`` / ``ncclDevKernel_*``), timed on the GPU; its size from
the metadata on the kernel (PyTorch >= 2.2), else from the CPU call it links to (``External id``, else the
``correlation`` of its launch inside the call's span): ``record_param_comms`` keys, else ``Input Dims``.
gloo backend: see :mod:`collscope.traces.gloo`. Facts: ``reference/traces.md``.

Only kernels whose launch is in the file are read (:mod:`collscope.traces.windows`: the others were queued before
the profiler window opened), and steps are periods. A kernel that runs another op than the CPU call it links to
(:func:`collscope.traces.names.kernel_runs`) is its kernel's op, with no size, group or sequence number of that
call: its busbw is unknown rather than the CPU op's.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any, Literal

from collscope.errors import ParseError
from collscope.traces.geometry import kineto_clues
from collscope.traces.gloo import gloo_calls
from collscope.traces.kineto_schema import Args, Event, RawEvent, TraceDoc, with_args
from collscope.traces.names import element_bytes, is_nccl_kernel, kernel_runs, op_of
from collscope.traces.nests import Nest, build_nests, is_comm_cpu_event
from collscope.traces.pgroups import GroupFacts, PgInfo, call_group, pg_infos
from collscope.traces.record import CollectiveCall, RankTrace, SizeSource, StepSpan, release_text
from collscope.traces.sizes import dtype_from_types, size_from_dims, size_from_nelems
from collscope.traces.steps import StepIndex, parse_step
from collscope.traces.windows import Launches, launches_of, split_window, step_periods

__all__ = ["parse_kineto"]


def parse_kineto(doc: TraceDoc, source: str, *, rank_hint: int | None = None) -> RankTrace:
    """The collectives, steps and compute spans of one rank's Kineto trace."""
    info = doc.distributedInfo or {}
    rank = _int(info.get("rank"), rank_hint)
    if rank is None:
        raise ParseError(source, None, "distributedInfo.rank in the trace, or a rank number in the file name")
    world = _int(info.get("world_size"), None)
    base_us = (doc.baseTimeNanoseconds or 0) / 1000.0
    steps: list[StepSpan] = []
    comm_cpu: list[Event] = []
    nccl_kernels: list[Event] = []
    other_kernels: list[RawEvent] = []
    runtime: list[RawEvent] = []
    step_tids: set[Any] = set()
    for raw in doc.traceEvents:
        cat = raw.cat
        if cat == "cpu_op" or cat == "user_annotation":
            name = raw.name
            if name.startswith("aten::") or raw.ph != "X":
                continue  # compute on the CPU: read in a second pass, only for traces without GPU kernels
            if name.startswith("ProfilerStep#"):
                n = parse_step(name)
                if n is not None:
                    steps.append(StepSpan(step=n, start_us=raw.ts + base_us, duration_us=raw.dur))
                    step_tids.add(raw.tid)
            elif is_comm_cpu_event(raw):
                comm_cpu.append(with_args(raw, raw.ts + base_us))
        elif cat == "kernel" and raw.ph == "X":
            if is_nccl_kernel(raw.name):
                nccl_kernels.append(with_args(raw, raw.ts + base_us))
            else:
                other_kernels.append(raw)
        elif (cat == "cuda_runtime" or cat == "cuda_driver") and raw.ph == "X":
            runtime.append(raw)
    launches = launches_of(runtime, base_us)
    window = split_window(nccl_kernels, other_kernels, base_us, launches, bool(runtime))
    cpu_spans = [(e.ts, e.ts + e.dur) for e in comm_cpu]
    steps = step_periods(steps, window.kernels, cpu_spans)
    index = StepIndex(steps)
    pgs = pg_infos(info, source)
    backend = _backend(info, nccl_kernels, comm_cpu)
    nests = build_nests(comm_cpu)
    warnings: list[str] = list(window.warnings)
    device: Literal["gpu", "cpu"]
    if nccl_kernels:
        calls = _nccl_calls(rank, window.nccl, nests, launches, index, pgs, world, warnings)
        nccl_streams = {k.args.stream for k in nccl_kernels if k.args is not None}
        compute = [(start, end) for start, end, stream in window.other if stream is None or stream not in nccl_streams]
        device = "gpu"
    else:
        calls = gloo_calls(rank, nests, index, pgs, world, warnings, backend=backend)
        if other_kernels:  # a GPU job whose collectives launched no NCCL kernel (groups of 1)
            compute = [(start, end) for start, end, _ in window.other]
            device = "gpu"
        else:
            compute = _main_thread_aten(doc, base_us, step_tids)
            device = "cpu"
    host, clues = kineto_clues(info, doc.host_name, source)
    return RankTrace(source=source, kind="kineto", rank=rank, world_size=world, backend=backend, device=device,
                     calls=tuple(calls), steps=tuple(steps), compute_spans=tuple(compute),
                     warnings=tuple(warnings), host=host, clues=clues, kernels=window.kernels,
                     outside_window_kernels=window.outside, outside_window_comm_us=window.outside_comm_us,
                     gpu=device_model(doc.deviceProperties), nccl_version=release_text(info.get("nccl_version")))


def device_model(properties: Any) -> str | None:
    """The GPU model Kineto's ``deviceProperties`` name, when its entries name exactly one (a process that sees
    two kinds of GPU names none: which one the rank used is not said there)."""
    if not isinstance(properties, list):
        return None
    names = {p["name"].strip() for p in properties
             if isinstance(p, dict) and isinstance(p.get("name"), str) and p["name"].strip()}
    return names.pop() if len(names) == 1 else None


def _main_thread_aten(doc: TraceDoc, base_us: float, step_tids: set[Any]) -> list[tuple[float, float]]:
    """The ``aten::`` op spans of the main thread (the one of the ProfilerStep spans, else the busiest)."""
    by_tid: dict[Any, list[tuple[float, float]]] = {}
    for raw in doc.traceEvents:
        if raw.cat == "cpu_op" and raw.ph == "X" and raw.name.startswith("aten::"):
            ts = raw.ts + base_us
            by_tid.setdefault(raw.tid, []).append((ts, ts + raw.dur))
    main = step_tids or (set(by_tid) and {max(by_tid, key=lambda t: len(by_tid[t]))})
    return [span for tid in main for span in by_tid.get(tid, [])]


def _int(value: Any, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _backend(info: dict[str, Any], kernels: list[Event], comm: list[Event]) -> Any:
    name = str(info.get("backend") or "").lower()
    if "nccl" in name or kernels or any(e.name.startswith("nccl:") for e in comm):
        return "nccl"
    if "gloo" in name or any(e.name.startswith("gloo:") for e in comm):
        return "gloo"
    return "unknown"


def _nccl_calls(rank: int, kernels: list[Event], nests: list[Nest], launches: Launches, index: StepIndex,
                pgs: PgInfo, world: int | None, warnings: list[str]) -> list[CollectiveCall]:
    by_ext: dict[Any, Nest] = {}
    for each in nests:
        for ext in each.external_ids:
            by_ext[ext] = each
    by_tid: dict[Any, list[Nest]] = {}
    for each in nests:
        by_tid.setdefault(each.tid, []).append(each)
    starts = {tid: [n.start_us for n in ns] for tid, ns in by_tid.items()}
    groups: dict[int, tuple[Nest | None, bool, list[Event]]] = {}
    disagree: Counter[tuple[str, str]] = Counter()
    for k in sorted(kernels, key=lambda e: e.ts):
        args = k.args or Args()
        nest: Nest | None = by_ext.get(args.external_id) if args.external_id is not None else None
        launched = launches.ts(args.correlation) if nest is None and args.correlation is not None else None
        if launched is not None:
            tid = launches.tid(args.correlation)
            nest = _containing(by_tid.get(tid, []), starts.get(tid, []), launched)
        own = True
        said = op_of(args.collective) if args.collective else (nest.op() if nest is not None else None)
        ran = op_of(k.name)
        if said is not None and ran is not None and not kernel_runs(said, ran):
            disagree[(ran, said)] += 1  # the CPU call's op, size and sequence number are not this kernel's
            nest, own = None, False
        key = id(nest) if nest is not None and not args.collective else id(k)
        groups.setdefault(key, (nest, own, []))[2].append(k)  # the kernels one CPU call launched are one call
    if disagree:
        pairs = ", ".join(f"{n} {ran} kernels under {said}" for (ran, said), n in sorted(disagree.items()))
        warnings.append(f"{sum(disagree.values())} NCCL kernels run another op than the CPU call they link to "
                        f"({pairs}): each is taken as the op its kernel runs, with no size and no busbw; either the "
                        "link is wrong (the CPU call's size, group and sequence number are not the kernel's) or the "
                        "kernel's name is (NCCL 2.13 named kernels SendRecv whatever they ran, NVIDIA/nccl#714)")
    calls: list[CollectiveCall] = []
    unsized = 0
    for linked, own, ks in groups.values():
        call = _kernel_call(rank, ks, linked, index, pgs, world, launches, own_meta=own)
        if call is None:
            continue
        if call.size_bytes is None and own:
            unsized += 1
        calls.append(call)
    calls.sort(key=lambda c: c.start_us)
    if unsized:
        warnings.append(f"{unsized} NCCL kernels carry no size and link to no CPU op that does (older PyTorch "
                        "without record_shapes=True): their bandwidth is unknown")
    return calls


def _containing(nests: list[Nest], starts: list[float], ts: float) -> Nest | None:
    i = bisect.bisect_right(starts, ts) - 1
    while i >= 0:
        if nests[i].start_us <= ts <= nests[i].end_us:
            return nests[i]
        if ts - nests[i].end_us > 1e6:
            break
        i -= 1
    return None


def _kernel_call(rank: int, ks: list[Event], nest: Nest | None, index: StepIndex, pgs: PgInfo,
                 world: int | None, launches: Launches, *, own_meta: bool = True) -> CollectiveCall | None:
    """One call from the kernels ``ks`` one CPU call launched; ``own_meta`` False: the metadata on the kernel
    names another op than the kernel runs, so none of it is used."""
    k = ks[0]
    args = k.args if k.args is not None and own_meta else Args(stream=k.args.stream if k.args else None)
    end = max(e.ts + e.dur for e in ks)
    meta = args if args.collective else (nest.meta() if nest is not None else None)
    op = (op_of(meta.collective) if meta is not None and meta.collective else None)
    if op is None and meta is not None and meta.collective and op_of(meta.collective) is None:
        return None  # a wait or barrier kernel
    if op is None and nest is not None:
        op = nest.op()
    if op is None:
        op = op_of(k.name)
    if op is None:
        return None
    pg_key = meta.pg_name if meta is not None and meta.pg_name is not None else (
        meta.pg_id if meta is not None else None)
    pg = pgs.name_of(pg_key)
    facts = _group(pgs, pg, meta, meta is args, nest)
    size, dtype, source = _size(op, args, meta, nest, facts.size)
    launched = launches.ts(k.args.correlation) if k.args is not None and k.args.correlation is not None else None
    issued = nest.start_us if nest is not None else launched if launched is not None else k.ts
    return CollectiveCall(rank=rank, op=op, size_bytes=size, dtype=dtype, group_size=facts.size, process_group=pg,
                          seq=meta.seq if meta is not None else None, step=index.step_at(issued), start_us=k.ts,
                          duration_us=end - k.ts, stream=None if args.stream is None else str(args.stream),
                          size_source=source, group_ranks=facts.ranks, group_evidence=facts.evidence)


def _group(pgs: PgInfo, pg: str | None, meta: Args | None, on_kernel: bool, nest: Nest | None) -> GroupFacts:
    """The call's group from its metadata (on the kernel or its ``record_param_comms``), the trace's pg_config
    and, for ``c10d::allgather_``, the length of its output list."""
    where = "the NCCL kernel's metadata" if on_kernel else "record_param_comms"
    return call_group(pgs, pg, meta, where=where, nest=nest)


def _size(op: str, args: Args, meta: Args | None, nest: Nest | None,
          group: int | None) -> tuple[int | None, str | None, SizeSource]:
    from collscope.traces.names import dtype_of

    if meta is not None and meta.in_nelems is not None:
        dtype = dtype_of(meta.dtype)
        eb = element_bytes(dtype)
        if eb is not None:
            source: SizeSource = "kernel" if meta is args else "record_param_comms"
            size = size_from_nelems(op, meta.in_nelems, meta.out_nelems, eb, group)
            return size, dtype, source if size is not None else "none"
    if nest is not None:
        found = nest.dims()
        if found is not None:
            dims, types, _ = found
            dtype = dtype_from_types(types)
            eb = element_bytes(dtype)
            if eb is not None:
                size = size_from_dims(op, dims, eb, group)
                return size, dtype, "input_dims" if size is not None else "none"
    return None, None, "none"
