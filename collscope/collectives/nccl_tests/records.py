"""What an nccl-tests run printed, as records: the run, its devices, its header, and its Measurements.

The ``-J`` JSON reader (:mod:`.json`) makes one :class:`Row` per size and placement; the text parser
(:mod:`.parse`) hands over the same rows column by column, as :class:`Block` s in a :class:`TableRows`. Both
go to :func:`build_run`, which infers what the output does not say outright (number of ranks, per-size ok
flags) and makes one :class:`~collscope.collectives.record.Measurement` of each row. Formats and facts:
``shared/reference/nccl-facts.md`` section 4.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple

import msgspec

from collscope.collectives.record import OPS, Measurement, Settings, busbw_factor
from collscope.errors import ParseError

__all__ = ["NcclTestsRun", "NcclTestsDevice", "NcclTestsHeader", "Row", "Block", "Placement", "TableRows",
           "build_run",
           "op_from_binary", "nccl_version_from_code", "DTYPE_BYTES"]

# nccl-tests src/common.cu test_typenames (current and pre-NCCL-2.10 names) -> bytes per element.
DTYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2, "bfloat16": 2,
               "int32": 4, "uint32": 4, "int": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8}


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
    nnodes: int | None
    """Distinct hosts in the rank list; None when the list is absent or elided."""
    hosts: tuple[str, ...]
    """Hosts in rank order as far as the rank list shows them."""
    devices: tuple[NcclTestsDevice, ...]
    ranks_elided: bool
    """The rank list was shortened (``...``), so ``devices``/``hosts`` are partial."""
    nranks_source: str
    """How ``nranks`` was found: ``rank lines``, ``argument``, ``size/count``, ``busbw/algbw``."""
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
        }


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE -> ``"2.26.5"``: major*10000+minor*100+patch since 2.9, major*1000+minor*100+patch before."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def op_from_binary(name: str) -> str | None:
    """``all_reduce_perf``, ``/x/build/all_gather_perf_mpi`` -> the collective; None when not a known one."""
    base = name.rsplit("/", 1)[-1].strip()
    for suffix in ("_perf_mpi", "_perf"):
        if base.endswith(suffix):
            op = base[: -len(suffix)]
            return op if op in OPS else None
    return None


# ---------------------------------------------------------------------------------------------------------
# Rows: what one line of the table (or one JSON result) says, before the run's values are known.


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


_FAST = frozenset({"root", "timestamp", "wrong", "error"})
_BUSBW = attrgetter("busbw_gbps")


def gpu_model(devices: Sequence[NcclTestsDevice], warnings: list[str]) -> str | None:
    """The GPU model of the device lines (``NVIDIA H100 80GB HBM3``); several models are named together, warned."""
    names = list(dict.fromkeys(d.name.strip() for d in devices if d.name.strip()))
    if len(names) > 1:
        warnings.append(f"the ranks run on different GPU models: {', '.join(names)}")
        return " + ".join(names)
    return names[0] if names else None


ERROR_LIMIT = 1e-2
"""An old-format ``error`` (largest deviation per size) at or above this is a wrong result, not rounding: rounding
shows up to ~1e-3 (half precision; float ~1e-7, e.g. ``4e-07``), corrupted data ~1e+00 (nccl-facts.md 4.3)."""


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


def _records(rows: Iterable[tuple[Any, ...]], template: Measurement, all_bad: bool,
             unchecked: bool) -> list[Measurement]:
    """One Measurement per row: the run's values from ``template``, the row's own values replaced.

    ``unchecked``: the run did not check values (``validation: 0``), so a printed ``#wrong`` of 0 means nothing.
    Each record is validated as it is made (``msgspec.structs.replace`` runs ``__post_init__``).
    """
    make = msgspec.structs.replace
    stamp = template.timestamp
    if unchecked:
        return [make(template, size_bytes=size, count=count, dtype=dtype, redop=redop, root=root, in_place=in_place,
                     time_us=time_us, algbw_gbps=alg, busbw_gbps=bus, wrong=None, error=error, ok=not all_bad,
                     repeat=rep, timestamp=stamp if ts is None else ts)
                for size, count, dtype, redop, root, in_place, time_us, alg, bus, _, error, ts, rep in rows]
    return [make(template, size_bytes=size, count=count, dtype=dtype, redop=redop, root=root, in_place=in_place,
                 time_us=time_us, algbw_gbps=alg, busbw_gbps=bus, wrong=wrong, error=error,
                 ok=not (all_bad or wrong), repeat=rep, timestamp=stamp if ts is None else ts)
            for size, count, dtype, redop, root, in_place, time_us, alg, bus, wrong, error, ts, rep in rows]


def _placement_records(b: Block, p: Placement, template: Measurement, all_bad: bool,
                       unchecked: bool) -> list[Measurement]:
    """The records of one placement of a block; the columns uniform over the block are set once, in a template."""
    if not _FAST <= b.uniform:
        return _records(zip(b.size_bytes, b.elements, b.dtype, b.redop, b.root, repeat(p.in_place, len(b.size_bytes)),
                            p.time_us, p.algbw_gbps, p.busbw_gbps, p.wrong, p.error, b.timestamp, b.repeat,
                            strict=True),
                        template, all_bad, unchecked)
    make = msgspec.structs.replace
    wrong = None if unchecked else p.wrong[0]
    ts = b.timestamp[0]
    same = make(template, root=b.root[0], in_place=p.in_place, wrong=wrong, error=p.error[0],
                ok=not (all_bad or wrong), timestamp=template.timestamp if ts is None else ts)
    return [make(same, size_bytes=size, count=count, dtype=dtype, redop=redop, time_us=time_us, algbw_gbps=alg,
                 busbw_gbps=bus, repeat=rep)
            for size, count, dtype, redop, time_us, alg, bus, rep in zip(
                b.size_bytes, b.elements, b.dtype, b.redop, p.time_us, p.algbw_gbps, p.busbw_gbps, b.repeat,
                strict=True)]


def _in_place_records(oop: list[Measurement], p: Placement) -> list[Measurement]:
    """The in-place records of a block whose columns other than the timings are uniform over both placements:
    each row's out-of-place record with the in-place timings (4 fields replaced instead of 8, each validated)."""
    make = msgspec.structs.replace
    return [make(r, in_place=True, time_us=time_us, algbw_gbps=alg, busbw_gbps=bus)
            for r, time_us, alg, bus in zip(oop, p.time_us, p.algbw_gbps, p.busbw_gbps, strict=True)]


