"""Several nccl-tests runs pasted into one text (a blog post's all_reduce then all_gather, a loop's log): where each
run starts (pure).

A run starts at its ``# nThread`` header; a header that follows table rows starts the next run, and so does a
table's column header that follows rows without a ``# nThread`` header between them (two tables pasted in one
post, each under a label such as ``2.19.3:``). The lines between
the end of one run (its last row, its summary lines ``# Out of bounds values``/``# Avg bus bandwidth``/``# Collective
test concluded`` and the bare ``#`` after them) and the next header (a command line, a banner, ``# nccl-tests
version``, ``# Collective test starting``) belong to the next run. Headers printed before any row (several processes
that each print their own, as ``srun`` without MPI does) are not runs: the parser says what happened; except where
pdsh/clush prefixes show that each host ran its own (``pdsh -w gpu[01-02] all_reduce_perf -g 8``): one run per
host (:func:`host_runs`).

:func:`parse_nccl_tests_runs` parses the text as one run first: splitting costs nothing unless a second run starts.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

from collscope.collectives.nccl_tests.launch import rank_lines, separate_processes
from collscope.collectives.nccl_tests.parse import parse_nccl_tests, parse_text
from collscope.collectives.nccl_tests.prefixes import strip_line_prefixes
from collscope.collectives.nccl_tests.rccl_results import looks_like_rccl_tests_results
from collscope.collectives.nccl_tests.reading import SecondRun, one_break, parsing
from collscope.collectives.nccl_tests.records import NcclTestsRun
from collscope.errors import ParseError

__all__ = ["parse_nccl_tests_runs", "run_starts", "host_runs", "one_process_each"]

_END = ("Out of bounds values", "Avg bus bandwidth", "Collective test concluded")
_COLUMN_HEADER = re.compile(r"\bsize\s+count\s+type\b.*\balgbw\b")


def run_starts(text: str) -> list[int]:
    """The 0-based line index where each run after the first starts (``[]``: one run). ``text``'s line breaks are
    ``\\n``; launcher prefixes are looked through."""
    if text.count("nThread") < 2 and len(_COLUMN_HEADER.findall(text)) < 2:
        return []
    stripped, _ = strip_line_prefixes(text)
    starts: list[int] = []
    rows = False
    end = 0
    for i, line in enumerate(stripped.split("\n")):
        s = line.strip()
        if not s:
            continue
        if s[0].isdigit():
            if len(s.split()) >= 8:  # a table row (noise starting with a digit is shorter)
                rows, end = True, i + 1
            continue
        body = s.lstrip("#").strip()
        if not body:
            if end == i:  # the bare '#' closing a summary
                end = i + 1
            continue
        if body.startswith(_END):
            end = i + 1
        elif (body.startswith("nThread ") or _COLUMN_HEADER.match(body)) and rows:
            starts.append(end)
            rows = False
    return starts


def host_runs(text: str) -> list[tuple[str, str]] | None:
    """Per host, the text of its own run, when pdsh/clush ran nccl-tests on several hosts at once (each host's
    ``host:`` lines hold a header of their own): its lines kept where they were, every other host's blanked, so
    that line numbers hold; lines without a host prefix (the pdsh command line) go to every host's. None: not
    that case."""
    _, prefixes = strip_line_prefixes(text)
    if prefixes is None or "pdsh" not in prefixes.kinds or len(prefixes.hosts) < 2:
        return None
    lines = text.split("\n")
    tags = [f"{host}: " for host in prefixes.hosts]
    owner = [next((k for k, tag in enumerate(tags) if line.startswith(tag)), -1) for line in lines]
    headers = {owner[i] for i, line in enumerate(lines) if "nThread " in line}
    if len(headers - {-1}) < 2:
        return None
    return [(host, "\n".join(line if owner[i] in (k, -1) else "" for i, line in enumerate(lines)))
            for k, host in enumerate(prefixes.hosts) if k in headers]


def one_process_each(chunks: list[str]) -> bool:
    """Whether every chunk is the output of one process alone, all with the same header: one launch's processes
    that each ran as a world of their own and printed one after the other, not runs pasted together."""
    headers = set()
    for chunk in chunks:
        chunk = strip_line_prefixes(chunk)[0]
        devices = rank_lines(chunk)
        if len({(d.host, d.pid) for d in devices}) != 1 or not any(d.rank == 0 for d in devices):
            return False
        header = next((line for line in chunk.split("\n") if "nThread " in line), "")
        headers.add(header[header.find("nThread "):].strip())
    return len(headers) == 1


def parse_nccl_tests_runs(text: str, source: str = "<text>", op: str | None = None, *, nranks: int | None = None,
                          env: Mapping[str, str] | None = None, argv: Sequence[str] | None = None,
                          nnodes: int | None = None, nvl_domain: int | None = None) -> list[NcclTestsRun]:
    """Every nccl-tests run of ``text``, in order: one for a single run (as :func:`.parse.parse_nccl_tests`), one
    per run when several were pasted into one text (a header after table rows starts the next). The arguments
    apply to each run; a run's errors name the line numbers of ``text``.

    Outputs of one launch's processes that each ran alone and printed one after the other (each a one-process
    run, all with the same header) are a ParseError saying so, as in :func:`.parse.parse_nccl_tests`.
    """
    if not isinstance(text, str) or text.lstrip().startswith("{") or looks_like_rccl_tests_results(text):
        return [parse_nccl_tests(text, source, op, nranks=nranks, env=env, argv=argv, nnodes=nnodes,
                                 nvl_domain=nvl_domain)]
    with parsing(source):
        text = one_break(text)
        try:  # one run: no cost beyond its parse
            return [parse_text(text, source, op, nranks, env, argv, nnodes, nvl_domain)]
        except ParseError as problem:
            hosts = host_runs(text)
            if hosts is not None:
                return [dataclasses.replace(run, warnings=(f"the run of host {host} (pdsh/clush prefixes: one run "
                                                           f"per host)", *run.warnings))
                        for host, part in hosts
                        for run in [parse_text(part, source, op, nranks, env, argv, nnodes, nvl_domain)]]
            starts = run_starts(text) if isinstance(problem, SecondRun) else []
            if not starts:
                raise
        lines = text.split("\n")
        bounds = [0, *starts, len(lines)]
        chunks = ["\n".join(lines[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
        if one_process_each(chunks):
            why = separate_processes(rank_lines(strip_line_prefixes(text)[0]), 0)
            if why is not None:
                raise ParseError(source, starts[0] + 1, why[0], found=why[1])
        runs = []
        for i, (a, chunk) in enumerate(zip(bounds, chunks, strict=False)):
            run = parse_text(chunk, source, op, nranks, env, argv, nnodes, nvl_domain, first_lineno=a + 1)
            note = f"run {i + 1} of {len(chunks)} in this input (lines {a + 1}-{a + chunk.count(chr(10)) + 1})"
            runs.append(dataclasses.replace(run, warnings=(note, *run.warnings)))
        return runs
