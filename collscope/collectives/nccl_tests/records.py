"""What an nccl-tests run printed, as records: the run, its devices, its header, and its Measurements.

The text parser (:mod:`.nccl_tests_parse`) and the ``-J`` JSON reader (:mod:`.nccl_tests_json`) both
fill one :class:`Draft` per size and placement with what the row says and hand them to :func:`build_run`,
which infers what the output does not say outright (number of ranks, per-size ok flags, repeats) and
completes each draft into a :class:`~.record.Measurement`. Formats and facts:
``shared/reference/nccl-facts.md`` section 4.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collscope.collectives.record import OPS, Measurement, busbw_factor
from collscope.errors import ParseError

__all__ = ["NcclTestsRun", "NcclTestsDevice", "NcclTestsHeader", "Draft", "new_draft", "build_run",
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
# Drafts: records under construction.
#
# A frozen dataclass __init__ sets each of Measurement's 28 fields through object.__setattr__ (~4 us per
# record), which alone caps ingest near 15 MB/s. A reader therefore fills a Draft, a plain class with the
# same slot layout, with the row's values; build_run adds the run's values and gives it Measurement's class,
# which CPython allows for identical __slots__. The result is an ordinary Measurement (equal, hashable,
# to_dict/from_dict alike). _FAST is checked once at import against the real constructor; where the twin
# does not fit (another Python, or a Measurement that validates in __post_init__) drafts are copied into
# Measurement(...) instead.

_FIELDS: tuple[str, ...] = Measurement.__slots__
_ROW_FIELDS = ("size_bytes", "count", "dtype", "redop", "root", "in_place", "time_us", "algbw_gbps", "busbw_gbps",
               "wrong", "error", "timestamp")


class Draft:
    """A Measurement being filled: the row fields first (see :func:`new_draft`), the run's in build_run."""

    __slots__ = _FIELDS


def new_draft(size_bytes: int, count: int | None, dtype: str, redop: str | None, root: int | None, in_place: bool,
              time_us: float, algbw_gbps: float, busbw_gbps: float, wrong: int | None, error: float | None,
              timestamp: str | None = None, repeat: int = 0) -> Draft:
    """A draft with the fields one row of the table gives; ``repeat`` counts earlier rows of the same key."""
    d = Draft()
    d.size_bytes = size_bytes  # type: ignore[attr-defined]
    d.count = count  # type: ignore[attr-defined]
    d.dtype = dtype  # type: ignore[attr-defined]
    d.redop = redop  # type: ignore[attr-defined]
    d.root = root  # type: ignore[attr-defined]
    d.in_place = in_place  # type: ignore[attr-defined]
    d.time_us = time_us  # type: ignore[attr-defined]
    d.algbw_gbps = algbw_gbps  # type: ignore[attr-defined]
    d.busbw_gbps = busbw_gbps  # type: ignore[attr-defined]
    d.wrong = wrong  # type: ignore[attr-defined]
    d.error = error  # type: ignore[attr-defined]
    d.timestamp = timestamp  # type: ignore[attr-defined]
    d.repeat = repeat  # type: ignore[attr-defined]
    return d


def _finish(drafts: Sequence[Any], run: dict[str, Any], all_bad: bool, fast: bool,
            unchecked: bool = False) -> list[Measurement]:
    """Complete the drafts with the run's values (in place) and make them Measurements.

    ``unchecked``: the run did not check values (``validation: 0``), so a printed ``#wrong`` of 0 means nothing.
    """
    engine, backend, op, nranks, nnodes = run["engine"], run["backend"], run["op"], run["nranks"], run["nnodes"]
    iters, warmup, settings, hosts = run["iters"], run["warmup"], run["settings"], run["hosts"]
    nccl_version, engine_version = run["nccl_version"], run["engine_version"]
    source, stamp = run["source"], run["timestamp"]
    for d in drafts:
        d.engine = engine
        d.backend = backend
        d.op = op
        d.nranks = nranks
        d.nnodes = nnodes
        if unchecked:
            d.wrong = None
        d.ok = not (all_bad or d.wrong)
        d.iters = iters
        d.warmup = warmup
        d.settings = dict(settings) if settings else {}
        d.point_id = None
        d.sweep_id = None
        d.hosts = hosts
        d.nccl_version = nccl_version
        d.engine_version = engine_version
        d.source = source
        if d.timestamp is None:
            d.timestamp = stamp
        if fast:
            d.__class__ = Measurement
    if fast:
        return list(drafts)
    return [Measurement(**{name: getattr(d, name) for name in _FIELDS}) for d in drafts]


