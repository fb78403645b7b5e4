"""Collectives of a trace without NCCL kernels: gloo (``c10d::*`` on the caller + ``gloo:*`` on a worker thread)
and CPU-only views of NCCL calls.

No id links a ``c10d::*`` event to its ``gloo:*`` event; they pair in time order (``reference/traces.md`` 2): each
caller-side call takes the first unused worker event of a compatible op that starts after it. gloo runs
``reduce_scatter_tensor`` as an all-reduce of the full input, so a ``c10d::_reduce_scatter_base_`` pairs with a
``gloo:all_reduce``. Sizes come from ``Input Dims`` (only with ``record_shapes=True``); the process group from
``pg_config`` when the trace declares a single one.
"""

from __future__ import annotations

from collscope.traces.names import dtype_of, element_bytes
from collscope.traces.nests import Nest
from collscope.traces.pgroups import PgInfo, call_group
from collscope.traces.record import Backend, CollectiveCall, SizeSource
from collscope.traces.sizes import dtype_from_types, size_from_dims, size_from_nelems, tensor_elems
from collscope.traces.steps import StepIndex

__all__ = ["gloo_calls", "NO_SHAPES"]

NO_SHAPES = ("sizes absent: {n} collectives list no tensor shapes (profile with record_shapes=True to get them); "
             "their bandwidth is unknown")
_TOLERANCE_US = 1.0
_RUNS_AS = {"reduce_scatter": "all_reduce"}  # gloo's implementation of the caller's op


def gloo_calls(rank: int, nests: list[Nest], index: StepIndex, pgs: PgInfo, world: int | None,
               warnings: list[str], *, backend: Backend) -> list[CollectiveCall]:
    workers = [n for n in nests if n.by_prefix("gloo:") is not None and n.op() is not None]
    callers = [n for n in nests if n.by_prefix("gloo:") is None and n.op() is not None]
    pg = pgs.name_of(None)
    if pg is None and pgs.sizes:
        warnings.append(f"the trace declares {len(pgs.sizes)} process groups and its gloo events name none: calls "
                        "are matched across ranks by their order over all groups")
    queues = _Queues(workers)
    issued: list[tuple[float, CollectiveCall]] = []
    unpaired = 0
    for caller in callers:
        op = caller.op()
        assert op is not None
        worker = queues.take(caller.start_us - _TOLERANCE_US, (_RUNS_AS.get(op, op), op), _largest(caller))
        if worker is None and backend == "gloo":
            unpaired += 1
        issued.append((caller.start_us, _call(rank, op, caller, worker, index, pgs, pg, backend)))
    for worker in queues.left():
        op = worker.op()
        assert op is not None
        issued.append((worker.start_us, _call(rank, op, None, worker, index, pgs, pg, backend)))
    # issue order, not start order: two worker threads may start the calls of one step in either order
    calls = [call for _, call in sorted(issued, key=lambda pair: pair[0])]
    missing = sum(1 for c in calls if c.size_bytes is None)
    if missing:
        warnings.append(NO_SHAPES.format(n=missing))
    if any(c.op == "reduce_scatter" and c.stream is not None for c in calls) and backend == "gloo":
        warnings.append("gloo runs reduce_scatter as an all-reduce of the full input: about twice the useful "
                        "bytes cross the wire, so its busbw (counted on the useful bytes) is not the wire's")
    if unpaired:
        warnings.append(f"{unpaired} c10d calls have no gloo worker event: their duration is unknown")
    if backend != "gloo" and any(c.group_size != 1 for c in calls):  # NCCL launches nothing for a group of 1
        warnings.append("no GPU kernels in this trace: durations are the CPU-side spans of the NCCL calls "
                        "(enqueue time), not transfer times")
    return calls


def _largest(nest: Nest) -> int | None:
    """The largest tensor a call lists (elements): the same on the caller and its worker event (a gloo
    reduce_scatter's worker all-reduces the caller's full input)."""
    found = nest.dims()
    elems = tensor_elems(found[0]) if found is not None else []
    return max(elems) if elems else None


_Key = tuple[str, int | None]


class _Queues:
    """The worker events of each (op, largest tensor) in start order. A caller takes the first one not yet
    taken that starts after it, of its op and tensor size when it lists one (two worker threads may start
    their events in either order), else of its op. Callers come in start order, so an event skipped once is
    never anyone's: it stays left."""

    def __init__(self, workers: list[Nest]) -> None:
        self._queues: dict[_Key, list[Nest]] = {}
        for w in workers:
            self._queues.setdefault((w.op() or "", _largest(w)), []).append(w)
        self._next = dict.fromkeys(self._queues, 0)
        self._taken: set[int] = set()

    def _first(self, key: _Key, not_before_us: float) -> Nest | None:
        queue = self._queues[key]
        i = self._next[key]
        while i < len(queue) and (queue[i].start_us < not_before_us or id(queue[i]) in self._taken):
            i += 1
        self._next[key] = i
        return queue[i] if i < len(queue) else None

    def take(self, not_before_us: float, ops: tuple[str, ...], elems: int | None) -> Nest | None:
        keys = [(op, elems) for op in dict.fromkeys(ops) if (op, elems) in self._queues]
        if not keys:
            keys = [k for k in self._queues if k[0] in ops]
        best: tuple[float, _Key, Nest] | None = None
        for key in keys:
            w = self._first(key, not_before_us)
            if w is not None and (best is None or w.start_us < best[0]):
                best = (w.start_us, key, w)
        if best is None:
            return None
        _, key, worker = best
        self._taken.add(id(worker))
        return worker

    def left(self) -> list[Nest]:
        return [w for q in self._queues.values() for w in q if id(w) not in self._taken]


def _call(rank: int, op: str, caller: Nest | None, worker: Nest | None, index: StepIndex, pgs: PgInfo,
          pg: str | None, backend: Backend) -> CollectiveCall:
    size: int | None = None
    dtype: str | None = None
    meta = caller.meta() if caller is not None else None
    seq = None
    if meta is not None:  # NCCL's record_param_comms on a trace without GPU activity
        key = meta.pg_name if meta.pg_name is not None else meta.pg_id
        pg = pgs.name_of(key) if key is not None else pg
    facts = call_group(pgs, pg, meta, where="record_param_comms", nest=caller)
    group = facts.size
    if meta is not None:
        seq = meta.seq
        dtype = dtype_of(meta.dtype)
        eb = element_bytes(dtype)
        if meta.in_nelems is not None and eb is not None:
            size = size_from_nelems(op, meta.in_nelems, meta.out_nelems, eb, group)
    for nest in (worker, caller):
        if size is not None:
            break
        found = nest.dims() if nest is not None else None
        if found is None:
            continue
        dims, types, _ = found
        dtype = dtype or dtype_from_types(types)
        eb = element_bytes(dtype)
        if eb is not None:
            candidate = size_from_dims(op, dims, eb, group)
            if candidate is not None and (size is None or candidate > size):
                size = candidate
    source: SizeSource = ("record_param_comms" if meta is not None and meta.in_nelems is not None else
                          "input_dims" if size is not None else "none")
    timed = worker if worker is not None else caller
    assert timed is not None
    issued = caller.start_us if caller is not None else timed.start_us
    duration = timed.end_us - timed.start_us if (worker is not None or backend != "gloo") else None
    return CollectiveCall(rank=rank, op=op, size_bytes=size, dtype=dtype, group_size=group, process_group=pg,
                          seq=seq, step=index.step_at(issued), start_us=timed.start_us, duration_us=duration,
                          stream=f"thread {timed.tid}", size_source=source, group_ranks=facts.ranks,
                          group_evidence=facts.evidence)
