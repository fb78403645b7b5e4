"""The small error hierarchy of collscope.

Library code raises these; only the CLI turns them into exit codes and one-line messages.
"""

from __future__ import annotations

__all__ = ["CollscopeError", "ParseError", "ConfigError", "LaunchError", "ToolMissingError"]


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
            shown = self.found if len(self.found) <= 80 else self.found[:77] + "..."
            msg += f", found {shown!r}"
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