def _table_records(table: TableRows, template: Measurement, all_bad: bool, unchecked: bool) -> list[Measurement]:
    """The records of every block, in output order (a row's out-of-place record, then its in-place one)."""
    out: list[Measurement] = []
    for b in table.blocks:
        p0, p1 = b.placements[0], b.placements[-1]
        if (len(b.placements) == 2 and _FAST <= b.uniform and not p0.in_place and p0.wrong[0] == p1.wrong[0]
                and p0.error[0] is None and p1.error[0] is None):
            first = _placement_records(b, p0, template, all_bad, unchecked)
            placements = [first, _in_place_records(first, p1)]
        else:
            placements = [_placement_records(b, p, template, all_bad, unchecked) for p in b.placements]
        if len(placements) == 2:  # interleave
            rows = placements[0] + placements[1]
            rows[0::2], rows[1::2] = placements[0], placements[1]
            out += rows
        else:
            out += placements[0]
    return out


# ---------------------------------------------------------------------------------------------------------
# nranks inference


def _half_ulp(value: float) -> float:
    """Half the last printed digit of a bandwidth (nccl-tests prints ``%6.2f``, then ``%6.1f``, ``%6.0f``)."""
    if value < 999.995:
        return 0.005
    if value < 9999.95:
        return 0.05
    if value < 999999.5:
        return 0.5
    return value * 0.5


