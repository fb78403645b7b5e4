"""The nccl-tests text reader's state (:class:`ParseState`) and the lines that are not data rows: the run header
(versions, ``# nThread`` parameters, rank lines), the column header, the summary (``Out of bounds values``, ``Avg bus
bandwidth``), failures, elisions, the command line and the NCCL lines :mod:`.geometry_clues` reads.
:mod:`.parse` reads the data rows and drives both.
"""

from __future__ import annotations

import re
from typing import NoReturn

from collscope.collectives.nccl_tests.geometry_clues import is_clue_line
from collscope.collectives.nccl_tests.launch import rank_line, rank_lines, separate_processes
from collscope.collectives.nccl_tests.reading import SecondRun
from collscope.collectives.nccl_tests.records import (
    Block,
    NcclTestsDevice,
    nccl_version_from_code,
    op_from_binary,
)
from collscope.collectives.nccl_tests.text import Layout, Seen, layout_from_header, new_seen
from collscope.errors import ParseError

__all__ = ["ParseState", "read_other_line", "second_run"]

_VERSION = re.compile(r"([nr])ccl-tests version (\S+)(?: \([0-9a-fA-F]+\))?(?: [nr]ccl-headers=(\d+))?"
                      r"(?: [nr]ccl-library=(\d+))?")
_RCCL_TESTS = re.compile(r"rccl-tests:? [Vv]ersion:? (\S+)")
"""rccl-tests builds that print ``rccl-tests: Version develop:5272cd1`` instead of the versioned header."""
_STARTING = re.compile(r"Collective test (starting|concluded): (\S+)")
_PARAM = re.compile(r"(nThread|nGpus|minBytes|maxBytes|step:|warmup iters:|agg iters:|iters:|validation:|graph:"
                    r"|unalign:)\s*(-?\d+)(?:\((\w+)\))?")
_NCCL_VERSION = re.compile(r"([NR])CCL version\s*:?\s*(\d+\.\d+\.\d+)")
_OOB = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_FAILURE = re.compile(r"Test (?:timeout|NCCL failure|CUDA failure|failure)\b|^# error: ")
_BINARY = re.compile(r"(?:^|[\s/=])([a-z_]+_perf(?:_mpi)?)(?=\s|$|['\";])")
_ELISION = re.compile(r"^(?:\.{3,}|…|\[\.\.\.\]|\(?(?:\.\.\.|…) ?(?:snip|omitted|truncated)?.*"
                      r"|[-=~<(\[ ]*(?:(?:some |the )?output |rest |lines? )?"
                      r"(?:snip(?:ped)?|truncated|omitted|elided)\b.*)$",
                      re.IGNORECASE)
"""An author's elision: ``...``, ``[...]``, ``(truncated)``, ``Truncated smaller sizes``, ``--- snip ---``,
``-----some output truncated-----`` (AWS's DLAMI guide)."""
_PARAM_KEYS = {"nThread": "nthreads", "nGpus": "ngpus", "minBytes": "min_bytes", "maxBytes": "max_bytes",
               "warmup iters:": "warmup_iters", "iters:": "iters", "agg iters:": "agg_iters",
               "validation:": "validation", "graph:": "graph", "unalign:": "unalign"}


class ParseState:
    """What the text reader has gathered so far from one run's lines."""

    def __init__(self, source: str, text: str, first_lineno: int = 1) -> None:
        self.source = source
        self.text = text
        """The text with every line break a ``\\n`` (as ``str.splitlines`` breaks it)."""
        self.first_lineno = first_lineno
        """The number of the text's first line in its file (a run after the first of several)."""
        self.backend = "nccl"
        """``rccl`` once an rccl-tests header or an ``RCCL version`` line is seen."""
        self.last_lineno: int | None = None
        self.op_started: tuple[str, int] | None = None
        self.op_concluded: tuple[str, int] | None = None
        self.op_command: tuple[str, int] | None = None
        self.command: list[str] | None = None
        """The tokens of the line that named the binary, when it reads as its command line."""
        self.headers = 0
        """``# nThread`` header lines seen (one per process that printed its own)."""
        self.params: dict[str, int] = {}
        self.devices: list[NcclTestsDevice] = []
        self.ranks_elided = False
        self.after_rank_line = False
        """Whether the last line that said something (not blank, not a lone ``#``) was a rank line: an elision there
        cuts the rank list; one after other lines (NCCL INFO lines the author shortened) does not."""
        self.elided_after: int | None = None
        """Rank lines seen when the author's elision of the rank list came (the list is cut at its end when no
        rank line follows it)."""
        self.clue_lines: list[tuple[int, str]] = []
        """NCCL INFO and launch command lines, with their numbers: :mod:`.geometry_clues` reads them."""
        self.nccl_version: str | None = None
        self.tests_version: str | None = None
        self.avg: float | None = None
        self.oob: int | None = None
        self.oob_failed = False
        self.min_bw_failed = False
        self.complete = False
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.blocks: list[Block] = []
        self.layout: Layout | None = None
        self.seen: Seen = new_seen()
        self.cut_row: tuple[str, int] | None = None
        """A data row's head cut by NCCL's log lines, and its line, until its rest is read (:mod:`.cut_rows`)."""

    def is_last(self, lineno: int) -> bool:
        """Whether line ``lineno`` is the last line that is not blank (found when first asked)."""
        if self.last_lineno is None:
            self.last_lineno = self.text.rstrip().count("\n") + self.first_lineno
        return lineno == self.last_lineno


