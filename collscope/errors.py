"""The small error hierarchy of collscope.

Library code raises these; only the CLI turns them into exit codes and one-line messages.
"""

from __future__ import annotations

import re
import reprlib

__all__ = ["CollscopeError", "ParseError", "ConfigError", "LaunchError", "ToolMissingError", "printable", "shown"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters but newline and tab: ESC starts a terminal escape sequence (``ESC]52`` writes the
clipboard, ``ESC[2J`` clears the screen), CR overwrites a line, C1 codes (U+0080-U+009F) are escapes too."""
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 160
_REPR.maxlong = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab written as its escape (``\\x1b``), so that
    a value read from an input never drives the terminal it is printed on. Every printer uses it: the CLI's
    output streams (:mod:`collscope.cli._terminal`) and its error lines."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def shown(value: object) -> str:
    """``value`` for an error message: its repr, bounded (160 characters of a string, 6 items of a collection,
    3 levels deep), so that a huge or deeply nested input is never printed whole."""
    try:
        return _REPR.repr(value)
    except (RecursionError, ValueError):  # ValueError: an int too long to convert to text (sys.int_max_str_digits)
        return f"<{type(value).__name__}>"


class CollscopeError(Exception):
    """Base class of every error collscope raises on purpose."""


class ParseError(CollscopeError):
    """Input text did not have the expected format.

    ``source`` names the file (or tool) the text came from, ``line`` is the 1-based line number
    (``None`` when the problem is not tied to one line) and ``expected`` says what was expected there.
    """

    def __init__(self, source: str, line: int | None, expected: str, found: str | None = None) -> None:
        self.source = source
        self.line = line
        self.expected = expected
        self.found = found
        super().__init__(self._message())

    def _message(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        msg = f"{where}: expected {self.expected}"
        if self.found is not None:
            msg += f", found {shown(self.found)}"
        return msg

    def with_source(self, source: str) -> ParseError:
        """The same error, attributed to ``source`` (used when a parser ran on text read from a file)."""
        return ParseError(source, self.line, self.expected, self.found)


class ConfigError(CollscopeError):
    """A setting, option or spec value is invalid; the message lists the valid values."""


class LaunchError(CollscopeError):
    """A process could not be started or a launcher could not be built."""


class ToolMissingError(LaunchError):
    """An external tool is not installed; the message says how to get it."""

    def __init__(self, tool: str, hint: str) -> None:
        self.tool = tool
        self.hint = hint
        super().__init__(f"{tool} not found on PATH; {hint}")
