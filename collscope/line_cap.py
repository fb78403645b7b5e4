"""The longest line a reader runs a regular expression on: :data:`MAX_LINE_CHARS`. A line past it (a pasted
binary, a log collector's megabyte line) is skipped with a note naming its number, so no pattern ever runs over a
megabyte of user text, whatever its worst case. Real tool output and NCCL's lines are far shorter (NCCL formats a
debug line into a 1,024-byte buffer, ``src/debug.cc``)."""

from __future__ import annotations

__all__ = ["MAX_LINE_CHARS", "too_long", "long_line_note", "drop_long_lines"]

MAX_LINE_CHARS = 64 * 1024
"""Lines longer than this many characters are skipped, not read."""


def too_long(line: str) -> bool:
    return len(line) > MAX_LINE_CHARS


def long_line_note(lineno: int, length: int) -> str:
    """``line 3 (1,048,576 characters) is longer than 65,536 characters: skipped, not read``."""
    return f"line {lineno} ({length:,} characters) is longer than {MAX_LINE_CHARS:,} characters: skipped, not read"


def drop_long_lines(text: str) -> tuple[str, list[str]]:
    """``text`` with each line longer than :data:`MAX_LINE_CHARS` made empty (the other lines keep their
    numbers), and a note per such line. Text with no line that long comes back as it is, without a copy."""
    if len(text) <= MAX_LINE_CHARS:
        return text, []
    notes: list[str] = []
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if too_long(line):
            notes.append(long_line_note(index + 1, len(line)))
            lines[index] = ""
    return ("\n".join(lines), notes) if notes else (text, [])
