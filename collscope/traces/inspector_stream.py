"""Give each NCCL Inspector JSON record its communicator, whatever the format version.

Shapes (NCCL ``plugins/profiler/inspector``: ``inspector_json.cc``, README, ``inspector_json_reader.py``):

- v4.0: every line is self-contained: ``header{id, comm_name?, rank, n_ranks, nnodes}``, ``metadata{...}`` and one
  of ``coll_perf`` / ``p2p_perf``.
- v4.1, v4.2: the same lines, each communicator's dump preceded by a ``dump_stats`` marker (``header``, ``metadata``
  and ``dump_stats{coll_records, coll_dropped_total, coll_dropped_since_last_dump, p2p_*}``, no operation); v4.2
  adds ``coll_algo`` / ``coll_proto`` (NCCL's ``ncclAlgoToString`` / ``ncclProtoToString``: ``RING``, ``NVLS_TREE``,
  ``SIMPLE``) to ``coll_perf``.
- v4.3, v4.4: a marker stream: the ``dump_stats`` marker carries ``header`` and ``metadata`` once, and the next
  ``coll_records + p2p_records + proxy_records`` lines (``proxy_records`` absent: 0) are bare ``{"coll_perf": ...}``,
  ``{"p2p_perf": ...}`` or ``{"proxy_trace": ...}`` objects of that dump. A marker may announce no record (it then
  reports losses only). ``proxy_trace`` (``NCCL_INSPECTOR_ENABLE_PROXY=1``) is ``proxy_step`` / ``proxy_op`` (flat)
  or ``proxy_op_start`` / ``proxy_op_segment`` / ``proxy_op`` with the Steps nested inside (v4.4 nested).

:func:`restore` walks the records of one file in order and yields each operation with the header and metadata it
belongs to: its own, else those of the latest marker. The context never crosses files. A bare record before any
marker, or beyond what its marker announced, is a ParseError naming the line. What the markers say about loss (the
ring overwrote records before the dump) is summed per communicator into :class:`DumpLoss`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec

from collscope.collectives.nccl_log.tuning import normalize_algorithm, normalize_protocol
from collscope.errors import ParseError
from collscope.vocab.nccl import PROTOCOLS

__all__ = ["Header", "Perf", "Line", "DumpStats", "Op", "DumpLoss", "StreamSummary", "AlgoProto", "algo_proto",
           "parse_algo_proto_label", "restore", "EXPECTED"]

_Count = Annotated[int, msgspec.Meta(ge=0)]
OpKind = Literal["coll_perf", "p2p_perf", "proxy_trace"]
_KINDS: tuple[OpKind, ...] = ("coll_perf", "p2p_perf", "proxy_trace")

EXPECTED = ("an NCCL Inspector JSON object: header{id, rank, n_ranks} with coll_perf{coll, coll_msg_size_bytes, "
            "coll_exec_time_us}, p2p_perf or dump_stats; or, after a dump_stats marker (v4.3+), a bare coll_perf, "
            "p2p_perf or proxy_trace object")


class Header(msgspec.Struct):
    id: str
    rank: int
    n_ranks: int
    nnodes: int | None = None
    comm_name: str | None = None


class _Ts(msgspec.Struct):
    coll_start_ts: float | None = None


class Perf(msgspec.Struct):
    coll: str
    coll_msg_size_bytes: int
    coll_exec_time_us: float
    coll_sn: int | None = None
    coll_algo: str | None = None
    coll_proto: str | None = None
    event_trace_ts: _Ts | None = None


class DumpStats(msgspec.Struct):
    coll_records: _Count = 0
    coll_dropped_total: _Count = 0
    coll_dropped_since_last_dump: _Count = 0
    p2p_records: _Count = 0
    p2p_dropped_total: _Count = 0
    p2p_dropped_since_last_dump: _Count = 0
    proxy_records: _Count = 0
    proxy_dropped_total: _Count = 0
    proxy_dropped_since_last_dump: _Count = 0
    proxy_ops_dropped_total: _Count = 0
    proxy_ops_dropped_since_last_dump: _Count = 0


class Line(msgspec.Struct):
    """One JSON object of an Inspector file, any version (every part optional; :func:`restore` checks)."""

    header: Header | None = None
    metadata: dict[str, Any] | None = None
    coll_perf: Perf | None = None
    p2p_perf: dict[str, Any] | None = None
    proxy_trace: dict[str, Any] | None = None
    dump_stats: DumpStats | None = None


@dataclass(frozen=True, slots=True)
class Op:
    """One operation record with the context it belongs to."""

    lineno: int | None
    kind: OpKind
    header: Header
    metadata: dict[str, Any]
    line: Line


@dataclass(slots=True)
class DumpLoss:
    """What the ``dump_stats`` markers of one communicator (and rank) in one file say was lost: the ring
    overwrote records before the dump thread wrote them. Totals are cumulative in each marker and the
    ``since_last_dump`` counts add up to them; the larger of the two sums is kept (a file whose first dumps are
    missing still says the total)."""

    comm_id: str
    comm_name: str | None
    rank: int
    markers: int = 0
    coll_since: int = 0
    coll_total: int = 0
    p2p_since: int = 0
    p2p_total: int = 0
    proxy_since: int = 0
    proxy_total: int = 0
    proxy_ops_since: int = 0
    proxy_ops_total: int = 0

    @property
    def coll_dropped(self) -> int:
        return max(self.coll_since, self.coll_total)

    @property
    def p2p_dropped(self) -> int:
        return max(self.p2p_since, self.p2p_total)

    @property
    def proxy_dropped(self) -> int:
        return max(self.proxy_since, self.proxy_total) + max(self.proxy_ops_since, self.proxy_ops_total)


@dataclass(slots=True)
class StreamSummary:
    """What :func:`restore` saw besides the operations: filled while the records are consumed."""

    markers: int = 0
    losses: dict[tuple[str, int], DumpLoss] = field(default_factory=dict)
    missing: int = 0
    """Records announced by markers that are not in the file (cut, or lines left out by a reader)."""
    versions: list[str] = field(default_factory=list)
    """``inspector_output_format_version`` values seen, in order of first appearance."""


@dataclass(frozen=True, slots=True)
class AlgoProto:
    """The algorithm and protocol NCCL ran a call with, in collscope's spelling (:data:`collscope.vocab.nccl.
    ALGORITHMS` / ``PROTOCOLS``; a name collscope does not know is kept as given); None where Inspector says
    ``unknown`` or nothing."""

    algorithm: str | None
    protocol: str | None


def _name(value: str | None, normalize: Any) -> str | None:
    if value is None or not value.strip() or value.strip().lower() == "unknown":
        return None
    return str(normalize(value.strip()))


def algo_proto(algo: str | None, proto: str | None) -> AlgoProto | None:
    """``("NVLS_TREE", "SIMPLE")`` -> AlgoProto("NVLSTree", "Simple"); None when neither is known."""
    pair = AlgoProto(_name(algo, normalize_algorithm), _name(proto, normalize_protocol))
    return None if pair.algorithm is None and pair.protocol is None else pair


def parse_algo_proto_label(text: str) -> AlgoProto | None:
    """Inspector's Prometheus ``algo_proto`` label, ``<algo>_<proto>`` (``RING_SIMPLE``, ``NVLS_TREE_SIMPLE``,
    ``Ring_ll``, ``unknown_unknown``) -> AlgoProto; None when the part after the last ``_`` is not a protocol (the
    label is not understood) or both parts are ``unknown``."""
    algo, sep, proto = text.strip().rpartition("_")
    if not sep:
        return None
    if proto.lower() != "unknown" and normalize_protocol(proto) not in PROTOCOLS:
        return None
    return algo_proto(algo, proto)


def _kind(line: Line) -> OpKind | None:
    for kind in _KINDS:
        if getattr(line, kind) is not None:
            return kind
    return None


def _mark(summary: StreamSummary, line: Line, stats: DumpStats) -> None:
    head = line.header
    assert head is not None
    summary.markers += 1
    version = (line.metadata or {}).get("inspector_output_format_version")
    if isinstance(version, str) and version not in summary.versions:
        summary.versions.append(version)
    loss = summary.losses.setdefault((head.id, head.rank), DumpLoss(head.id, head.comm_name, head.rank))
    loss.markers += 1
    loss.coll_since += stats.coll_dropped_since_last_dump
    loss.coll_total = max(loss.coll_total, stats.coll_dropped_total)
    loss.p2p_since += stats.p2p_dropped_since_last_dump
    loss.p2p_total = max(loss.p2p_total, stats.p2p_dropped_total)
    loss.proxy_since += stats.proxy_dropped_since_last_dump
    loss.proxy_total = max(loss.proxy_total, stats.proxy_dropped_total)
    loss.proxy_ops_since += stats.proxy_ops_dropped_since_last_dump
    loss.proxy_ops_total = max(loss.proxy_ops_total, stats.proxy_ops_dropped_total)


def restore(lines: Iterable[tuple[int | None, Line]], source: str, summary: StreamSummary) -> Iterator[Op]:
    """The operation records of one file, each with its header and metadata (its own, else its marker's), in file
    order; markers are counted into ``summary``. Assumes ``lines`` is one file's records in order."""
    context: Line | None = None
    marker_at: int | None = None
    left = dict.fromkeys(_KINDS, 0)
    for lineno, line in lines:
        if line.dump_stats is not None:
            if line.header is None:
                raise ParseError(source, lineno, "a dump_stats marker with its header{id, rank, n_ranks}",
                                 found="a dump_stats object without header")
            summary.missing += sum(left.values())
            stats = line.dump_stats
            left = {"coll_perf": stats.coll_records, "p2p_perf": stats.p2p_records,
                    "proxy_trace": stats.proxy_records}
            context, marker_at = line, lineno
            _mark(summary, line, stats)
            continue
        kind = _kind(line)
        if kind is None:
            raise ParseError(source, lineno, EXPECTED, found="a record with neither coll_perf, p2p_perf, "
                             "proxy_trace nor dump_stats")
        if line.header is None:
            if context is None or context.header is None:
                raise ParseError(source, lineno, "a dump_stats marker before this record (Inspector v4.3 and "
                                 "later write header and metadata once per dump, in its dump_stats marker)",
                                 found=f"a {kind} record without header before any dump_stats marker (the start "
                                 "of the file is missing)")
            if left[kind] <= 0:
                where = f"line {marker_at}" if marker_at is not None else "the latest marker"
                raise ParseError(source, lineno, f"no more {kind} records than the dump_stats marker at {where} "
                                 "announces", found=f"one more {kind} record without header")
            left[kind] -= 1
            yield Op(lineno, kind, context.header, context.metadata or {}, line)
            continue
        if context is not None and context.header is not None and context.header.id == line.header.id \
                and left[kind] > 0:
            left[kind] -= 1  # v4.1/v4.2: self-contained lines, still counted by their marker
        if line.metadata:
            version = line.metadata.get("inspector_output_format_version")
            if isinstance(version, str) and version not in summary.versions:
                summary.versions.append(version)
        yield Op(lineno, kind, line.header, line.metadata or {}, line)
    summary.missing += sum(left.values())