def read_other_line(st: ParseState, line: str, lineno: int) -> None:
    """Everything that is not a data row: header lines, summary lines, noise."""
    body = line.strip().lstrip("#").strip()
    if not body:
        return
    after_rank_line, st.after_rank_line = st.after_rank_line, False
    if body.startswith("size ") or body.startswith("size\t"):
        names = body.split()
        if "algbw" in names:
            lay = layout_from_header(names, st.source, lineno)
            if st.layout is not None and st.blocks and lay != st.layout:
                raise ParseError(st.source, lineno, "one results table per run (a second, different header "
                                 "follows rows); split the file per run", found=body)
            if st.layout is not None and st.blocks and not st.headers:
                second_run(st, lineno, body)  # the same table again, no run header: tables pasted one after another
            st.layout = lay
        return
    if body.startswith("(B)") or body.startswith("out-of-place"):
        return
    if body.startswith("Rank"):
        device = rank_line(body)
        if device is not None:
            st.devices.append(device)
            st.after_rank_line = True
        return
    if body.startswith("nThread"):
        if st.blocks:
            second_run(st, lineno, body)
        st.headers += 1
        for p in _PARAM.finditer(body):
            key, value, unit = p[1], int(p[2]), p[3]
            if key == "step:":
                st.params["step_factor" if unit == "factor" else "step_bytes"] = value
            else:
                st.params[_PARAM_KEYS[key]] = value
        return
    if body.startswith(("nccl-tests version", "rccl-tests")):
        m = _VERSION.match(body)
        if m:
            st.tests_version = m[2]
            if m[1] == "r":
                st.backend = "rccl"
            if m[4]:
                st.nccl_version = nccl_version_from_code(int(m[4]))
        elif (r := _RCCL_TESTS.match(body)) is not None:
            st.backend = "rccl"
            st.tests_version = st.tests_version or r[1]
        return
    if body.startswith("Collective test"):
        m = _STARTING.match(body)
        if m:
            op = op_from_binary(m[2])
            if m[1] == "starting":
                if st.blocks:
                    second_run(st, lineno, body)
                if op:
                    st.op_started = (op, lineno)
            elif op and st.op_concluded is None:
                st.op_concluded = (op, lineno)  # the run's last line (nccl-tests 2.14+), kept when the top was cut
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
    if is_clue_line(line) or (st.clue_lines and st.clue_lines[-1][0] == lineno - 1
                              and st.clue_lines[-1][1].rstrip().endswith("\\")):  # a command's last line
        st.clue_lines.append((lineno, line))
    if _ELISION.match(body):
        if st.layout is None and st.devices and after_rank_line:
            st.ranks_elided = True
            st.elided_after = len(st.devices)
            st.warnings.append(f"line {lineno}: rank list elided by the author ({body[:40]})")
        else:
            st.warnings.append(f"line {lineno}: output elided by the author ({body[:40]})")
        return
    if "CCL version" in line and ("NCCL version" in line or "RCCL version" in line):
        m = _NCCL_VERSION.search(line)
        if m:
            if m[1] == "R":
                st.backend = "rccl"
            if st.nccl_version is None:
                st.nccl_version = m[2]
        return
    if _FAILURE.search(line):
        st.errors.append(f"line {lineno}: {line.strip()[:200]}")
        return
    if "_perf" in line and st.op_command is None:
        for m in _BINARY.finditer(line):
            op = op_from_binary(m[1])
            if op:
                st.op_command = (op, lineno)
                tokens = line[m.start(1):].split()
                if any(t.startswith("-") for t in tokens[1:]):  # flags follow the binary: its command line
                    st.command = tokens
                break



def second_run(st: ParseState, lineno: int, body: str) -> NoReturn:
    """A run starts after rows: separate processes of one launch (said so, with the fix), or a second run (a run of
    several processes before it: pasted runs, which :func:`.runs.parse_nccl_tests_runs` reads one by one)."""
    why = separate_processes(rank_lines(st.text), 0) if len({(d.host, d.pid) for d in st.devices}) <= 1 else None
    if why is not None:
        raise SecondRun(st.source, lineno, why[0], found=why[1])
    raise SecondRun(st.source, lineno, "one nccl-tests run per input (a second run starts here); split the file "
                    "per run (collscope ingest reads each run of a file)", found=body)
