"""Several nccl-tests runs pasted into one text (a blog post's all_reduce then all_gather, a loop's log): where each
run starts (pure).

A run starts at its ``# nThread`` header; a header that follows table rows starts the next run. The lines between
the end of one run (its last row, its summary lines ``# Out of bounds values``/``# Avg bus bandwidth``/``# Collective
test concluded`` and the bare ``#`` after them) and the next header (a command line, a banner, ``# nccl-tests
version``, ``# Collective test starting``) belong to the next run. Headers printed before any row (several processes
that each print their own, as ``srun`` without MPI does) are not runs: the parser says what happened.

Costs one ``str.count`` when the text holds at most one ``nThread``.
"""

from __future__ import annotations

from collscope.collectives.nccl_tests.launch import rank_lines
from collscope.collectives.nccl_tests.prefixes import strip_line_prefixes

__all__ = ["run_starts", "one_process_each"]

_END = ("Out of bounds values", "Avg bus bandwidth", "Collective test concluded")


def run_starts(text: str) -> list[int]:
    """The 0-based line index where each run after the first starts (``[]``: one run). ``text``'s line breaks are
    ``\\n``; launcher prefixes are looked through."""
    if text.count("nThread") < 2:
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
        elif body.startswith("nThread ") and rows:
            starts.append(end)
            rows = False
    return starts


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
