"""What an nccl-tests run printed, as records: the run, its devices, its header, and the rows of its table.

The ``-J`` JSON reader (:mod:`.json`) makes one :class:`Row` per size and placement; the text parser
(:mod:`.parse`) hands over the same rows column by column, as :class:`Block` s in a :class:`TableRows`. Both
go to :func:`.build.build_run`, which infers what the output does not say outright (number of ranks, per-size
ok flags; :mod:`.nranks`) and makes one :class:`~collscope.collectives.record.Measurement` of each row.
Formats and facts: ``shared/reference/nccl-facts.md`` section 4.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from collscope.collectives.nccl_tests.prefixes import LinePrefixes
from collscope.collectives.record import Measurement
from collscope.geometry import UNKNOWN_GEOMETRY, Geometry
from collscope.vocab.ops import DTYPE_TABLE, NCCL_TESTS_TYPE_BYTES, OP_BY_NCCL_TESTS_BINARY

__all__ = ["NcclTestsRun", "NcclTestsDevice", "NcclTestsHeader", "Row", "Block", "Placement", "TableRows",
           "op_from_binary", "nccl_version_from_code", "DTYPE_BYTES", "valid_times"]

DTYPE_BYTES: dict[str, int] = {**NCCL_TESTS_TYPE_BYTES, **{d.name: d.elem_bytes for d in DTYPE_TABLE}}
"""Bytes per element of every type name a table or a record may hold: nccl-tests' (``src/common.cu``
test_typenames, current and pre-NCCL-2.10) and collscope's, which the records carry (:mod:`collscope.vocab.ops`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsDevice:
    """One ``#  Rank  0 Group  0 Pid 1234 on host device  0 [0000:0f:00] NVIDIA A100`` line."""

    rank: int
    group: int | None
    """Communicator colour (``NCCL_TESTS_SPLIT``); None in outputs older than v2.13.4, which had no Group."""
    pid: int
    host: str
    device: int
    """CUDA device index on that host."""
    bus_id: str
    """As printed: ``0x0f`` (before v2.14.1) or ``0000:0f:00``."""
    name: str
    """GPU model as printed, e.g. ``NVIDIA A100-SXM4-40GB``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsHeader:
    """The run parameters of the ``# nThread ... nGpus ... minBytes ...`` line (or the JSON ``config``)."""

    nthreads: int | None = None
    ngpus: int | None = None
    """GPUs per thread (``-g``)."""
    min_bytes: int | None = None
    max_bytes: int | None = None
    step_factor: int | None = None
    """``-f``; None when the sizes grow by a fixed step."""
    step_bytes: int | None = None
    """``-i``; None when the sizes grow by a factor."""
    warmup_iters: int | None = None
    iters: int | None = None
    agg_iters: int | None = None
    """``agg iters``; absent (None) in the oldest outputs."""
    validation: int | None = None
    """``-c``: 0 means values were not checked."""
    graph: int | None = None
    """CUDA graph launches (``-G``); absent (None) in the oldest outputs."""
    unalign: int | None = None
    """Since v2.18.3."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsRun:
    """One nccl-tests run: its records and what its output said about itself."""

    op: str
    records: tuple[Measurement, ...]
    """One per size and placement (out-of-place ``in_place=False`` first, then in-place), in output order."""
    nranks: int
    """The ranks of the communicator the bandwidths are for: with ``NCCL_TESTS_SPLIT`` rank 0's group."""
    nnodes: int | None
    """Nodes of that communicator, as :attr:`geometry` has them (the hosts of a complete rank list, NCCL's
    ``nNodes``, ``srun -N``, ``--nnodes``); None when unknown, never a silent 1."""
    hosts: tuple[str, ...]
    """Hosts in rank order as far as the rank list shows them."""
    devices: tuple[NcclTestsDevice, ...]
    ranks_elided: bool
    """The rank list was shortened (``...``), so ``devices``/``hosts`` are partial."""
    nranks_source: str
    """How ``nranks`` was found: ``rank lines``, ``argument``, ``size/count``, ``busbw/algbw``, or the split
    (``rank lines: 16 ranks in 8 group(s), rank 0's of 2``, ``NCCL_TESTS_SPLIT_MASK=0x7: ...``)."""
    nccl_version: str | None
    nccl_tests_version: str | None
    header: NcclTestsHeader
    avg_busbw_gbps: float | None
    """The ``# Avg bus bandwidth`` line (mean over all rows, both placements); None when absent."""
    out_of_bounds: int | None
    """The ``# Out of bounds values : N`` count; None when the summary is missing."""
    oob_failed: bool
    min_bw_failed: bool
    """``Avg bus bandwidth : X FAILED`` (``NCCL_TESTS_MIN_BW`` was set and not reached)."""
    complete: bool
    """The summary lines were seen: the run printed its table to the end."""
    errors: tuple[str, ...] = ()
    """Failure lines the run printed (``Test timeout``, ``Test NCCL failure``, ``# error: ...``)."""
    warnings: tuple[str, ...] = ()
    """What the parser noticed: elisions by an author, inferred values, inconsistencies."""
    source: str = "<text>"
    world_nranks: int | None = None
    """Ranks launched, every split group included (the rank lines' count); None when unknown."""
    groups: int | None = None
    """Communicators measured at once: 1 without ``NCCL_TESTS_SPLIT``; None when unknown."""
    process_shape: str | None = None
    """``PxTxG``: processes x threads per process x GPUs per thread (``1x1x8`` for ``-g 8``, ``8x1x1`` for one
    process per GPU); None when unknown."""
    time_over_ranks: str | None = None
    """How a row's time combines the ranks' times: ``max``, ``mean``, ``min``, ``rank0`` (``-a``); None: unknown."""
    backend: str = "nccl"
    """The collective library: ``nccl``, or ``rccl`` for rccl-tests (its ``# rccl-tests version`` header)."""
    line_prefixes: LinePrefixes | None = None
    """The launcher/collector prefixes stripped from its lines (``[1,0]<stdout>:``, ``0:``, ...); None: none."""
    geometry: Geometry = UNKNOWN_GEOMETRY
    """The job's shape read from every clue of the output, each field with its evidence (:mod:`.geometry_clues`,
    docs/formats.md "Geometry"); ``nranks`` and ``nnodes`` above are its values."""
    op_evidence: str = "as passed"
    """Where ``op`` was read: the ``Collective test starting`` line, the binary's command line, NCCL INFO lines,
    the columns, the file name, or the caller."""

    @property
    def failed(self) -> bool:
        """The run itself reported a failure: wrong values, out-of-bounds, a missed bandwidth floor, an error."""
        return (self.oob_failed or self.min_bw_failed or bool(self.errors)
                or any(not r.ok for r in self.records))

    @property
    def sizes(self) -> tuple[int, ...]:
        seen: dict[int, None] = {}
        for r in self.records:
            seen.setdefault(r.size_bytes, None)
        return tuple(seen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op, "nranks": self.nranks, "nnodes": self.nnodes, "hosts": list(self.hosts),
            "nranks_source": self.nranks_source, "ranks_elided": self.ranks_elided,
            "nccl_version": self.nccl_version, "nccl_tests_version": self.nccl_tests_version,
            "header": {f: getattr(self.header, f) for f in NcclTestsHeader.__slots__},
            "avg_busbw_gbps": self.avg_busbw_gbps, "out_of_bounds": self.out_of_bounds,
            "oob_failed": self.oob_failed, "min_bw_failed": self.min_bw_failed, "complete": self.complete,
            "errors": list(self.errors), "warnings": list(self.warnings), "source": self.source,
            "records": len(self.records), "sizes": len(self.sizes), "failed": self.failed,
            "world_nranks": self.world_nranks, "groups": self.groups, "process_shape": self.process_shape,
            "time_over_ranks": self.time_over_ranks, "backend": self.backend,
            "line_prefixes": self.line_prefixes.to_dict() if self.line_prefixes is not None else None,
            "geometry": self.geometry.to_json(), "op_evidence": self.op_evidence,
        }


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE -> ``"2.26.5"``: major*10000+minor*100+patch since 2.9, major*1000+minor*100+patch before."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def op_from_binary(name: str) -> str | None:
    """``all_reduce_perf``, ``/x/build/all_gather_perf_mpi`` -> the collective; None when not a known one."""
    base = name.rsplit("/", 1)[-1].strip()
    return OP_BY_NCCL_TESTS_BINARY.get(base.removesuffix("_mpi"))




