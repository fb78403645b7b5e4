"""Data rows that NCCL's own log lines cut in two.

nccl-tests prints a row's size, count, type, redop and root, runs the test, then prints its times. With
``NCCL_DEBUG=INFO`` and NCCL's lazy connection setup (NCCL >= 2.22 connects the peers of an algorithm when it first
runs), the log lines of that setup land between the two halves: the row's head ends in the middle of a line, glued
to the first log line's ``host:pid:tid [dev] NCCL INFO`` prefix, and the times follow on a later line of their own::

         2097152        524288     float     sum      -1node07:4711:4790 [0] NCCL INFO Channel 00/0 : 7[3] -> 0[0] ...
    node07:4711:4790 [0] NCCL INFO Connected all rings
        87.18   24.05   42.10      0    85.11   24.64   43.12      0

:func:`hold_cut_row` keeps such a head; :func:`rejoin_cut_row` joins it with the next row line that holds the
missing fields. The head ends where the host of the glued log line starts; the host is read from a whole log line
of the same process and thread (``host:pid:tid`` at a line's start), never guessed from the glued text (a host name
may start with digits, as Azure ML's do). A head that cannot be split that way, or whose rest never comes, is an
error or a warning naming its line, as any row that does not line up with the header.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from collscope.collectives.nccl_log.lines import thread_hosts
from collscope.errors import ParseError

if TYPE_CHECKING:
    from collscope.collectives.nccl_tests.lines import ParseState

__all__ = ["hold_cut_row", "rejoin_cut_row", "unjoined_cut_row"]

_GLUED = re.compile(r":(\d+):(\d+) \[\d+\] NCCL (?:INFO|WARN|TRACE)\b")
"""The ``:pid:tid [dev] NCCL INFO`` of a log line glued to a row's head (NCCL's debug prefix, src/debug.cc)."""
_STAMP = re.compile(r"\[[^\]\n]*\]\s*$")
"""A timestamp prefix (``NCCL_DEBUG_TIMESTAMP_FORMAT``) between the head and the host."""


def hold_cut_row(st: ParseState, parts: list[str], lineno: int) -> bool:
    """Whether the row line ``parts`` is a head cut by a glued NCCL log line; if so it is kept for
    :func:`rejoin_cut_row` (a second one before the first is joined is an error naming the first)."""
    text = " ".join(parts)
    m = _GLUED.search(text)
    if m is None:
        return False
    if st.cut_row is not None:
        raise ParseError(st.source, st.cut_row[1], "the rest of this data row (cut by NCCL's log lines) before the "
                         "next row", found=f"another row cut by NCCL's log lines on line {lineno}")
    st.cut_row = (text, lineno)
    return True


def rejoin_cut_row(st: ParseState, parts: list[str], lineno: int, ntokens: int) -> list[str]:
    """The tokens of the held head followed by ``parts``, the rest of its row on line ``lineno``. Raises
    ParseError naming the head's line when the head cannot be split from the log text or the fields do not make
    one row of ``ntokens``."""
    assert st.cut_row is not None
    text, cut = st.cut_row
    head = _head(st, text)
    if head is None:
        raise ParseError(st.source, cut, "a data row; this one is cut by an NCCL log line whose host no whole log "
                         "line of the same process and thread names, so where the row ends is unknown",
                         found=text)
    if len(head) + len(parts) != ntokens:
        raise ParseError(st.source, cut, f"the rest of this data row (cut by NCCL's log lines): the "
                         f"{ntokens - len(head)} missing fields on one line",
                         found=f"{len(parts)} on line {lineno}: {' '.join(parts)}")
    st.cut_row = None
    st.warnings.append(f"line {cut}: a data row cut by NCCL's log lines (printed while the test ran, e.g. "
                       f"connections NCCL sets up at first use) reads as one row with its rest on line {lineno}")
    return head + parts


def unjoined_cut_row(st: ParseState) -> None:
    """At the end of a run: a held head whose rest never came is a warning (the run stopped, or the output was cut,
    while NCCL was logging), not a row."""
    if st.cut_row is not None:
        text, cut = st.cut_row
        st.warnings.append(f"line {cut}: a data row cut by NCCL's log lines whose times never follow (the run "
                           f"stopped, or the output was cut, there); ignored: {' '.join(text.split()[:5])} ...")
        st.cut_row = None


def _head(st: ParseState, text: str) -> list[str] | None:
    """The row's own tokens before the glued log line: what precedes the host of that line's process and thread."""
    m = _GLUED.search(text)
    assert m is not None
    host = thread_hosts(st.text).get((int(m[1]), int(m[2])))
    if host is None or not text[:m.start()].endswith(host):
        return None
    return _STAMP.sub("", text[:m.start() - len(host)]).split()
