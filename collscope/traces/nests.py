"""The CPU side of a Kineto trace: each collective call as the nest of events one thread records for it.

ProcessGroupNCCL nests ``c10d::allreduce_`` > ``record_param_comms`` > ``nccl:all_reduce`` on the calling thread;
ProcessGroupGloo records ``c10d::<op>`` on the caller and ``gloo:<op>`` alone on a worker thread
(``reference/traces.md`` sections 1-2). A nest gathers every such event of one call, with the metadata each
carries: NCCL's ``record_param_comms`` keys, else ``Input Dims`` of the ``nccl:*`` / ``gloo:*`` / ``c10d::*`` event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collscope.traces.kineto_schema import Args, Event, RawEvent, decode_dims
from collscope.traces.names import op_of

__all__ = ["Nest", "is_comm_cpu_event", "build_nests"]

_PREFIXES = ("c10d::", "nccl:", "gloo:", "_c10d_functional::", "c10d_functional::")


def is_comm_cpu_event(ev: Event | RawEvent) -> bool:
    name = ev.name
    return name == "record_param_comms" or name.startswith(_PREFIXES)


@dataclass(slots=True)
class Nest:
    """The events of one collective call on one thread."""

    tid: Any
    start_us: float
    end_us: float
    events: list[Event] = field(default_factory=list)
    external_ids: set[Any] = field(default_factory=set)

    def add(self, ev: Event) -> None:
        self.events.append(ev)
        if ev.args is not None and ev.args.external_id is not None:
            self.external_ids.add(ev.args.external_id)

    def by_prefix(self, prefix: str) -> Event | None:
        for ev in self.events:
            if ev.name.startswith(prefix):
                return ev
        return None

    def meta(self) -> Args | None:
        """The ``record_param_comms`` args that name a collective, if any."""
        for ev in self.events:
            if ev.name == "record_param_comms" and ev.args is not None and ev.args.collective:
                return ev.args
        return None

    def op(self) -> str | None:
        """collscope's op: the c10d name first (``_reduce_scatter_base_``), then the metadata, then annotations."""
        c10d = self.by_prefix("c10d::") or self.by_prefix("_c10d_functional::")
        meta = self.meta()
        for name in ((c10d.name if c10d else None), (meta.collective if meta else None),
                     *(ev.name for ev in self.events if ev.name.startswith(("nccl:", "gloo:")))):
            if name:
                op = op_of(name)
                if op is not None:
                    return op
        return None

    def dims(self) -> tuple[Any, Any, str] | None:
        """(``Input Dims``, ``Input type``, event name) of the innermost event that lists tensors."""
        for ev in sorted(self.events, key=_inner_first):
            if ev.args is not None and len(ev.args.input_dims):
                dims = decode_dims(ev.args.input_dims)
                if _has_tensor(dims):
                    return dims, decode_dims(ev.args.input_type), ev.name
        return None


def _inner_first(ev: Event) -> int:
    return 0 if ev.name.startswith(("nccl:", "gloo:")) else 1 if ev.name == "record_param_comms" else 2


def _has_tensor(dims: Any) -> bool:
    return isinstance(dims, list) and any(isinstance(a, list) and a for a in dims)


def build_nests(events: list[Event]) -> list[Nest]:
    """Group the communication events of each thread into nests: an event inside the span of an open nest on its
    thread joins it, any other starts a new one. Returned in start order."""
    by_tid: dict[Any, list[Event]] = {}
    for ev in events:
        by_tid.setdefault(ev.tid, []).append(ev)
    nests: list[Nest] = []
    for tid, evs in by_tid.items():
        evs.sort(key=lambda e: (e.ts, -e.dur))
        current: Nest | None = None
        for ev in evs:
            if current is not None and ev.ts <= current.end_us and not _starts_new(current, ev):
                current.add(ev)
                continue
            current = Nest(tid=tid, start_us=ev.ts, end_us=ev.ts + ev.dur)
            current.add(ev)
            nests.append(current)
    nests.sort(key=lambda n: n.start_us)
    return nests


def _starts_new(nest: Nest, ev: Event) -> bool:
    """A second outer ``c10d::`` op inside a nest (a coalesced block) still joins it; a new ``record_param_comms``
    with a collective name after one that already named one starts a new call."""
    if ev.name == "record_param_comms" and ev.args is not None and ev.args.collective:
        return nest.meta() is not None
    return False