class Row(NamedTuple):
    """One size and placement as printed; :func:`build_run` makes a Measurement of it."""

    size_bytes: int
    elements: int | None
    """The count column (elements per rank); ``count`` would shadow tuple.count."""
    dtype: str
    redop: str | None
    root: int | None
    in_place: bool
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    error: float | None
    timestamp: str | None
    repeat: int
    """Earlier rows of the same (size, type, redop, root): the ``-N`` cycle."""


def valid_times(times: Sequence[float]) -> bool:
    """Whether every time is a number >= 0 and none is NaN (their sum is NaN when one is); False for a value that
    is not a number. The parser checks each block's times with it, and the records' builder again."""
    try:
        total = sum(times)
        return min(times, default=0.0) >= 0 and total == total
    except TypeError:
        return False


class Placement(NamedTuple):
    """One placement (out-of-place or in-place) of a :class:`Block`: its columns, one item per row."""

    in_place: bool
    time_us: list[float]
    algbw_gbps: list[float]
    busbw_gbps: list[float]
    wrong: list[int | None]
    error: list[float | None]


class Block(NamedTuple):
    """Consecutive rows of a text table, column by column (the ingest hot path: no tuple per row).

    Each list holds one item per row; ``placements`` holds the timing columns in output order (out-of-place
    first). ``uniform`` names the columns (``root``, ``timestamp``, ``wrong``, ``error``) that hold one value in
    every row and placement, so that their value is set once per block, not once per record.
    """

    size_bytes: list[int]
    elements: list[int | None]
    dtype: list[str]
    redop: list[str | None]
    root: list[int | None]
    timestamp: list[str | None]
    repeat: list[int]
    placements: tuple[Placement, ...]
    uniform: frozenset[str]

    def rows(self) -> Iterator[Row]:
        """The block's Rows in output order (per row, each placement)."""
        for i in range(len(self.size_bytes)):
            for p in self.placements:
                yield Row(self.size_bytes[i], self.elements[i], self.dtype[i], self.redop[i], self.root[i],
                          p.in_place, p.time_us[i], p.algbw_gbps[i], p.busbw_gbps[i], p.wrong[i], p.error[i],
                          self.timestamp[i], self.repeat[i])


class TableRows:
    """The rows of a text table as the :class:`Block` s the parser converted; iterates as Rows."""

    __slots__ = ("blocks", "_len")

    def __init__(self, blocks: list[Block]) -> None:
        self.blocks = blocks
        self._len = sum(len(b.size_bytes) * len(b.placements) for b in blocks)

    def __iter__(self) -> Iterator[Row]:
        for b in self.blocks:
            yield from b.rows()

    def __len__(self) -> int:
        return self._len
