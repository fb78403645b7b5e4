"""How many ranks an nccl-tests run had, when its output has no complete rank list.

In order: the number passed, the rank lines, size/count (all_gather, reduce_scatter print the per-rank count),
then busbw/algbw solved for n with the printing precision of both columns (nccl-facts.md section 4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from collscope.collectives.nccl_tests.records import DTYPE_BYTES, NcclTestsDevice, Row, TableRows
from collscope.collectives.record import busbw_factor
from collscope.errors import ParseError

__all__ = ["infer_nranks", "nranks_from_bandwidths"]


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


def infer_nranks(op: str, devices: Sequence[NcclTestsDevice], ranks_elided: bool,
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
