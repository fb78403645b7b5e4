"""How many ranks the bandwidths of an nccl-tests run are for.

In order: the rank lines (with ``NCCL_TESTS_SPLIT`` groups, rank 0's group: :mod:`.launch`), the number passed,
size/count (all_gather, reduce_scatter print the per-rank count), then busbw/algbw solved for n with the
printing precision of both columns (nccl-facts.md section 4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from collscope.collectives.nccl_tests.launch import SEPARATE_FIX, RankGroups, groups_from_env, rank_groups
from collscope.collectives.nccl_tests.records import DTYPE_BYTES, NcclTestsDevice, NcclTestsHeader, Row, TableRows
from collscope.collectives.record import busbw_factor
from collscope.errors import ParseError
from collscope.vocab.ops import SPLIT_OPS

__all__ = ["infer_nranks", "nranks_from_bandwidths", "nranks_from_counts", "RankCount"]


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
    f2 = busbw_factor(op, 2)
    if f2 == busbw_factor(op, 3):  # a constant factor (broadcast, reduce, sendrecv)
        return None
    # f = scale (n-1)/n  =>  n = scale / (scale - f): scale 2 for all_reduce, 1 for (n-1)/n (the op table's factor)
    scale = 2 * f2
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


def nranks_from_counts(op: str, rows: Iterable[Row]) -> int | None:
    """The split ops (all_gather, reduce_scatter, alltoall, gather, scatter: the op table's ``size_is_total``) print
    the total size and the call's per-rank count (nccl-tests ``src/common.cu`` setupArgs: the count column is
    ``paramCount``, ``(count/nranks)`` rounded, in each ``*GetCollByteCount``): n = size / (count x type size)."""
    if op not in SPLIT_OPS:
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


class RankCount(NamedTuple):
    """How many ranks the printed bandwidths are for, how that was found, and the launch around them."""

    nranks: int
    source: str
    world: int | None
    """Ranks launched, every ``NCCL_TESTS_SPLIT`` group included; None when unknown."""
    groups: int | None
    """Communicators measured at once; None when unknown."""


def _split_groups(devices: Sequence[NcclTestsDevice], listed: int | None, explicit: int | None,
                  header: NcclTestsHeader, env: Mapping[str, str], source: str) -> RankGroups | None:
    """The groups of the run: the rank lines' Group column, checked against the split the caller ran with."""
    from_lines = rank_groups(devices) if listed is not None else None
    world = listed if listed is not None else explicit
    per_process = (header.nthreads or 1) * (header.ngpus or 1)
    from_env = groups_from_env(env, world, per_process) if world else None
    if from_env is not None and from_lines is not None and (from_env.size, from_env.groups) != (
            from_lines.size, from_lines.groups):
        raise ParseError(source, None, f"the groups of the split the run was given ({from_env.evidence}; "
                         "rank lines that show others mean the variable did not reach nccl-tests, or its build has "
                         "no MPI, which the split needs)", found=from_lines.evidence)
    return from_lines or from_env


def infer_nranks(op: str, devices: Sequence[NcclTestsDevice], ranks_elided: bool,
                 rows: Sequence[Row] | TableRows, explicit: int | None, source: str, warnings: list[str], *,
                 header: NcclTestsHeader | None = None, env: Mapping[str, str] | None = None) -> RankCount:
    """The n of the printed busbw: rank 0's communicator (its ``NCCL_TESTS_SPLIT`` group when the run was split).

    ``explicit`` is the number of ranks the caller launched (a sweep point's ``nranks``): with a split it is the
    world, every group included, and is checked against the rank lines' count; ``env`` the environment the run
    had (``NCCL_TESTS_SPLIT_MASK``/``NCCL_TESTS_SPLIT``), checked against the rank lines' Group column.
    """
    if explicit is not None and explicit < 1:
        raise ParseError(source, None, "nranks >= 1", found=str(explicit))
    listed = len(devices) if devices and not ranks_elided else None
    groups = _split_groups(devices, listed, explicit, header or NcclTestsHeader(), env or {}, source)
    split = groups is not None and groups.groups > 1
    if listed is not None:
        size = groups.size if groups is not None else listed
        if split:
            assert groups is not None
            unequal = "" if len(set(groups.sizes)) == 1 else (
                f" (groups of {', '.join(map(str, groups.sizes))}: nccl-tests prints rank 0's group's numbers)")
            warnings.append(f"NCCL_TESTS_SPLIT groups: {listed} ranks in {groups.groups} groups of {size}{unequal}; "
                            "bandwidths are per group, the time over every group")
            span = nranks_from_bandwidths(op, rows)
            if span is not None and not (span[0] <= size and (span[1] is None or size <= span[1])):
                warnings.append(f"busbw/algbw does not fit groups of {size} ranks ({span[0]}..{span[1]})")
        if explicit is not None and explicit not in (size, listed):
            shown = f" in {groups.groups} groups of {size}" if split and groups is not None else ""
            one = len({(d.host, d.pid) for d in devices}) == 1 and explicit > listed
            hint = (f" (one process's ranks only: if the launch started {explicit // listed or 1} processes, each "
                    f"ran alone; {SEPARATE_FIX})") if one else ""
            raise ParseError(source, None, f"{explicit} ranks (as passed){hint}",
                             found=f"{listed} ranks in the rank list{shown}")
        if split and groups is not None:
            return RankCount(size, groups.evidence, listed, groups.groups)
        return RankCount(size, "argument" if explicit is not None else "rank lines", listed, 1)
    if explicit is not None:
        if split and groups is not None:
            return RankCount(groups.size, groups.evidence, explicit, groups.groups)
        return RankCount(explicit, "argument", explicit if groups is None else groups.world,
                         None if groups is None else groups.groups)
    floor = max((d.rank for d in devices), default=-1) + 1
    counted = nranks_from_counts(op, rows)
    if counted is not None and counted >= max(floor, 1):
        return RankCount(counted, "size/count", None, None)
    span = nranks_from_bandwidths(op, rows)
    if span is not None:
        first, last = max(span[0], floor, 1), span[1]
        if first == last:
            warnings.append(f"nranks {first} inferred from busbw/algbw (no complete rank list)")
            return RankCount(first, "busbw/algbw", None, None)
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
