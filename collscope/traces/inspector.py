"""Read NCCL Inspector output (``NCCL_INSPECTOR_ENABLE=1``; JSON lines, one object per collective per communicator).

Object (format ``v4.0``, NCCL ``ext-profiler/inspector/README.md``): ``header{id, rank, n_ranks, nnodes}``,
``metadata{...}``, ``coll_perf{coll, coll_sn, coll_msg_size_bytes, coll_exec_time_us, coll_timing_source,
coll_algobw_gbs, coll_busbw_gbs, event_trace_ts?}``. ``coll_msg_size_bytes`` is one rank's buffer: the README's
ReduceScatter example has algbw = size x n_ranks / time, so all_gather / reduce_scatter sizes are multiplied by
``n_ranks`` to follow nccl-tests.
"""

from __future__ import annotations

from typing import Any

import msgspec

from collscope.errors import ParseError
from collscope.traces.names import op_of
from collscope.traces.record import CollectiveCall, RankTrace

__all__ = ["parse_inspector", "looks_like_inspector"]

_CAMEL = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
          "Broadcast": "broadcast", "Reduce": "reduce", "AllToAll": "alltoall", "SendRecv": "sendrecv",
          "Send": "sendrecv", "Recv": "sendrecv"}


class _Header(msgspec.Struct):
    id: str
    rank: int
    n_ranks: int
    nnodes: int | None = None


class _Ts(msgspec.Struct):
    coll_start_ts: float | None = None


class _Perf(msgspec.Struct):
    coll: str
    coll_msg_size_bytes: int
    coll_exec_time_us: float
    coll_sn: int | None = None
    event_trace_ts: _Ts | None = None


class _Line(msgspec.Struct):
    header: _Header
    coll_perf: _Perf
    metadata: dict[str, Any] = {}


_EXPECTED = "an NCCL Inspector JSON object with header{id, rank, n_ranks} and coll_perf{coll, coll_msg_size_bytes, " \
            "coll_exec_time_us}"


def looks_like_inspector(data: bytes) -> bool:
    head = data[:400].lstrip()
    return head.startswith(b"{") and b'"header"' in head and (b'"coll_perf"' in data[:4000] or
                                                              b'"metadata"' in head)


def parse_inspector(data: bytes, source: str) -> list[RankTrace]:
    """One RankTrace per rank found in the file (a dump directory usually holds one file per process)."""
    decoder = msgspec.json.Decoder(_Line)
    calls: dict[int, list[CollectiveCall]] = {}
    for lineno, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ParseError(source, lineno, _EXPECTED, found=str(exc)) from None
        perf, head = line.coll_perf, line.header
        op = _CAMEL.get(perf.coll) or op_of(perf.coll)
        if op is None:
            raise ParseError(source, lineno, "coll_perf.coll naming a collective (AllReduce, AllGather, ...)",
                             found=perf.coll)
        size = perf.coll_msg_size_bytes * (head.n_ranks if op in ("all_gather", "reduce_scatter") else 1)
        start = perf.event_trace_ts.coll_start_ts if perf.event_trace_ts else None
        stamp = line.metadata.get("dump_timestamp_us")
        calls.setdefault(head.rank, []).append(CollectiveCall(
            rank=head.rank, op=op, size_bytes=max(size, 0), dtype=None, group_size=max(head.n_ranks, 1),
            process_group=head.id,
            seq=perf.coll_sn, step=None, start_us=float(start if start is not None else stamp or 0.0),
            duration_us=perf.coll_exec_time_us, stream=None, size_source="inspector"))
    if not calls:
        raise ParseError(source, None, _EXPECTED, found="an empty file")
    return [RankTrace(source=source, kind="inspector", rank=r, world_size=None, backend="nccl", device="gpu",
                      calls=tuple(cs)) for r, cs in sorted(calls.items())]
