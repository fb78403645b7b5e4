"""Read NCCL Inspector output (``NCCL_INSPECTOR_ENABLE=1``): JSON lines, one object per operation per
communicator (the plugin writes ``<dump dir>/<hostname>-pid<pid>.log``), or the same objects pretty-printed, as
the README shows them and ``jq .`` prints them (one or more objects, or ``jq -s``'s array of them). The
Prometheus text output is :mod:`collscope.traces.inspector_prom`.

Every format version from v4.0 to v4.4 is read (:mod:`collscope.traces.inspector_stream` gives each record its
communicator: self-contained lines up to v4.2, ``dump_stats`` marker streams from v4.3). A collective is
``coll_perf{coll, coll_sn, coll_msg_size_bytes, coll_exec_time_us, coll_timing_source, coll_algobw_gbs,
coll_busbw_gbs, coll_algo?, coll_proto?, event_trace_ts?}`` under ``header{id, comm_name?, rank, n_ranks, nnodes}``.
``coll_msg_size_bytes`` is one rank's buffer: the README's ReduceScatter example has algbw = size x n_ranks / time,
so all_gather / reduce_scatter sizes are multiplied by ``n_ranks`` to follow nccl-tests. Point-to-point
(``p2p_perf``, ``NCCL_INSPECTOR_ENABLE_P2P=1``, the default) and Proxy records (``proxy_trace``,
``NCCL_INSPECTOR_ENABLE_PROXY=1``) are counted and left out; so are ``dump_stats`` markers, whose loss counters
(the ring overwrote records before the dump) are summed per communicator and said in a warning. ``coll_algo`` /
``coll_proto`` (v4.2+) are kept, in collscope's spelling, in :attr:`InspectorRead.choices`: :func:`read_inspector`
returns them beside the traces. A last line cut mid-way (the writer was stopped, or is still writing) is left out
with a warning; a damaged line elsewhere is a ParseError.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import msgspec

from collscope.errors import ParseError
from collscope.traces.inspector_stream import (
    EXPECTED,
    AlgoProto,
    DumpLoss,
    Line,
    Op,
    StreamSummary,
    algo_proto,
    restore,
)
from collscope.traces.names import op_of
from collscope.traces.record import CollectiveCall, RankTrace
from collscope.vocab.ops import OP_BY_KERNEL, OP_FACTS

__all__ = ["parse_inspector_lines", "parse_inspector_json", "read_inspector", "InspectorRead",
           "looks_like_inspector_lines", "looks_like_inspector_json", "inspector_size_bytes", "INSPECTOR_OPS"]

INSPECTOR_OPS = OP_BY_KERNEL
"""NCCL's function names (``ncclFuncToString``) -> collscope's (the op table's ``kernel_names``)."""

_BARE_STARTS = (b'{"coll_perf"', b'{"p2p_perf"', b'{"proxy_trace"')


@dataclass(frozen=True, slots=True, kw_only=True)
class InspectorRead:
    """What one Inspector JSON file holds: the rank traces and what they cannot carry."""

    traces: tuple[RankTrace, ...]
    choices: tuple[tuple[AlgoProto | None, ...], ...]
    """``choices[i][j]``: the algorithm and protocol of ``traces[i].calls[j]`` (``coll_algo`` / ``coll_proto``,
    v4.2+), None where the record does not say."""
    markers: int
    """``dump_stats`` markers (v4.1+), zero-record ones included."""
    p2p_records: int
    proxy_records: Mapping[str, int]
    """Proxy records left out, by ``record_type`` (``proxy_op_start``, ``proxy_op_segment``, ``proxy_op``,
    ``proxy_step``)."""
    losses: tuple[DumpLoss, ...]
    """Per communicator and rank, what its markers say the ring overwrote (only those with a loss)."""
    missing_records: int
    """Records the markers announce that are not in the file."""
    cut_line: int | None
    """The last line's number when it was cut mid-way and left out."""
    versions: tuple[str, ...]
    """``inspector_output_format_version`` values seen (``v4.0`` ... ``v4.4``)."""


def looks_like_inspector_lines(head: bytes) -> bool:
    """The first line is a whole JSON object with a ``header``, or a bare operation object of a v4.3+ stream
    whose start is missing (reading it then says what is missing)."""
    first = head.lstrip().split(b"\n", 1)[0].strip()
    if not (first.startswith(b"{") and first.endswith(b"}")):
        return False
    return b'"header"' in first or first.replace(b" ", b"").startswith(_BARE_STARTS)


def looks_like_inspector_json(head: bytes) -> bool:
    """Pretty-printed objects (or an array of them) with a ``header`` near the start, no Kineto keys."""
    start = head.lstrip()
    return (start[:1] in (b"{", b"[") and b'"header"' in start[:2000] and b'"traceEvents"' not in head
            and any(key in start[:8000] for key in (b'"coll_perf"', b'"p2p_perf"', b'"metadata"',
                                                     b'"dump_stats"')))


def inspector_size_bytes(op: str, msg_size_bytes: int, n_ranks: int) -> int:
    """nccl-tests' size from Inspector's per-rank message size: x the ranks for the NCCL collective functions whose
    nccl-tests size is the total (all_gather, reduce_scatter)."""
    facts = OP_FACTS.get(op)
    total = facts is not None and facts.size_is_total and facts.nccl_func is not None
    return max(msg_size_bytes, 0) * (n_ranks if total else 1)


def _json_lines(data: bytes, source: str, cut: list[int]) -> Iterator[tuple[int | None, Line]]:
    """Each non-blank line decoded; a last line without its newline that does not decode is a line cut mid-way:
    its number goes into ``cut`` and it is left out."""
    decoder = msgspec.json.Decoder(Line)
    raws = data.splitlines()
    last = len(raws)
    for lineno, raw in enumerate(raws, 1):
        if not raw.strip():
            continue
        try:
            yield lineno, decoder.decode(raw)
        except msgspec.DecodeError as exc:
            if lineno == last and not data.endswith((b"\n", b"\r")):
                cut.append(lineno)
                return
            raise ParseError(source, lineno, EXPECTED, found=str(exc)) from None
        except msgspec.ValidationError as exc:
            raise ParseError(source, lineno, EXPECTED, found=str(exc)) from None


def read_inspector(data: bytes, source: str, *, pretty: bool = False) -> InspectorRead:
    """One Inspector file (JSON lines, or pretty-printed objects when ``pretty``) -> its traces, one per rank
    found, with the algorithm/protocol of each call and what the markers say; ParseError naming ``source`` and the
    line otherwise. Assumes the file is one process's output in the order Inspector wrote it."""
    cut: list[int] = []
    summary = StreamSummary()
    if pretty:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(source, data.count(b"\n", 0, exc.start) + 1, "UTF-8 JSON", found="bytes that are not "
                             "UTF-8") from None
        lines: Iterable[tuple[int | None, Line]] = _objects(text, source)
    else:
        lines = _json_lines(data, source, cut)
    return _read(restore(lines, source, summary), source, summary, cut)


def parse_inspector_lines(data: bytes, source: str, rank_hint: int | None = None) -> list[RankTrace]:
    """One RankTrace per rank found in the file (a dump directory usually holds one file per process)."""
    return list(read_inspector(data, source).traces)


def parse_inspector_json(data: bytes, source: str, rank_hint: int | None = None) -> list[RankTrace]:
    """Pretty-printed Inspector objects: one or more, one after the other, or in one array."""
    return list(read_inspector(data, source, pretty=True).traces)


def _objects(text: str, source: str) -> Iterator[tuple[int | None, Line]]:
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
            what = "complete JSON objects (the file looks truncated)" if cut else EXPECTED
            raise ParseError(source, exc.lineno, what, found=exc.msg) from None
        for item in value if isinstance(value, list) else [value]:
            try:
                yield lineno, msgspec.convert(item, type=Line)
            except msgspec.ValidationError as exc:
                raise ParseError(source, lineno, EXPECTED, found=str(exc)) from None


def _call(op_record: Op, source: str) -> tuple[CollectiveCall, AlgoProto | None]:
    perf, head = op_record.line.coll_perf, op_record.header
    assert perf is not None
    op = INSPECTOR_OPS.get(perf.coll) or op_of(perf.coll)
    if op is None:
        raise ParseError(source, op_record.lineno, "coll_perf.coll naming a collective (AllReduce, AllGather, ...)",
                         found=perf.coll)
    start = perf.event_trace_ts.coll_start_ts if perf.event_trace_ts else None
    stamp = op_record.metadata.get("dump_timestamp_us")
    choice = algo_proto(perf.coll_algo, perf.coll_proto)
    call = CollectiveCall(
        rank=head.rank, op=op, size_bytes=inspector_size_bytes(op, perf.coll_msg_size_bytes, head.n_ranks),
        dtype=None, group_size=max(head.n_ranks, 1), process_group=head.id, seq=perf.coll_sn, step=None,
        start_us=float(start if start is not None else stamp if isinstance(stamp, int | float) else 0.0),
        duration_us=perf.coll_exec_time_us, stream=None, size_source="inspector", group_nnodes=head.nnodes,
        algorithm=None if choice is None else choice.algorithm, protocol=None if choice is None else choice.protocol)
    return call, choice


def _read(ops: Iterable[Op], source: str, summary: StreamSummary, cut: list[int]) -> InspectorRead:
    calls: dict[int, list[tuple[CollectiveCall, AlgoProto | None]]] = {}
    hosts: dict[int, str] = {}
    p2p = 0
    proxy: dict[str, int] = {}
    for record in ops:
        if record.kind == "p2p_perf":
            p2p += 1
            continue
        if record.kind == "proxy_trace":
            kind = (record.line.proxy_trace or {}).get("record_type")
            key = kind if isinstance(kind, str) and kind else "unknown"
            proxy[key] = proxy.get(key, 0) + 1
            continue
        call, choice = _call(record, source)
        host = record.metadata.get("hostname")
        if isinstance(host, str) and host:
            hosts.setdefault(call.rank, host)
        calls.setdefault(call.rank, []).append((call, choice))
    if not calls:
        left = [f"{p2p} point-to-point records (p2p_perf)" if p2p else "",
                f"{sum(proxy.values())} Proxy records (proxy_trace)" if proxy else "",
                f"{summary.markers} dump_stats markers" if summary.markers else ""]
        found = "only " + ", ".join(x for x in left if x) if any(left) else "an empty file"
        raise ParseError(source, None, EXPECTED, found=found)
    losses = tuple(loss for loss in summary.losses.values()
                   if loss.coll_dropped or loss.p2p_dropped or loss.proxy_dropped)
    warnings = _warnings(source, p2p, proxy, losses, summary.missing, cut[0] if cut else None)
    traces = tuple(RankTrace(source=source, kind="inspector", rank=r, world_size=None, backend="nccl", device="gpu",
                             calls=tuple(c for c, _ in pairs), warnings=warnings, host=hosts.get(r))
                   for r, pairs in sorted(calls.items()))
    choices = tuple(tuple(ch for _, ch in calls[t.rank]) for t in traces)
    return InspectorRead(traces=traces, choices=choices, markers=summary.markers, p2p_records=p2p,
                         proxy_records=proxy, losses=losses, missing_records=summary.missing,
                         cut_line=cut[0] if cut else None, versions=tuple(summary.versions))


def _warnings(source: str, p2p: int, proxy: Mapping[str, int], losses: tuple[DumpLoss, ...], missing: int,
              cut: int | None) -> tuple[str, ...]:
    out = []
    if p2p:
        out.append(f"{source}: {p2p} point-to-point records (p2p_perf) left out: collscope reads collectives")
    if proxy:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(proxy.items()))
        out.append(f"{source}: {sum(proxy.values())} Proxy records (proxy_trace: {kinds}) left out: collscope "
                   "reads collectives")
    for loss in losses:
        comm = f"communicator {loss.comm_id}" + (f" ({loss.comm_name})" if loss.comm_name else "")
        lost = [f"{n} {what}" for n, what in ((loss.coll_dropped, "collective"), (loss.p2p_dropped,
                "point-to-point"), (loss.proxy_dropped, "Proxy")) if n]
        undercounts = (": the trace undercounts its collectives (NCCL_INSPECTOR_DUMP_COLL_RING_SIZE keeps more)"
                       if loss.coll_dropped else "")
        out.append(f"{source}: Inspector's ring overwrote {' and '.join(lost)} records of {comm}, rank "
                   f"{loss.rank}, before they were dumped (dump_stats){undercounts}")
    if missing:
        out.append(f"{source}: {missing} records announced by dump_stats markers are not in the file (cut short, "
                   "or lines left out)")
    if cut is not None:
        out.append(f"{source}: line {cut} is cut mid-way (the writer was stopped, or is still writing): left out")
    return tuple(out)
