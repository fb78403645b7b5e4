"""Parse nccl-tests output (text of any generation, or the ``-J`` JSON file) into an :class:`NcclTestsRun`.

Formats (``shared/reference/nccl-facts.md`` section 4.3, nccl-tests ``src/util.cu``/``src/common.cu``):
headers with or without ``#`` (log viewers strip it), with or without ``Group``/version lines; data columns
named by the header line (``size count type [redop] [root]`` then per placement ``time|cputime algbw busbw
[#wrong|error]`` with optional ``i_*`` per-iteration columns and a trailing ``timestamp``), mapped by name.
Lines that are not nccl-tests output (NCCL INFO, MPI, SSH, X11, kubexec, script banners) are skipped; launcher and
log-collector prefixes (``[1,0]<stdout>:``, ``srun -l``'s ``0:``, ``host:``, timestamps) are stripped first
(:mod:`.prefixes`). rccl-tests output (``# rccl-tests version``, ``RCCL version``) reads the same, backend ``rccl``.
Several runs pasted into one text: :func:`.runs.parse_nccl_tests_runs`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from collscope.collectives.nccl_tests.build import build_run
from collscope.collectives.nccl_tests.cut_rows import hold_cut_row, rejoin_cut_row, unjoined_cut_row
from collscope.collectives.nccl_tests.launch import (
    average_from_argv,
    registration_from_argv,
    separate_processes,
)
from collscope.collectives.nccl_tests.lines import ParseState, read_other_line
from collscope.collectives.nccl_tests.prefixes import strip_line_prefixes
from collscope.collectives.nccl_tests.rccl_results import looks_like_rccl_tests_results, parse_rccl_tests_results
from collscope.collectives.nccl_tests.reading import one_break, parsing
from collscope.collectives.nccl_tests.records import (
    DTYPE_BYTES,
    NcclTestsHeader,
    NcclTestsRun,
    TableRows,
    nccl_version_from_code,
)
from collscope.collectives.nccl_tests.run_settings import run_settings
from collscope.collectives.nccl_tests.text import (
    OutOfRange,
    convert_block,
    convert_columns,
    layout_from_row,
)
from collscope.collectives.record import OPS
from collscope.errors import ParseError

if TYPE_CHECKING:
    from collscope.collectives.nccl_tests.fixed import FixedColumns

__all__ = ["parse_nccl_tests", "looks_like_nccl_tests", "NcclTestsRun", "nccl_version_from_code", "parse_text"]

_ROW_SHAPE = re.compile(r"^[ \t]*\d+[ \t]+\d+[ \t]+(?:" + "|".join(DTYPE_BYTES) + r")(?:[ \t]+\S+){7,}[ \t]*$", re.M)
_SNIFF = ("Avg bus bandwidth", "Out of bounds values", "nThread ", "Collective test starting", "algbw")


def looks_like_nccl_tests(text: str) -> bool:
    """Whether ``text`` is nccl-tests output: its table header or summary lines, its ``-J`` JSON document, or an
    rccl-tests results file (``-Z json|csv``)."""
    if looks_like_rccl_tests_results(text):
        return True
    head = text[:65536].lstrip()
    if head.startswith("{"):
        return '"results"' in head and ('"config"' in head or '"nccl_version"' in head)
    if "algbw" in head and "busbw" in head and re.search(r"\bsize\s+count\s+type\b", head):
        return True
    return sum(1 for key in _SNIFF if key in text) >= 2 or _ROW_SHAPE.search(head) is not None


def _table_row(st: ParseState, parts: list[str], lineno: int) -> None:
    """One line starting with digits, on its own: a first headerless row, an odd row, or noise."""
    lay = st.layout
    if lay is None:
        lay = layout_from_row(parts)
        if lay is None:
            return  # digits at the start of a noise line, no table yet
        st.layout = lay
        st.warnings.append(f"line {lineno}: no column header; columns inferred from the row shape: {lay.described}")
    n = len(parts)
    if st.cut_row is not None and n < lay.ntokens:
        parts = rejoin_cut_row(st, parts, lineno, lay.ntokens)
        n = len(parts)
    try:
        if n == lay.ntokens:
            convert_block(lay, parts, 1, st.seen, st.blocks)
            return
        if n == lay.ntokens - 1 and lay.i_redop >= 0 and not parts[lay.i_redop].isalpha():
            # Old alltoall: the redop field is printed empty.
            convert_block(lay, parts[:lay.i_redop] + ["none"] + parts[lay.i_redop:], 1, st.seen, st.blocks)
            return
    except OutOfRange as exc:
        raise ParseError(st.source, lineno, str(exc), found=" ".join(parts)) from None
    except (ValueError, IndexError, OverflowError):
        pass
    if hold_cut_row(st, parts, lineno):
        return
    if st.is_last(lineno):
        st.warnings.append(f"line {lineno}: last row incomplete (output cut off); ignored")
        return
    raise ParseError(st.source, lineno, f"a data row with the {lay.ntokens} columns '{lay.described}'",
                     found=" ".join(parts))


def _line(st: ParseState, line: str, lineno: int) -> None:
    parts = line.split()
    if not parts:
        return
    if parts[0].isdigit() or (st.cut_row is not None and _is_number(parts[0])):  # a cut row's rest starts at a time
        _table_row(st, parts, lineno)
    else:
        read_other_line(st, line, lineno)


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _op_from_file_name(source: str, warnings: list[str]) -> str | None:
    """``logs/all_gather_perf-16n.txt`` -> all_gather, when the name holds exactly one ``<op>_perf``."""
    name = source.replace("\\", "/").rsplit("/", 1)[-1]
    ops = {op for m in re.finditer(r"([a-z_]+?)_perf", name) for op in [m[1].lstrip("_")] if op in OPS}
    if len(ops) != 1:
        return None
    op = ops.pop()
    warnings.append(f"op {op} taken from the file name (the output does not name its binary)")
    return op


_ROWS = re.compile(r"^[ \t]*[0-9].*(?:\n[ \t]*[0-9].*){0,4095}", re.M)
"""Up to 4096 consecutive lines that start with a digit: table rows, converted as one block. (``.`` is any
character but ``\n``, as ``[^\n]`` is, and costs less: 41 against 60 ms over 50 MB.)"""


def _lines(st: ParseState, chunk: str, lineno: int) -> None:
    """Each line of ``chunk`` (whole lines, the first numbered ``lineno``) on its own."""
    for i, line in enumerate(chunk.split("\n")):
        _line(st, line, lineno + i)


def _block(st: ParseState, start: int, end: int, lineno: int) -> int:
    """The lines ``st.text[start:end]``, consecutive lines starting with a digit, the first numbered ``lineno``:
    converted at once when they line up with the table's columns, else line by line (which places an error on
    its line). Returns their number."""
    text, first, n = st.text, start, 0
    while st.layout is None:  # no header yet: a first row without one sets the columns
        stop = text.find("\n", first, end)
        _line(st, text[first:end] if stop < 0 else text[first:stop], lineno + n)
        n += 1
        if stop < 0:
            return n
        first = stop + 1
    cols = _fixed_columns(st, first, end)
    nlines = text.count("\n", first, end) + 1 if cols is None else cols.nrows
    try:
        if cols is None:
            convert_block(st.layout, text[first:end].split(), nlines, st.seen, st.blocks)
        else:
            convert_columns(st.layout, cols, nlines, st.seen, st.blocks)
    except (ValueError, IndexError, OverflowError):
        _lines(st, text[first:end], lineno + n)
    return n + nlines


FIXED_MIN_ROWS = 1024
"""Blocks of at least this many rows are read by :mod:`.fixed` (numpy) when they are fixed-width; smaller ones
are split and converted in pure Python, which costs less for them (per block the two cost the same at about
700 rows; at 1550 rows the fixed-width reading costs 14% less; docs/performance.md)."""
FIXED_MIN_TEXT = 24_000_000
"""... and only in inputs of at least this many characters unless numpy is already imported: importing it (80..110
ms) costs more than the fixed-width reading saves (about 4..7 ms per MB) on a smaller input."""


def _fixed_columns(st: ParseState, start: int, end: int) -> FixedColumns | None:
    """The fixed-width columns of the large block ``st.text[start:end]`` (None: the pure path reads it)."""
    width = st.text.find("\n", start, end) - start
    if width <= 0 or (end - start + 1) // (width + 1) < FIXED_MIN_ROWS:  # as many rows, if it is fixed-width
        return None
    if len(st.text) < FIXED_MIN_TEXT and "numpy" not in sys.modules:
        return None
    from collscope.collectives.nccl_tests.fixed import fixed_columns

    assert st.layout is not None
    return fixed_columns(st.text, start, end, st.layout)


def parse_text(text: str, source: str, op: str | None, nranks: int | None, env: Mapping[str, str] | None,
                argv: Sequence[str] | None, nnodes: int | None = None,
                nvl_domain: int | None = None, first_lineno: int = 1) -> NcclTestsRun:
    """The run of nccl-tests text (not JSON) whose first line is line ``first_lineno`` of its input; the arguments
    as :func:`parse_nccl_tests` takes them. Call it inside :func:`.reading.parsing`."""
    text, prefixes = strip_line_prefixes(one_break(text))  # lines kept one for one: their numbers hold
    st = ParseState(source, text, first_lineno)
    if prefixes is not None:
        st.warnings.append(prefixes.describe())
    # Runs of lines that start with a digit are found by one regex over the text (no Python work per row line)
    # and converted a block at a time; the lines between them are handled one by one.
    pos, lineno = 0, first_lineno
    for m in _ROWS.finditer(text):
        start, end = m.span()
        if start > pos:
            gap = text[pos:start - 1]  # whole lines, without the break before the block
            _lines(st, gap, lineno)
            lineno += gap.count("\n") + 1
        lineno += _block(st, start, end, lineno)
        pos = end + 1
    if pos < len(text):
        _lines(st, text[pos:], lineno)
    unjoined_cut_row(st)

    if not st.blocks and st.layout is None and not st.params and not st.devices and not st.complete:
        raise ParseError(source, None, "nccl-tests output (a results table, a '# nThread' header or the "
                         "'Out of bounds values' summary)")
    separate = separate_processes(st.devices, st.headers)
    if separate is not None:
        raise ParseError(source, None, separate[0], found=separate[1])
    found = st.op_started or st.op_concluded or st.op_command
    op_evidence: str | None = "--op (as passed)"
    if op is not None:
        if op not in OPS:
            raise ParseError(source, None, f"a collective among {', '.join(OPS)}", found=op)
        if found is not None and found[0] != op:
            raise ParseError(source, found[1], f"output of {op} (as passed)", found=f"{found[0]}_perf")
    elif found is not None:
        op = found[0]
        op_evidence = (f"'Collective test starting: {op}_perf' (line {found[1]})" if found is st.op_started
                       else f"'Collective test concluded: {op}_perf' (line {found[1]})" if found is st.op_concluded
                       else f"{op}_perf on line {found[1]}")
    else:
        op = _op_from_file_name(source, st.warnings)
        op_evidence = "the file name" if op is not None else None
    if st.layout is not None and st.layout.cputime:
        st.warnings.append("times are CPU time per op (-C 1), not latency")
    if st.blocks and not st.complete:
        st.warnings.append("incomplete run: the output ends before its summary ('# Out of bounds values', "
                           "'# Avg bus bandwidth'; cut by its author, or the run stopped); the rows shown are kept")
    header = NcclTestsHeader(**st.params)
    settings, said = run_settings(st.clue_lines)
    st.warnings.extend(said)
    return build_run(op=op, rows=TableRows(st.blocks), devices=st.devices, ranks_elided=st.ranks_elided,
                     header=header, nccl_version=st.nccl_version, nccl_tests_version=st.tests_version,
                     avg_busbw_gbps=st.avg, out_of_bounds=st.oob, oob_failed=st.oob_failed,
                     min_bw_failed=st.min_bw_failed, complete=st.complete, errors=st.errors, warnings=st.warnings,
                     source=source, nranks=nranks, env=env, settings=settings or None,
                     average=average_from_argv(argv if argv is not None else st.command or ()),
                     registration=registration_from_argv(argv if argv is not None else st.command or ()),
                     nnodes=nnodes, nvl_domain=nvl_domain, log_lines=st.clue_lines, op_evidence=op_evidence,
                     ranks_cut_at_end=st.ranks_elided and st.elided_after == len(st.devices), backend=st.backend,
                     line_prefixes=prefixes)


def parse_nccl_tests(text: str, source: str = "<text>", op: str | None = None, *, nranks: int | None = None,
                     env: Mapping[str, str] | None = None, argv: Sequence[str] | None = None,
                     nnodes: int | None = None, nvl_domain: int | None = None) -> NcclTestsRun:
    """Parse nccl-tests stdout (any generation), its ``-J`` JSON file, or an rccl-tests results file (``-Z
    json|csv``: :mod:`.rccl_results`); raises only :class:`ParseError`.

    ``op`` names the collective when the output does not (no ``Collective test starting`` line and no
    ``*_perf`` command line); ``nranks`` is the number of ranks launched, when the caller knows it or neither
    the rank list nor the bandwidths tell it (with ``NCCL_TESTS_SPLIT`` every group together: the records get
    rank 0's group's size, the n of the printed busbw). ``env`` is the environment the run had (its
    ``NCCL_TESTS_SPLIT_MASK``/``NCCL_TESTS_SPLIT``, checked against the rank lines' groups) and ``argv`` its
    command line (its ``-a``: how times were combined over ranks), when the caller ran it; else a command line
    in the output is read for ``-a``, and the JSON file's own ``args`` and ``env``. ``nranks``, ``nnodes`` and
    ``nvl_domain`` override what the output's clues say (``run.geometry``, with a note where one disagrees),
    except that a complete rank list that does not show the ``nranks`` passed is refused: it is what ran.

    Several processes that each printed their own header and ``Rank 0`` (a build without MPI, a PMI that does
    not match nccl-tests' MPI) are a ParseError saying so and how to fix the launch, never one run.
    """
    if not isinstance(text, str):
        raise ParseError(source, None, "text (str)", found=type(text).__name__)
    if looks_like_rccl_tests_results(text):  # rccl-tests' -Z json|csv file: a JSON list, objects per line, a CSV
        return parse_rccl_tests_results(text, source=source, op=op, nranks=nranks, nnodes=nnodes,
                                        nvl_domain=nvl_domain)
    if text.lstrip().startswith("{"):
        from collscope.collectives.nccl_tests.json import parse_nccl_tests_json

        return parse_nccl_tests_json(text, source=source, op=op, nranks=nranks, env=env, argv=argv, nnodes=nnodes,
                                     nvl_domain=nvl_domain)
    with parsing(source):
        return parse_text(text, source, op, nranks, env, argv, nnodes, nvl_domain)

