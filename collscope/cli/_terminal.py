"""What the CLI prints never drives the terminal: control characters in values read from inputs are escaped.

A record's host name, a configuration value, a trace's process-group name or a log line can carry terminal
escape sequences (``ESC]52;c;...BEL`` writes the clipboard, ``ESC[2J`` clears the screen). Rather than every
renderer remembering to escape, :func:`escaped_output` puts :func:`collscope.errors.printable` in front of
``sys.stdout`` and ``sys.stderr`` for the whole run of a command (its output, its warnings and log lines, its
error line): one function, used by every printer. JSON output is unchanged by it (``json.dumps`` already writes
control characters as ``\\u001b``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from collscope.errors import printable

__all__ = ["EscapedStream", "escaped_output"]


class EscapedStream:
    """A text stream that writes to ``raw`` with control characters (but newline and tab) escaped."""

    def __init__(self, raw: TextIO) -> None:
        self._raw = raw

    def write(self, text: Any) -> int:
        if isinstance(text, str):
            text = printable(text)
        return self._raw.write(text)  # bytes go on to the raw stream, which refuses them as it always did

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, encoding, isatty, fileno, ...: the raw stream's
        return getattr(self._raw, name)


@contextmanager
def escaped_output() -> Iterator[None]:
    """Inside, ``sys.stdout`` and ``sys.stderr`` escape control characters (:class:`EscapedStream`)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = EscapedStream(saved[0])
    sys.stderr = EscapedStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
