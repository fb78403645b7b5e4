"""The parts of a PyTorch profiler (Kineto) Chrome trace the readers use, as msgspec structs.

Decoding with typed structs skips every other key in C, which is what keeps reading at JSON speed: ``args`` of
the hundreds of thousands of ordinary ops are reduced to the few keys named here, and ``Input Dims`` stays raw
bytes until a collective needs it. Key names: ``reference/traces.md`` section 1 (PyTorch ``util.h``, Kineto
``output_json.cpp``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

__all__ = ["Args", "Event", "RawEvent", "TraceDoc", "decode_dims", "with_args", "gc_paused"]

_Id = int | str | None
_NONE = msgspec.Raw(b"")


class Args(msgspec.Struct, gc=False):
    external_id: _Id = msgspec.field(default=None, name="External id")
    correlation: _Id = None
    stream: _Id = None
    collective: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    dtype: str | None = None
    pg_name: _Id = msgspec.field(default=None, name="Process Group Name")
    pg_id: _Id = msgspec.field(default=None, name="Process Group ID")
    pg_desc: str | None = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    rank_start: Any = msgspec.field(default=None, name="Global rank start")
    rank_stride: Any = msgspec.field(default=None, name="Global rank stride")
    seq: int | None = msgspec.field(default=None, name="Seq")
    rank: int | None = msgspec.field(default=None, name="Rank")
    input_dims: msgspec.Raw = msgspec.field(default=_NONE, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=_NONE, name="Input type")


class RawEvent(msgspec.Struct, gc=False):
    """An event as decoded: ``args`` stays raw bytes (most events, the ``aten::`` ops, never need them)."""

    ph: str = ""
    cat: str | None = None
    name: str = ""
    pid: _Id = None
    tid: _Id = None
    ts: float = 0.0
    dur: float = 0.0
    args: msgspec.Raw = _NONE


class Event(msgspec.Struct, gc=False):
    """An event the readers use, with its ``args`` decoded (:func:`with_args`)."""

    ph: str = ""
    cat: str | None = None
    name: str = ""
    pid: _Id = None
    tid: _Id = None
    ts: float = 0.0
    dur: float = 0.0
    args: Args | None = None


_ARGS = msgspec.json.Decoder(Args)


def with_args(ev: RawEvent, ts: float) -> Event:
    """``ev`` with its args decoded and its start moved to ``ts``; args of an unexpected shape count as absent."""
    args = None
    if len(ev.args):
        try:
            args = _ARGS.decode(ev.args)
        except (msgspec.DecodeError, msgspec.ValidationError):
            args = None
    return Event(ph=ev.ph, cat=ev.cat, name=ev.name, pid=ev.pid, tid=ev.tid, ts=ts, dur=ev.dur, args=args)


class TraceDoc(msgspec.Struct, gc=False):
    traceEvents: list[RawEvent]  # noqa: N815 - the trace's key
    distributedInfo: dict[str, Any] | None = None  # noqa: N815
    baseTimeNanoseconds: int | None = None  # noqa: N815
    host_name: Any = None
    deviceProperties: Any = None  # noqa: N815 - a list of {"id", "name", ...}; checked where read


def decode_dims(raw: msgspec.Raw | None) -> Any:
    """``Input Dims`` / ``Input type`` as Python values (None when absent or not JSON)."""
    if raw is None or not len(raw):
        return None
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while one trace is decoded and read: a trace is hundreds of thousands of
    small acyclic objects, and each collection the allocations trigger walks all of them again (20-25% of the
    reading time on bench/trace_speed.py). Re-enabled after, only if it was on; what is freed by reference
    counting is freed as usual."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
