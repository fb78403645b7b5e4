"""Split NCCL debug output into lines: the ``host:pid:tid [dev] NCCL INFO`` prefix and the message.

NCCL prints ``<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <message>`` (``debug.cc``); warnings carry the
source location (``[0] file.cc:123 NCCL WARN ...``) and traces a timestamp and function. Real logs add
their own wrapping: a timestamp in front (``NCCL_DEBUG_TIMESTAMP_FORMAT``, log collectors), Open MPI's
``[1,0]<stdout>:``, srun's ``0: ``, an MPI rank tag ``[0] ``, or they lose the prefix entirely when pasted.
CloudWatch puts each timestamp on a line of its own. Everything before the host part is ignored here.

A log mixed with nccl-tests output can hold an NCCL line glued to the head of a table row (nccl-tests prints a
row's size..root, runs the test, then the times, and connections NCCL >= 2.22 sets up at first use print in
between: ``  2097152  524288  float  sum  -1node07:4711:4790 [0] NCCL INFO Channel ...``). The host of such a line is
taken from a whole line of the same process and thread, never from the glued token; with none, it is left out and a
note says so.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass

from collscope.line_cap import long_line_note, too_long

__all__ = ["LogLine", "split_line", "iter_log_lines", "is_timestamp_line", "thread_hosts"]

_MARKER = re.compile(r"\bNCCL (INFO|WARN|TRACE|CALL|ABORT|ERROR)\b ?")
# Anchored at the end of the text before the marker: host:pid:tid, then [cudaDev], then at most two
# tokens (WARN: ``file.cc:123``; TRACE: ``12.345 func:67``).
_PREFIX = re.compile(  # the host starts a token ((?<![^\s:])): a search tried at every character of one long
    # token would rescan it to its end each time (quadratic)
    r"(?<![^\s:])(?P<host>[^\s:]+):(?P<pid>\d{1,10}):(?P<tid>\d{1,10})(?:\s+\[(?P<dev>-?\d{1,5})\])?(?:\s+\S+){0,2}\s*$"
)
_ISO_TIME = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
_TIMESTAMP_LINE = re.compile(rf"^\s*\[?{_ISO_TIME}\]?\s*$")
_LEADING_TIMESTAMP = re.compile(rf"^\s*\[?{_ISO_TIME}\]?\s+")
_ROW_HEAD = re.compile(r"\s*\d+\s+\d+\s+[A-Za-z_]\w*\s+\S+\s+-?\d+")
"""The head of an nccl-tests table row (size count type redop root) an NCCL line can be glued to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogLine:
    """One line of a log, with NCCL's prefix taken apart where it had one."""

    lineno: int
    """1-based line number in the input."""
    message: str
    """The text after ``NCCL INFO `` (or the whole line, stripped, when it had no NCCL marker)."""
    level: str | None = None
    """``INFO``, ``WARN``, ``TRACE``, ... from the marker; ``None`` for a line without one."""
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    dev: int | None = None
    """The CUDA device in brackets after ``host:pid:tid``."""

    @property
    def stream(self) -> tuple[str, int, int] | None:
        """The thread that printed the line (lines of one thread stay in order even when ranks interleave)."""
        if self.host is None or self.pid is None or self.tid is None:
            return None
        return (self.host, self.pid, self.tid)


def is_timestamp_line(raw: str) -> bool:
    """A line holding only a timestamp (CloudWatch prints one before every message)."""
    return _TIMESTAMP_LINE.match(raw) is not None


def split_line(raw: str, lineno: int) -> LogLine | None:
    """Take one raw line apart; ``None`` for blank and timestamp-only lines."""
    if not raw.strip() or is_timestamp_line(raw):
        return None
    marker = _MARKER.search(raw)
    if marker is None:
        message = _LEADING_TIMESTAMP.sub("", raw).strip()
        return LogLine(lineno=lineno, message=message) if message else None
    message = raw[marker.end():].rstrip()
    prefix = _PREFIX.search(raw[: marker.start()])
    if prefix is None:
        return LogLine(lineno=lineno, message=message, level=marker.group(1))
    dev = prefix.group("dev")
    return LogLine(
        lineno=lineno,
        message=message,
        level=marker.group(1),
        host=prefix.group("host"),
        pid=int(prefix.group("pid")),
        tid=int(prefix.group("tid")),
        dev=int(dev) if dev is not None else None,
    )


def iter_log_lines(text: str, notes: list[str] | None = None) -> Iterator[LogLine]:
    """Every non-blank, non-timestamp line of ``text``, split; a line longer than
    :data:`~collscope.line_cap.MAX_LINE_CHARS` is skipped (never matched), with a note in ``notes``. A line glued to
    an nccl-tests row takes the host of its thread's whole lines (module doc)."""
    threads: dict[tuple[int, int], str] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if too_long(raw):
            if notes is not None:
                notes.append(long_line_note(lineno, len(raw)))
            continue
        line = split_line(raw, lineno)
        if line is None:
            continue
        if line.host is not None and line.pid is not None and line.tid is not None and _ROW_HEAD.match(raw):
            if threads is None:
                threads = thread_hosts(text)
            host = threads.get((line.pid, line.tid))
            if host is None or not line.host.endswith(host):
                host = None
                if notes is not None:
                    notes.append(f"line {lineno}: an NCCL line glued to an nccl-tests row, whose thread "
                                 f"({line.pid}:{line.tid}) no whole line names: its host is left out")
            line = dataclasses.replace(line, host=host)
        yield line


def thread_hosts(text: str) -> dict[tuple[int, int], str]:
    """(pid, tid) -> host, from the lines whose NCCL prefix is not glued to an nccl-tests row (the first seen)."""
    out: dict[tuple[int, int], str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if too_long(raw) or _ROW_HEAD.match(raw):
            continue
        line = split_line(raw, lineno)
        if line is not None and line.host is not None and line.pid is not None and line.tid is not None:
            out.setdefault((line.pid, line.tid), line.host)
    return out