def _n_bounds(op: str, lo: float, hi: float) -> tuple[float, float] | None:
    """The range of n for which busbw_factor(op, n) lies in [lo, hi]; None when the factor does not depend on n."""
    if op == "all_reduce":  # f = 2(n-1)/n  =>  n = 2 / (2 - f)
        scale = 2.0
    elif busbw_factor(op, 2) == 1.0:
        return None
    else:  # f = (n-1)/n  =>  n = 1 / (1 - f)
        scale = 1.0
    n_lo = scale / (scale - max(lo, 0.0)) if lo < scale else math.inf
    n_hi = scale / (scale - hi) if hi < scale else math.inf
    return n_lo, n_hi


def nranks_from_bandwidths(op: str, rows: Iterable[Row]) -> tuple[int, int | None] | None:
    """Solve busbw = algbw x factor(n) for n over all rows, printing precision included.

    Returns the lowest and highest whole n consistent with every row (highest None: unbounded), or None when
    no row constrains n (the factor does not depend on n, or every algbw is 0).
    """
    lo_n, hi_n = 1.0, math.inf
    constrained = False
    for d in rows:
        alg, bus = d.algbw_gbps, d.busbw_gbps
        if not alg > 0 or not bus >= 0 or math.isinf(alg) or math.isinf(bus):
            continue
        da, db = _half_ulp(alg), _half_ulp(bus)
        if alg - da <= 0:
            continue
        bounds = _n_bounds(op, max(bus - db, 0.0) / (alg + da), (bus + db) / (alg - da))
        if bounds is None:
            return None
        constrained = True
        lo_n, hi_n = max(lo_n, bounds[0]), min(hi_n, bounds[1])
    if not constrained or lo_n == math.inf:
        return None
    first = math.ceil(lo_n - 1e-9)
    last = None if hi_n == math.inf else math.floor(hi_n + 1e-9)
    return (first, last) if last is None or first <= last else (first, -1)


