"""Parse nccl-tests output (text of any generation, or the ``-J`` JSON file) into an :class:`NcclTestsRun`.

Formats (``shared/reference/nccl-facts.md`` section 4.3, nccl-tests ``src/util.cu``/``src/common.cu``):
headers with or without ``#`` (log viewers strip it), with or without ``Group``/version lines; data columns
named by the header line (``size count type [redop] [root]`` then per placement ``time|cputime algbw busbw
[#wrong|error]`` with optional ``i_*`` per-iteration columns and a trailing ``timestamp``), mapped by name.
Lines that are not nccl-tests output (NCCL INFO, MPI, SSH, X11, kubexec, script banners) are skipped.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from ..errors import ParseError
from .nccl_tests_records import (
    DTYPE_BYTES,
    Draft,
    NcclTestsDevice,
    NcclTestsHeader,
    NcclTestsRun,
    build_run,
    nccl_version_from_code,
    op_from_binary,
)
from .record import OPS

__all__ = ["parse_nccl_tests", "looks_like_nccl_tests", "NcclTestsRun", "nccl_version_from_code"]

_VERSION = re.compile(r"nccl-tests version (\S+)(?: \([0-9a-fA-F]+\))?(?: nccl-headers=(\d+))?(?: nccl-library=(\d+))?")
_STARTING = re.compile(r"Collective test (starting|concluded): (\S+)")
_PARAM = re.compile(r"(nThread|nGpus|minBytes|maxBytes|step:|warmup iters:|agg iters:|iters:|validation:|graph:"
                    r"|unalign:)\s*(-?\d+)(?:\((\w+)\))?")
_RANK = re.compile(r"Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]"
                   r"\s*(.*?)\s*$")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_OOB = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_FAILURE = re.compile(r"Test (?:timeout|NCCL failure|CUDA failure|failure)\b|^# error: ")
_BINARY = re.compile(r"(?:^|[\s/=])([a-z_]+_perf(?:_mpi)?)(?=\s|$|['\";])")
_ELISION = re.compile(r"^(?:\.{3,}|…|\[\.\.\.\]|truncated\b.*|\(?(?:\.\.\.|…) ?(?:snip|omitted|truncated)?.*)$",
                      re.IGNORECASE)
_PARAM_KEYS = {"nThread": "nthreads", "nGpus": "ngpus", "minBytes": "min_bytes", "maxBytes": "max_bytes",
               "warmup iters:": "warmup_iters", "iters:": "iters", "agg iters:": "agg_iters",
               "validation:": "validation", "graph:": "graph", "unalign:": "unalign"}
_CHECK_NAMES = {"#wrong": "wrong", "wrong": "wrong", "error": "error", "#error": "error"}
_ROW_SHAPE = re.compile(r"^[ \t]*\d+[ \t]+\d+[ \t]+(?:" + "|".join(DTYPE_BYTES) + r")(?:[ \t]+\S+){7,}[ \t]*$", re.M)
_SNIFF = ("Avg bus bandwidth", "Out of bounds values", "nThread ", "Collective test starting", "algbw")


def looks_like_nccl_tests(text: str) -> bool:
    """Whether ``text`` is nccl-tests output: its table header or summary lines, or its ``-J`` JSON document."""
    head = text[:65536].lstrip()
    if head.startswith("{"):
        return '"results"' in head and ('"config"' in head or '"nccl_version"' in head)
    if "algbw" in head and "busbw" in head and re.search(r"\bsize\s+count\s+type\b", head):
        return True
    return sum(1 for key in _SNIFF if key in text) >= 2 or _ROW_SHAPE.search(head) is not None


class _Layout(NamedTuple):
    ntokens: int
    i_count: int
    i_type: int
    i_redop: int
    i_root: int
    groups: tuple[tuple[int, int, int, int, str], ...]
    """Per placement: indexes of time, algbw, busbw, check (-1: none) and the check kind (wrong|error)."""
    timestamp: bool
    cputime: bool
    described: str


def _layout_from_header(names: list[str], source: str, lineno: int) -> _Layout:
    index = {"count": -1, "type": -1, "redop": -1, "root": -1}
    groups: list[tuple[int, int, int, int, str]] = []
    cputime = False
    for i, name in enumerate(names):
        if name in index and index[name] < 0 and not groups:
            index[name] = i
        elif name in ("time", "cputime"):
            cputime = cputime or name == "cputime"
            if names[i + 1: i + 3] != ["algbw", "busbw"]:
                raise ParseError(source, lineno, "'algbw busbw' after 'time' in the column header",
                                 found=" ".join(names))
            kind = _CHECK_NAMES.get(names[i + 3], "") if i + 3 < len(names) else ""
            groups.append((i, i + 1, i + 2, i + 3 if kind else -1, kind))
    if not groups or index["type"] < 0 or len(groups) > 2:
        raise ParseError(source, lineno, "a column header 'size count type ... time algbw busbw ...'",
                         found=" ".join(names))
    timestamp = names[-1] == "timestamp"
    return _Layout(len(names) + (1 if timestamp else 0), index["count"], index["type"], index["redop"],
                   index["root"], tuple(groups), timestamp, cputime, " ".join(names))


def _layout_from_row(parts: list[str]) -> _Layout | None:
    """Columns of a table pasted without its header, from the shape of one row (8 timing columns)."""
    lead = len(parts) - 8
    if lead not in (3, 4, 5) or not (parts[0].isdigit() and parts[1].isdigit()) or parts[2] not in DTYPE_BYTES:
        return None
    names = ["size", "count", "type"]
    if lead == 4:
        names.append("root" if parts[3].lstrip("-").isdigit() else "redop")
    elif lead == 5:
        names += ["redop", "root"]
    check = "error" if any(c in parts[lead + 3] for c in ".e") else "#wrong"
    names += ["time", "algbw", "busbw", check] * 2
    return _layout_from_header(names, "<row>", 0)


def _check(tok: str, kind: str) -> tuple[int | None, float | None]:
    if kind == "wrong":
        if tok.isdigit():
            return int(tok), None
        return (None if tok == "N/A" else int(float(tok))), None  # %6g prints large counts as 1.2e+06
    return None, (None if tok == "N/A" else float(tok))


RowParser = Callable[[list[str], list[Draft]], None]


def _row_parser(lay: _Layout, seen: dict[tuple[int, str, str | None, int | None], int]) -> RowParser:
    """A function that appends one Draft per placement of a data row (all or nothing) to a list.

    ``seen`` counts rows per (size, type, redop, root) across the whole run, for ``repeat`` (``-N`` cycles).
    Drafts are filled inline (not through new_draft): this is the ingest hot path.
    """
    i_count, i_type, i_redop, i_root, stamped = lay.i_count, lay.i_type, lay.i_redop, lay.i_root, lay.timestamp
    (t0, a0, b0, c0, k0) = lay.groups[0]
    (t1, a1, b1, c1, k1) = lay.groups[1] if len(lay.groups) > 1 else (-1, -1, -1, -1, "")
    single = len(lay.groups) == 1  # trace replays print the in-place group only
    wrong0, wrong1 = k0 == "wrong", k1 == "wrong"

    def parse(parts: list[str], out: list[Draft]) -> None:
        size = int(parts[0])
        count = int(parts[i_count]) if i_count >= 0 else None
        redop = parts[i_redop] if i_redop >= 0 else None
        if redop == "none":
            redop = None
        root = None
        if i_root >= 0:
            tok = parts[i_root]
            if tok != "-1":
                root = int(tok)
                if root < 0:
                    root = None
        stamp = " ".join(parts[-2:]) if stamped else None
        dtype = parts[i_type]
        w0: int | None = None
        e0: float | None = None
        if c0 >= 0:
            tok = parts[c0]
            if wrong0 and tok == "0":
                w0 = 0
            else:
                w0, e0 = _check(tok, k0)
        time0, alg0, bus0 = float(parts[t0]), float(parts[a0]), float(parts[b0])
        if not single:
            w1: int | None = None
            e1: float | None = None
            if c1 >= 0:
                tok = parts[c1]
                if wrong1 and tok == "0":
                    w1 = 0
                else:
                    w1, e1 = _check(tok, k1)
            time1, alg1, bus1 = float(parts[t1]), float(parts[a1]), float(parts[b1])
        key = (size, dtype, redop, root)
        repeat = seen.get(key, 0)
        seen[key] = repeat + 1
        d: Any = Draft()
        d.size_bytes = size
        d.count = count
        d.dtype = dtype
        d.redop = redop
        d.root = root
        d.in_place = single
        d.time_us = time0
        d.algbw_gbps = alg0
        d.busbw_gbps = bus0
        d.wrong = w0
        d.error = e0
        d.timestamp = stamp
        d.repeat = repeat
        out.append(d)
        if single:
            return
        d = Draft()
        d.size_bytes = size
        d.count = count
        d.dtype = dtype
        d.redop = redop
        d.root = root
        d.in_place = True
        d.time_us = time1
        d.algbw_gbps = alg1
        d.busbw_gbps = bus1
        d.wrong = w1
        d.error = e1
        d.timestamp = stamp
        d.repeat = repeat
        out.append(d)

    return parse


class _State:
    def __init__(self, source: str) -> None:
        self.source = source
        self.op_started: tuple[str, int] | None = None
        self.op_command: tuple[str, int] | None = None
        self.params: dict[str, int] = {}
        self.devices: list[NcclTestsDevice] = []
        self.ranks_elided = False
        self.nccl_version: str | None = None
        self.tests_version: str | None = None
        self.avg: float | None = None
        self.oob: int | None = None
        self.oob_failed = False
        self.min_bw_failed = False
        self.complete = False
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.drafts: list[Draft] = []
        self.layout: _Layout | None = None
        self.row_parser: RowParser | None = None
        self.seen: dict[tuple[int, str, str | None, int | None], int] = {}


def _other_line(st: _State, line: str, lineno: int) -> None:
    """Everything that is not a data row: header lines, summary lines, noise."""
    body = line.strip().lstrip("#").strip()
    if not body:
        return
    if body.startswith("size ") or body.startswith("size\t"):
        names = body.split()
        if "algbw" in names:
            lay = _layout_from_header(names, st.source, lineno)
            if st.layout is not None and st.drafts and lay != st.layout:
                raise ParseError(st.source, lineno, "one results table per run (a second, different header "
                                 "follows rows); split the file per run", found=body)
            st.layout = lay
            st.row_parser = _row_parser(lay, st.seen)
        return
    if body.startswith("(B)") or body.startswith("out-of-place"):
        return
    if body.startswith("Rank"):
        m = _RANK.match(body)
        if m:
            st.devices.append(NcclTestsDevice(rank=int(m[1]), group=None if m[2] is None else int(m[2]),
                                              pid=int(m[3]), host=m[4], device=int(m[5]), bus_id=m[6], name=m[7]))
        return
    if body.startswith("nThread"):
        if st.drafts:
            raise ParseError(st.source, lineno, "one nccl-tests run per input (a second run starts here); split "
                             "the file per run", found=body)
        for m in _PARAM.finditer(body):
            key, value, unit = m[1], int(m[2]), m[3]
            if key == "step:":
                st.params["step_factor" if unit == "factor" else "step_bytes"] = value
            else:
                st.params[_PARAM_KEYS[key]] = value
        return
    if body.startswith("nccl-tests version"):
        m = _VERSION.match(body)
        if m:
            st.tests_version = m[1]
            if m[3]:
                st.nccl_version = nccl_version_from_code(int(m[3]))
        return
    if body.startswith("Collective test"):
        m = _STARTING.match(body)
        if m:
            op = op_from_binary(m[2])
            if m[1] == "starting":
                if st.drafts:
                    raise ParseError(st.source, lineno, "one nccl-tests run per input (a second run starts "
                                     "here); split the file per run", found=body)
                if op:
                    st.op_started = (op, lineno)
        return
    if body.startswith("Out of bounds values"):
        m = _OOB.match(body)
        if m:
            st.oob = int(m[1])
            st.oob_failed = m[2] == "FAILED" or (m[2] is None and st.oob > 0)
            st.complete = True
        return
    if body.startswith("Avg bus bandwidth"):
        m = _AVG.match(body)
        if m:
            try:
                st.avg = float(m[1])
            except ValueError:
                st.warnings.append(f"line {lineno}: unreadable Avg bus bandwidth {m[1]!r}")
            st.min_bw_failed = m[2] == "FAILED"
            st.complete = True
        return
    if _ELISION.match(body):
        if st.layout is None and st.devices:
            st.ranks_elided = True
            st.warnings.append(f"line {lineno}: rank list elided by the author ({body[:40]})")
        else:
            st.warnings.append(f"line {lineno}: output elided by the author ({body[:40]})")
        return
    if "NCCL version" in line and st.nccl_version is None:
        m = _NCCL_VERSION.search(line)
        if m:
            st.nccl_version = m[1]
        return
    if _FAILURE.search(line):
        st.errors.append(f"line {lineno}: {line.strip()[:200]}")
        return
    if "_perf" in line and st.op_command is None:
        for m in _BINARY.finditer(line):
            op = op_from_binary(m[1])
            if op:
                st.op_command = (op, lineno)
                break


def _table_row(st: _State, parts: list[str], lineno: int, last: bool) -> None:
    """A line starting with digits that the fast path did not take: a first headerless row, or an odd row."""
    lay = st.layout
    if lay is None:
        lay = _layout_from_row(parts)
        if lay is None:
            return  # digits at the start of a noise line, no table yet
        st.layout, st.row_parser = lay, _row_parser(lay, st.seen)
        st.warnings.append(f"line {lineno}: no column header; columns inferred from the row shape: {lay.described}")
    parse = st.row_parser
    assert parse is not None
    n = len(parts)
    try:
        if n == lay.ntokens:
            parse(parts, st.drafts)
            return
        if n == lay.ntokens - 1 and lay.i_redop >= 0 and not parts[lay.i_redop].isalpha():
            # Old alltoall: the redop field is printed empty.
            parse(parts[:lay.i_redop] + ["none"] + parts[lay.i_redop:], st.drafts)
            return
    except (ValueError, IndexError, OverflowError):
        pass
    if last:
        st.warnings.append(f"line {lineno}: last row incomplete (output cut off); ignored")
        return
    raise ParseError(st.source, lineno, f"a data row with the {lay.ntokens} columns '{lay.described}'",
                     found=" ".join(parts))


def _op_from_file_name(source: str, warnings: list[str]) -> str | None:
    """``logs/all_gather_perf-16n.txt`` -> all_gather, when the name holds exactly one ``<op>_perf``."""
    name = source.replace("\\", "/").rsplit("/", 1)[-1]
    ops = {op for m in re.finditer(r"([a-z_]+?)_perf", name) for op in [m[1].lstrip("_")] if op in OPS}
    if len(ops) != 1:
        return None
    op = ops.pop()
    warnings.append(f"op {op} taken from the file name (the output does not name its binary)")
    return op


def _parse_text(text: str, source: str, op: str | None, nranks: int | None) -> NcclTestsRun:
    st = _State(source)
    lines = text.splitlines()
    last_index = len(lines) - 1
    while last_index >= 0 and not lines[last_index].strip():
        last_index -= 1
    drafts = st.drafts
    ntokens, parse_row = -1, st.row_parser
    for i, line in enumerate(lines):
        parts = line.split()
        if not parts:
            continue
        if parts[0].isdigit():
            if len(parts) == ntokens:
                try:
                    parse_row(parts, drafts)  # type: ignore[misc]
                    continue
                except (ValueError, IndexError, OverflowError):
                    pass
            _table_row(st, parts, i + 1, i == last_index)
        else:
            _other_line(st, line, i + 1)
        if st.row_parser is not parse_row:
            parse_row = st.row_parser
            ntokens = st.layout.ntokens if st.layout is not None else -1

    if not st.drafts and st.layout is None and not st.params and not st.devices and not st.complete:
        raise ParseError(source, None, "nccl-tests output (a results table, a '# nThread' header or the "
                         "'Out of bounds values' summary)")
    found = st.op_started or st.op_command
    if op is not None:
        if op not in OPS:
            raise ParseError(source, None, f"a collective among {', '.join(OPS)}", found=op)
        if found is not None and found[0] != op:
            raise ParseError(source, found[1], f"output of {op} (as passed)", found=f"{found[0]}_perf")
    elif found is not None:
        op = found[0]
    else:
        op = _op_from_file_name(source, st.warnings)
    if st.layout is not None and st.layout.cputime:
        st.warnings.append("times are CPU time per op (-C 1), not latency")
    header = NcclTestsHeader(**st.params)
    return build_run(op=op, drafts=st.drafts, devices=st.devices, ranks_elided=st.ranks_elided, header=header,
                     nccl_version=st.nccl_version, nccl_tests_version=st.tests_version, avg_busbw_gbps=st.avg,
                     out_of_bounds=st.oob, oob_failed=st.oob_failed, min_bw_failed=st.min_bw_failed,
                     complete=st.complete, errors=st.errors, warnings=st.warnings, source=source, nranks=nranks)


def parse_nccl_tests(text: str, source: str = "<text>", op: str | None = None, *,
                     nranks: int | None = None) -> NcclTestsRun:
    """Parse nccl-tests stdout (any generation) or its ``-J`` JSON file; raises only :class:`ParseError`.

    ``op`` names the collective when the output does not (no ``Collective test starting`` line and no
    ``*_perf`` command line); ``nranks`` when neither the rank list nor the bandwidths tell it.
    """
    if not isinstance(text, str):
        raise ParseError(source, None, "text (str)", found=type(text).__name__)
    if text.lstrip().startswith("{"):
        from .nccl_tests_json import parse_nccl_tests_json

        return parse_nccl_tests_json(text, source=source, op=op, nranks=nranks)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the parse allocates no cycles; collections over 10^5 fresh records only cost time
    try:
        return _parse_text(text, source, op, nranks)
    except ParseError:
        raise
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, RecursionError) as exc:  # pragma: no cover
        raise ParseError(source, None, "nccl-tests output", found=f"{type(exc).__name__}: {exc}") from exc
    finally:
        if gc_was_enabled:
            gc.enable()
