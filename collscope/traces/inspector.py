"""Read NCCL Inspector output (``NCCL_INSPECTOR_ENABLE=1``): JSON lines, one object per collective per
communicator (the plugin writes ``<dump dir>/<hostname>-pid<pid>.log``), or the same objects pretty-printed, as
the README shows them and ``jq .`` prints them (one or more objects, or ``jq -s``'s array of them). The
Prometheus text output is :mod:`collscope.traces.inspector_prom`.

Object (format ``v4.0``, NCCL ``plugins/profiler/inspector/README.md``, ``inspector_json.cc``):
``header{id, comm_name?, rank, n_ranks, nnodes}``,
``metadata{...}``, ``coll_perf{coll, coll_sn, coll_msg_size_bytes, coll_exec_time_us, coll_timing_source,
coll_algobw_gbs, coll_busbw_gbs, event_trace_ts?}``. ``coll_msg_size_bytes`` is one rank's buffer: the README's
ReduceScatter example has algbw = size x n_ranks / time, so all_gather / reduce_scatter sizes are multiplied by
``n_ranks`` to follow nccl-tests. Point-to-point records (``p2p_perf{p2p, p2p_sn, p2p_peer, ...}``, written when
``NCCL_INSPECTOR_ENABLE_P2P=1``, the default) are counted and left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from collscope.errors import ParseError
from collscope.traces.names import op_of
from collscope.traces.record import CollectiveCall, RankTrace
from collscope.vocab.ops import OP_BY_KERNEL, OP_FACTS

__all__ = ["parse_inspector_lines", "parse_inspector_json", "looks_like_inspector_lines",
           "looks_like_inspector_json", "inspector_size_bytes", "INSPECTOR_OPS"]

INSPECTOR_OPS = OP_BY_KERNEL
"""NCCL's function names (``ncclFuncToString``) -> collscope's (the op table's ``kernel_names``)."""


class _Header(msgspec.Struct):
    id: str
    rank: int
    n_ranks: int
    nnodes: int | None = None
    comm_name: str | None = None


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
    coll_perf: _Perf | None = None
    p2p_perf: dict[str, Any] | None = None
    metadata: dict[str, Any] = {}


_EXPECTED = "an NCCL Inspector JSON object with header{id, rank, n_ranks} and coll_perf{coll, coll_msg_size_bytes, " \
            "coll_exec_time_us}"


def looks_like_inspector_lines(head: bytes) -> bool:
    """The first line is a whole JSON object with a ``header``."""
    first = head.lstrip().split(b"\n", 1)[0].strip()
    return first.startswith(b"{") and first.endswith(b"}") and b'"header"' in first


def looks_like_inspector_json(head: bytes) -> bool:
    """Pretty-printed objects (or an array of them) with a ``header`` near the start, no Kineto keys."""
    start = head.lstrip()
    return (start[:1] in (b"{", b"[") and b'"header"' in start[:2000] and b'"traceEvents"' not in head
            and any(key in start[:8000] for key in (b'"coll_perf"', b'"p2p_perf"', b'"metadata"')))


def inspector_size_bytes(op: str, msg_size_bytes: int, n_ranks: int) -> int:
    """nccl-tests' size from Inspector's per-rank message size: x the ranks for the NCCL collective functions whose
    nccl-tests size is the total (all_gather, reduce_scatter)."""
    facts = OP_FACTS.get(op)
    total = facts is not None and facts.size_is_total and facts.nccl_func is not None
    return max(msg_size_bytes, 0) * (n_ranks if total else 1)


def parse_inspector_lines(data: bytes, source: str, rank_hint: int | None = None) -> list[RankTrace]:
    """One RankTrace per rank found in the file (a dump directory usually holds one file per process)."""
    decoder = msgspec.json.Decoder(_Line)

    def lines() -> Iterator[tuple[int | None, _Line]]:
        for lineno, raw in enumerate(data.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                yield lineno, decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise ParseError(source, lineno, _EXPECTED, found=str(exc)) from None

    return _traces(lines(), source)


def parse_inspector_json(data: bytes, source: str, rank_hint: int | None = None) -> list[RankTrace]:
    """Pretty-printed Inspector objects: one or more, one after the other, or in one array."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(source, data.count(b"\n", 0, exc.start) + 1, "UTF-8 JSON", found="bytes that are not "
                         "UTF-8") from None
    return _traces(_objects(text, source), source)


def _objects(text: str, source: str) -> Iterator[tuple[int | None, _Line]]:
    decoder = json.JSONDecoder()
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            return
        lineno = text.count("\n", 0, pos) + 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            cut = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated")
            what = "complete JSON objects (the file looks truncated)" if cut else _EXPECTED
            raise ParseError(source, exc.lineno, what, found=exc.msg) from None
        for item in value if isinstance(value, list) else [value]:
            try:
                yield lineno, msgspec.convert(item, type=_Line)
            except msgspec.ValidationError as exc:
                raise ParseError(source, lineno, _EXPECTED, found=str(exc)) from None


def _traces(lines: Iterable[tuple[int | None, _Line]], source: str) -> list[RankTrace]:
    calls: dict[int, list[CollectiveCall]] = {}
    hosts: dict[int, str] = {}
    p2p = 0
    for lineno, line in lines:
        perf, head = line.coll_perf, line.header
        if perf is None:
            if line.p2p_perf is None:
                raise ParseError(source, lineno, _EXPECTED, found="a record with neither coll_perf nor p2p_perf")
            p2p += 1
            continue
        op = INSPECTOR_OPS.get(perf.coll) or op_of(perf.coll)
        if op is None:
            raise ParseError(source, lineno, "coll_perf.coll naming a collective (AllReduce, AllGather, ...)",
                             found=perf.coll)
        start = perf.event_trace_ts.coll_start_ts if perf.event_trace_ts else None
        stamp = line.metadata.get("dump_timestamp_us")
        host = line.metadata.get("hostname")
        if isinstance(host, str) and host:
            hosts.setdefault(head.rank, host)
        calls.setdefault(head.rank, []).append(CollectiveCall(
            rank=head.rank, op=op, size_bytes=inspector_size_bytes(op, perf.coll_msg_size_bytes, head.n_ranks),
            dtype=None, group_size=max(head.n_ranks, 1), process_group=head.id,
            seq=perf.coll_sn, step=None,
            start_us=float(start if start is not None else stamp if isinstance(stamp, int | float) else 0.0),
            duration_us=perf.coll_exec_time_us, stream=None, size_source="inspector",
            group_nnodes=head.nnodes))
    if not calls:
        found = f"only {p2p} point-to-point records (p2p_perf)" if p2p else "an empty file"
        raise ParseError(source, None, _EXPECTED, found=found)
    warnings = (f"{source}: {p2p} point-to-point records (p2p_perf) left out: collscope reads collectives",) \
        if p2p else ()
    return [RankTrace(source=source, kind="inspector", rank=r, world_size=None, backend="nccl", device="gpu",
                      calls=tuple(cs), warnings=warnings, host=hosts.get(r)) for r, cs in sorted(calls.items())]
