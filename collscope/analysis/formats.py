"""How the analysis outputs print numbers: one size formatter, one bandwidth formatter, one Markdown table.

Sizes: :func:`collscope.units.format_size`, the project's one size formatter (binary K/M/G as nccl-tests'
``-b``/``-e`` take them: ``1M``, ``9.5M``, 976563 B -> ``954K``; never an exponent); a table cell that has no
size shows ``-``. Bandwidths and times: three significant figures, integers from 100 up
(``489``, ``1234``, ``3.4``, ``0.0123``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from collscope.errors import printable
from collscope.units import format_size

__all__ = ["size_text", "num_text", "pct_text", "markdown_table", "markdown_text", "markdown_fence"]


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return not math.isfinite(float(value))
    except (TypeError, ValueError):
        return True


def size_text(value: Any) -> str:
    """A table cell of bytes: :func:`collscope.units.format_size`, or ``-`` when missing (None, NaN)."""
    return "-" if _missing(value) else format_size(float(value))


def num_text(value: Any) -> str:
    """Three significant figures without an exponent from 100 up; ``-`` when missing."""
    if _missing(value):
        return "-"
    v = float(value)
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def pct_text(value: Any) -> str:
    """A fraction as a whole percentage (``0.973`` -> ``97%``); ``-`` when missing."""
    return "-" if _missing(value) else f"{float(value):.0%}"


_MARKDOWN_CELL = str.maketrans({**{c: "\\" + c for c in "\\|[]()`*_"}, "<": "&lt;", ">": "&gt;", "\n": " ",
                                "\r": " "})
"""A table cell holds text, never markup: Markdown's punctuation backslash-escaped, ``<``/``>`` as entities
(python-markdown, as MkDocs renders it, has no backslash escape for ``<``), line breaks as spaces."""


def markdown_text(text: str) -> str:
    """``text`` (a record's value, a path) as Markdown that renders it as text: no HTML, no link, no emphasis."""
    return printable(text).translate(_MARKDOWN_CELL)


_cell = markdown_text


def markdown_fence(text: str) -> str:
    """A code fence for ``text``: longer than any run of backticks in it, so the text cannot close it."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    return "`" * max(3, longest + 1)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """``| a | b |`` lines with a header separator; every cell escaped to show as text (:data:`_MARKDOWN_CELL`)."""
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_cell(str(c)) for c in row) + " |" for row in rows]
    return out
