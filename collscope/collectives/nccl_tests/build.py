"""The records of an nccl-tests run: :func:`build_run` makes one Measurement per row, with the run's values.

Both readers (:mod:`.parse` for text, :mod:`.json` for ``-J``) end here. Records are made from a template
holding the run's values, one ``msgspec.structs.replace`` per record; the columns a text block holds once for
all its rows are set once. Rows are validated by each record's ``__post_init__``; the blocks of a text table
a column at a time (:func:`_check_columns`), their records made inside
:func:`~collscope.collectives.record.columns_checked`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgspec

from collscope.collectives.nccl_tests.geometry_clues import (
    env_clues,
    log_clues,
    op_from_columns,
    op_from_log,
    rank_clues,
    rank_list_complete,
    row_clues,
    rows_say_excerpt,
)
from collscope.collectives.nccl_tests.launch import process_shape, symmetric_kernel_note, time_over_ranks
from collscope.collectives.nccl_tests.nranks import RankCount, infer_nranks
from collscope.collectives.nccl_tests.prefixes import LinePrefixes, prefix_clues
from collscope.collectives.nccl_tests.records import (
    Block,
    NcclTestsDevice,
    NcclTestsHeader,
    NcclTestsRun,
    Placement,
    Row,
    TableRows,
    valid_times,
)
from collscope.collectives.record import Measurement, Settings, columns_checked
from collscope.errors import ParseError
from collscope.geometry import Geometry, GeometryEvidence

__all__ = ["build_run", "gpu_model", "ERROR_LIMIT"]

_FAST = frozenset({"root", "timestamp", "wrong", "error"})
_BUSBW = attrgetter("busbw_gbps")


def gpu_model(devices: Sequence[NcclTestsDevice], warnings: list[str]) -> str | None:
    """The GPU model of the device lines (``NVIDIA H100 80GB HBM3``); several models are named together, warned."""
    names = list(dict.fromkeys(d.name.strip() for d in devices if d.name.strip()))
    if len(names) > 1:
        warnings.append(f"the ranks run on different GPU models: {', '.join(names)}")
        return " + ".join(names)
    return names[0] if names else None


def _geometry(op: str, rows: Sequence[Row] | TableRows, devices: Sequence[NcclTestsDevice], ranks_elided: bool,
              cut_at_end: bool, header: NcclTestsHeader, log_lines: Sequence[tuple[int, str]],
              launch_env: Mapping[str, str] | None, explicit: int | None, overrides: Mapping[str, int | None],
              env: Mapping[str, str], source: str, warnings: list[str],
              listed_in: str | None, line_prefixes: LinePrefixes | None = None,
              clues: Callable[[GeometryEvidence], None] | None = None) -> tuple[Geometry, RankCount]:
    """The run's geometry from every clue (:mod:`.geometry_clues`) and the rank count of its bandwidths.

    A complete rank list is what ran: a number of ranks passed (the ranks launched, every ``NCCL_TESTS_SPLIT``
    group included) that it does not show is refused, as it always was (:func:`~.nranks.infer_nranks`); without
    one, the number passed wins over the clues, with a note where one disagrees.
    """
    for name, value in overrides.items():
        if value is not None and value < 1:
            raise ParseError(source, None, f"{name} >= 1", found=str(value))
    ev = GeometryEvidence(source)
    complete = not ranks_elided and rank_list_complete(devices)
    if complete and explicit is not None and explicit != len(devices) and rows_say_excerpt(
            op, rows, len(devices), explicit):
        warnings.append(f"the rank list shows {len(devices)} ranks without an elision marker, but the rows fit "
                        f"{explicit}, as passed: the list is taken as an excerpt")
        complete, ranks_elided = False, True
    count = None
    if complete or explicit is not None:
        count = infer_nranks(op, devices, not complete, rows, explicit, source, warnings, header=header, env=env)
    split = count is not None and count.groups is not None and count.groups > 1
    if complete:
        assert count is not None
        listed = "the rank lines" if listed_in is None else listed_in
        says = ((f"{len(devices)} rank lines (Rank 0..{len(devices) - 1})" if listed_in is None
                 else f"{len(devices)} ranks in {listed_in}") if count.source in ("rank lines", "argument")
                else count.source)
        rank_clues(ev, devices, complete=(count.nranks, says), cut_at_end=False, listed_in=listed)
    else:
        rank_clues(ev, devices, complete=None, cut_at_end=cut_at_end)
    log_clues(ev, log_lines, header, warnings, launch=not split)
    if line_prefixes is not None and not split:  # launcher labels and hosts: lower bounds (.prefixes)
        prefix_clues(line_prefixes, ev, nthreads=header.nthreads, ngpus=header.ngpus)
    if launch_env and not split:
        env_clues(ev, launch_env, header)
    row_clues(ev, op, rows, warnings, known=count.nranks if complete and count is not None else None)
    if clues is not None:  # a reader's own clues (the fields of an rccl-tests results file)
        clues(ev)
    geometry = ev.resolve({**overrides, "nranks": count.nranks if count is not None and not complete else None})
    n = geometry.value("nranks")
    if n is None:
        shown = f"; the rank list shows {max(d.rank for d in devices) + 1} or more" if devices else ""
        raise ParseError(source, None, f"the number of ranks ({geometry.nranks.describe()}{shown}); pass nranks "
                         "(--nranks N)")
    if count is None:
        count = RankCount(n, "; ".join(geometry.nranks.evidence), None, None)
    return geometry, count


ERROR_LIMIT = 1e-2
"""An old-format ``error`` (largest deviation per size) at or above this is a wrong result, not rounding: rounding
shows up to ~1e-3 (half precision; float ~1e-7, e.g. ``4e-07``), corrupted data ~1e+00 (nccl-facts.md 4.3)."""


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


def _check_columns(table: TableRows) -> None:
    """What ``Measurement.__post_init__`` checks of the fields a block's records take from it, a column at a time:
    every size an integer >= 0, every time a number >= 0 (not NaN). ValueError as the record's check words it."""
    for b in table.blocks:
        try:
            good = min(b.size_bytes, default=0) >= 0  # a value that is not a number: TypeError, as in the record
        except TypeError:
            good = False
        if not good:
            size = next(v for v in b.size_bytes if not (isinstance(v, int) and v >= 0))
            raise ValueError(f"Measurement field size_bytes={size!r}: expected an integer >= 0")
        for p in b.placements:
            if not valid_times(p.time_us):
                time_us = next(v for v in p.time_us if not (isinstance(v, (int, float)) and v >= 0))
                raise ValueError(f"Measurement field time_us={time_us!r}: expected a number >= 0")