def _fast_fits() -> bool:
    if getattr(Measurement, "__post_init__", None) is not None:
        return False
    run: dict[str, Any] = dict(engine="nccl-tests", backend="nccl", op="all_reduce", nranks=2, nnodes=1, iters=20,
                               warmup=1, settings={"NCCL_ALGO": "Ring"}, hosts=("h",), nccl_version="2.19.3",
                               engine_version="2.13.8", source="check", timestamp="t")
    try:
        fast = _finish([new_draft(8, 2, "float", "sum", None, True, 1.5, 2.0, 3.0, 0, None)], run, False, True)
    except TypeError:
        return False
    slow = _finish([new_draft(8, 2, "float", "sum", None, True, 1.5, 2.0, 3.0, 0, None)], run, False, False)
    return type(fast[0]) is Measurement and fast == slow


_FAST = _fast_fits()


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


def nranks_from_bandwidths(op: str, drafts: Sequence[Any]) -> tuple[int, int | None] | None:
    """Solve busbw = algbw x factor(n) for n over all rows, printing precision included.

    Returns the lowest and highest whole n consistent with every row (highest None: unbounded), or None when
    no row constrains n (the factor does not depend on n, or every algbw is 0).
    """
    lo_n, hi_n = 1.0, math.inf
    constrained = False
    for d in drafts:
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


def _nranks_from_counts(op: str, drafts: Sequence[Any]) -> int | None:
    """all_gather / reduce_scatter print the per-rank count and the total size: n = size / (count x type size)."""
    if op not in ("all_gather", "reduce_scatter"):
        return None
    found: set[int] = set()
    for d in drafts:
        width = DTYPE_BYTES.get(d.dtype)
        if not width or not d.count or d.count < 0:
            continue
        per_rank = d.count * width
        if d.size_bytes % per_rank:
            return None
        found.add(d.size_bytes // per_rank)
    return found.pop() if len(found) == 1 else None


def _infer_nranks(op: str, devices: Sequence[NcclTestsDevice], ranks_elided: bool, drafts: Sequence[Any],
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
    counted = _nranks_from_counts(op, drafts)
    if counted is not None and counted >= max(floor, 1):
        return counted, "size/count"
    span = nranks_from_bandwidths(op, drafts)
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
        why = "busbw/algbw does not depend on it" if drafts and busbw_factor(op, 2) == 1.0 else "no usable rows"
    shown = f"; the rank list shows {floor} before an elision" if ranks_elided else ""
    raise ParseError(source, None, f"the number of ranks (no complete rank list; {why}{shown}); pass nranks "
                     "(--nranks N)")


# ---------------------------------------------------------------------------------------------------------


def build_run(*, op: str | None, drafts: Sequence[Draft], devices: Sequence[NcclTestsDevice], ranks_elided: bool,
              header: NcclTestsHeader, nccl_version: str | None, nccl_tests_version: str | None,
              avg_busbw_gbps: float | None, out_of_bounds: int | None, oob_failed: bool, min_bw_failed: bool,
              complete: bool, errors: Sequence[str], warnings: list[str], source: str, nranks: int | None = None,
              settings: dict[str, str] | None = None, timestamp: str | None = None,
              iters: int | None = None) -> NcclTestsRun:
    """Complete the drafts into an :class:`NcclTestsRun` (raises ParseError when nranks is unknowable).

    The drafts are consumed: they become the run's records.
    """
    if op is None:
        raise ParseError(source, None, "the collective (no 'Collective test starting' line and no *_perf command "
                         "line); pass op (--op all_reduce|all_gather|...)")
    rows: Sequence[Any] = drafts
    n, how = _infer_nranks(op, devices, ranks_elided, rows, nranks, source, warnings)
    hosts: tuple[str, ...] = tuple(dict.fromkeys(d.host for d in devices))
    nnodes = len(hosts) if devices and not ranks_elided else None

    all_bad = oob_failed and not any(d.wrong for d in rows)  # no per-size count: every record is suspect
    if oob_failed and not any(d.wrong is not None for d in rows):
        warnings.append("out-of-bounds FAILED without per-size #wrong counts: every record is marked not ok")
    run = dict(engine="nccl-tests", backend="nccl", op=op, nranks=n, nnodes=nnodes,
               iters=iters if iters is not None else header.iters, warmup=header.warmup_iters,
               settings=settings or {}, hosts=hosts, nccl_version=nccl_version, engine_version=nccl_tests_version,
               source=source, timestamp=timestamp)
    records = _finish(rows, run, all_bad, _FAST, unchecked=header.validation == 0)

    if avg_busbw_gbps is not None and records and not ranks_elided:
        mean = sum(r.busbw_gbps for r in records) / len(records)
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