def _nranks_from_counts(op: str, rows: Iterable[Row]) -> int | None:
    """all_gather / reduce_scatter print the per-rank count and the total size: n = size / (count x type size)."""
    if op not in ("all_gather", "reduce_scatter"):
        return None
    found: set[int] = set()
    for d in rows:
        width = DTYPE_BYTES.get(d.dtype)
        if not width or not d.elements or d.elements < 0:
            continue
        per_rank = d.elements * width
        if d.size_bytes % per_rank:
            return None
        found.add(d.size_bytes // per_rank)
    return found.pop() if len(found) == 1 else None


def _infer_nranks(op: str, devices: Sequence[NcclTestsDevice], ranks_elided: bool,
                  rows: Sequence[Row] | TableRows,
                  explicit: int | None, source: str, warnings: list[str]) -> tuple[int, str]:
    listed = None
    if devices and not ranks_elided:
        group0 = devices[0].group
        listed = sum(1 for d in devices if d.group == group0)
        if group0 is not None and listed != len(devices):
            warnings.append(f"NCCL_TESTS_SPLIT groups: {len(devices)} ranks in groups of {listed}; "
                            "bandwidths are per group")
    if explicit is not None:
        if explicit < 1:
            raise ParseError(source, None, "nranks >= 1", found=str(explicit))
        if listed is not None and listed != explicit:
            raise ParseError(source, None, f"{explicit} ranks (as passed)", found=f"{listed} ranks in the rank list")
        return explicit, "argument"
    if listed is not None:
        return listed, "rank lines"
    floor = max((d.rank for d in devices), default=-1) + 1
    counted = _nranks_from_counts(op, rows)
    if counted is not None and counted >= max(floor, 1):
        return counted, "size/count"
    span = nranks_from_bandwidths(op, rows)
    if span is not None:
        first, last = max(span[0], floor, 1), span[1]
        if first == last:
            warnings.append(f"nranks {first} inferred from busbw/algbw (no complete rank list)")
            return first, "busbw/algbw"
        if last is None:
            why = f"busbw/algbw only says {first} or more"
        elif first < last:
            why = f"busbw/algbw allows {first}..{last}"
        else:
            why = "busbw/algbw is inconsistent"
    else:
        why = "busbw/algbw does not depend on it" if rows and busbw_factor(op, 2) == 1.0 else "no usable rows"
    shown = f"; the rank list shows {floor} before an elision" if ranks_elided else ""
    raise ParseError(source, None, f"the number of ranks (no complete rank list; {why}{shown}); pass nranks "
                     "(--nranks N)")


# ---------------------------------------------------------------------------------------------------------


def build_run(*, op: str | None, rows: Sequence[Row] | TableRows, devices: Sequence[NcclTestsDevice],
              ranks_elided: bool, header: NcclTestsHeader, nccl_version: str | None, nccl_tests_version: str | None,
              avg_busbw_gbps: float | None, out_of_bounds: int | None, oob_failed: bool, min_bw_failed: bool,
              complete: bool, errors: Sequence[str], warnings: list[str], source: str, nranks: int | None = None,
              settings: dict[str, str] | None = None, timestamp: str | None = None,
              iters: int | None = None) -> NcclTestsRun:
    """The run of these rows (raises ParseError when nranks is unknowable or a record is invalid)."""
    if op is None:
        raise ParseError(source, None, "the collective (no 'Collective test starting' line and no *_perf command "
                         "line); pass op (--op all_reduce|all_gather|...)")
    n, how = _infer_nranks(op, devices, ranks_elided, rows, nranks, source, warnings)
    hosts: tuple[str, ...] = tuple(dict.fromkeys(d.host for d in devices))
    nnodes = len(hosts) if devices and not ranks_elided else None
    gpu = gpu_model(devices, warnings)

    all_bad = oob_failed and not any(d.wrong for d in rows)  # no per-size count: every record is suspect
    by_error = all_bad and any(d.error is not None and d.error >= ERROR_LIMIT for d in rows)
    if by_error:  # old formats: the float error column says which sizes failed
        all_bad = False
        warnings.append(f"out-of-bounds FAILED: sizes whose error column is >= {ERROR_LIMIT:g} are marked not ok "
                        "(older nccl-tests print the largest deviation per size, not a count)")
    elif oob_failed and not any(d.wrong is not None for d in rows):
        warnings.append("out-of-bounds FAILED without per-size #wrong counts: every record is marked not ok")
    try:
        template = Measurement(engine="nccl-tests", backend="nccl", op=op, nranks=n, nnodes=nnodes, size_bytes=0,
                               count=None, dtype="", redop=None, root=None, in_place=False, time_us=0.0,
                               algbw_gbps=0.0, busbw_gbps=0.0, iters=iters if iters is not None else header.iters,
                               warmup=header.warmup_iters, settings=Settings(settings or {}), hosts=hosts,
                               gpu=gpu, nccl_version=nccl_version, engine_version=nccl_tests_version, source=source,
                               timestamp=timestamp)
        unchecked = header.validation == 0
        records = (_table_records(rows, template, all_bad, unchecked) if isinstance(rows, TableRows)
                   else _records(rows, template, all_bad, unchecked))
    except ValueError as exc:
        raise ParseError(source, None, "values a Measurement record can hold", found=str(exc)) from None
    if by_error:
        records = [msgspec.structs.replace(r, ok=False) if r.error is not None and r.error >= ERROR_LIMIT else r
                   for r in records]

    if avg_busbw_gbps is not None and records and not ranks_elided:
        mean = sum(map(_BUSBW, records)) / len(records)
        if abs(mean - avg_busbw_gbps) > max(0.02 * abs(avg_busbw_gbps), 0.01):
            warnings.append(f"Avg bus bandwidth {avg_busbw_gbps:g} differs from the mean of the rows shown "
                            f"({mean:.4g}): rows missing or edited")
    if not records:
        warnings.append("no data rows: the output ends before the results table")
    return NcclTestsRun(op=op, records=tuple(records), nranks=n, nnodes=nnodes, hosts=hosts, devices=tuple(devices),
                        ranks_elided=ranks_elided, nranks_source=how, nccl_version=nccl_version,
                        nccl_tests_version=nccl_tests_version, header=header, avg_busbw_gbps=avg_busbw_gbps,
                        out_of_bounds=out_of_bounds, oob_failed=oob_failed, min_bw_failed=min_bw_failed,
                        complete=complete, errors=tuple(errors), warnings=tuple(dict.fromkeys(warnings)),
                        source=source)