def _table_records(table: TableRows, template: Measurement, all_bad: bool, unchecked: bool) -> list[Measurement]:
    """The records of every block, in output order (a row's out-of-place record, then its in-place one).

    The blocks' columns are checked first, so the records are not checked one by one (0.19 s of a 1.24 s
    ingest of 50 MB); every other field is the template's, a record checked when it was made.
    """
    _check_columns(table)
    with columns_checked():
        return _blocks_records(table, template, all_bad, unchecked)


def _blocks_records(table: TableRows, template: Measurement, all_bad: bool, unchecked: bool) -> list[Measurement]:
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


def build_run(*, op: str | None, rows: Sequence[Row] | TableRows, devices: Sequence[NcclTestsDevice],
              ranks_elided: bool, header: NcclTestsHeader, nccl_version: str | None, nccl_tests_version: str | None,
              avg_busbw_gbps: float | None, out_of_bounds: int | None, oob_failed: bool, min_bw_failed: bool,
              complete: bool, errors: Sequence[str], warnings: list[str], source: str, nranks: int | None = None,
              settings: dict[str, str] | None = None, timestamp: str | None = None,
              iters: int | None = None, env: Mapping[str, str] | None = None,
              average: int | None = None, backend: str = "nccl", nnodes: int | None = None,
              nvl_domain: int | None = None, log_lines: Sequence[tuple[int, str]] = (),
              ranks_cut_at_end: bool = False, launch_env: Mapping[str, str] | None = None,
              op_evidence: str | None = None, line_prefixes: LinePrefixes | None = None,
              clues: Callable[[GeometryEvidence], None] | None = None,
              registration: int | None = None) -> NcclTestsRun:
    """The run of these rows (raises ParseError when nranks is unknowable or a record is invalid).

    ``nranks``: the ranks the caller launched (every ``NCCL_TESTS_SPLIT`` group); ``env``: the environment the
    run had, for its split (``settings`` too); ``average``: its ``-a`` value when the caller knows it;
    ``backend``: the collective library (``rccl`` for rccl-tests). ``nnodes``, ``nvl_domain``: the user's
    overrides of the geometry; ``log_lines``: the lines that are not nccl-tests' own (NCCL INFO, launch command
    lines: :func:`.geometry_clues.is_clue_line`) with their numbers; ``ranks_cut_at_end``: an author's elision
    follows the last rank line; ``launch_env``: the run's whole environment (a ``-J`` file's), for the
    launcher's variables; ``op_evidence``: where ``op`` was read; ``line_prefixes``: what the launcher prefixes
    stripped from the lines said (:mod:`.prefixes`), geometry clues too; ``clues``: adds the reader's own
    geometry clues (an rccl-tests results file's ``ranks`` fields: :mod:`.rccl_results`) to the others;
    ``registration``: its ``-R`` value when the command line is known (``-R 2``: a note on symmetric kernels).
    """
    if op is None:
        found = op_from_log(log_lines)
        if found is not None:
            op, op_evidence = found[0], f"NCCL INFO lines name {found[0]} (line {found[1]})"
        else:
            inferred = op_from_columns(rows if isinstance(rows, Sequence) else list(rows), source)
            if inferred is not None:
                op, op_evidence = inferred
    if op is None:
        raise ParseError(source, None, "the collective (no 'Collective test starting' line, no *_perf command "
                         "line, no NCCL INFO line naming it, and columns that fit several); pass op "
                         "(--op all_reduce|all_gather|...)")
    geometry, count = _geometry(op, rows, devices, ranks_elided, ranks_cut_at_end, header, log_lines, launch_env,
                                nranks, {"nnodes": nnodes, "nvl_domain": nvl_domain},
                                {**(settings or {}), **(env or {})}, source, warnings,
                                None if launch_env is None else "config.devices", line_prefixes, clues)
    n, how = count.nranks, count.source
    hosts: tuple[str, ...] = tuple(dict.fromkeys(d.host for d in devices))
    nnodes = geometry.value("nnodes")
    ranks_elided = ranks_elided or (bool(devices) and not rank_list_complete(devices))
    gpu = gpu_model(devices, warnings)
    shape, nprocs = process_shape(devices, ranks_elided, header, count.world)
    over_ranks = time_over_ranks(average, nprocs, header.nthreads)

    all_bad = oob_failed and not any(d.wrong for d in rows)  # no per-size count: every record is suspect
    by_error = all_bad and any(d.error is not None and d.error >= ERROR_LIMIT for d in rows)
    if by_error:  # old formats: the float error column says which sizes failed
        all_bad = False
        warnings.append(f"out-of-bounds FAILED: sizes whose error column is >= {ERROR_LIMIT:g} are marked not ok "
                        "(older nccl-tests print the largest deviation per size, not a count)")
    elif oob_failed and not any(d.wrong is not None for d in rows):
        warnings.append("out-of-bounds FAILED without per-size #wrong counts: every record is marked not ok")
    try:
        template = Measurement(engine="nccl-tests", backend=backend, op=op, nranks=n, nnodes=nnodes, size_bytes=0,
                               count=None, dtype="", redop=None, root=None, in_place=False, time_us=1.0,
                               algbw_gbps=0.0, busbw_gbps=0.0, iters=iters if iters is not None else header.iters,
                               warmup=header.warmup_iters, settings=Settings(settings or {}), hosts=hosts,
                               gpu=gpu, nccl_version=nccl_version, engine_version=nccl_tests_version, source=source,
                               timestamp=timestamp, time_over_ranks=over_ranks, process_shape=shape)
        unchecked = header.validation == 0
        records = (_table_records(rows, template, all_bad, unchecked) if isinstance(rows, TableRows)
                   else _records(rows, template, all_bad, unchecked))
    except ValueError as exc:
        raise ParseError(source, None, "values a Measurement record can hold", found=str(exc)) from None
    if by_error:
        records = [msgspec.structs.replace(r, ok=False) if r.error is not None and r.error >= ERROR_LIMIT else r
                   for r in records]

    if avg_busbw_gbps is not None and records and not ranks_elided:
        total = (sum(sum(p.busbw_gbps) for b in rows.blocks for p in b.placements) if isinstance(rows, TableRows)
                 else sum(map(_BUSBW, records)))  # from the columns: a sum over 10^6 records costs 30 ms
        mean = total / len(records)
        if abs(mean - avg_busbw_gbps) > max(0.02 * abs(avg_busbw_gbps), 0.01):
            warnings.append(f"Avg bus bandwidth {avg_busbw_gbps:g} differs from the mean of the rows shown "
                            f"({mean:.4g}): rows missing or edited")
    if not records:
        warnings.append("no data rows: the output ends before the results table")
    symmetric = symmetric_kernel_note(op, registration, nccl_version, backend)
    if symmetric:
        warnings.append(symmetric)
    return NcclTestsRun(op=op, records=tuple(records), nranks=n, nnodes=nnodes, hosts=hosts, devices=tuple(devices),
                        ranks_elided=ranks_elided, nranks_source=how, nccl_version=nccl_version,
                        nccl_tests_version=nccl_tests_version, header=header, avg_busbw_gbps=avg_busbw_gbps,
                        out_of_bounds=out_of_bounds, oob_failed=oob_failed, min_bw_failed=min_bw_failed,
                        complete=complete, errors=tuple(errors), warnings=tuple(dict.fromkeys(warnings)),
                        source=source, world_nranks=count.world, groups=count.groups, process_shape=shape,
                        time_over_ranks=over_ranks, backend=backend, geometry=geometry,
                        op_evidence=op_evidence or "as passed", line_prefixes=line_prefixes)
