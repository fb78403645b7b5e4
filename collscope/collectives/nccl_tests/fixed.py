"""Large blocks of table rows read with numpy, when every row has the same fixed-width layout.

nccl-tests prints its rows with fixed widths (``%12li %12li %8s %6s %6i %7s %6s %6s %6s ...``, right-aligned),
so in a block of rows every token ends at the same character position. When that holds for every row of a
block (the lines the same length, printable ASCII only, each token ending where row 0's does), the block is a
character matrix whose columns are fixed ranges, and the numeric columns are read together by arithmetic on
that matrix instead of one ``str`` per token.

Only what is read exactly as the pure path reads it is converted here: tokens of at most 15 characters made of
digits and at most one ``.`` (integer columns: digits only). Their digits form an integer m < 10**15 < 2**53,
summed exactly in float64, and a decimal with k digits after its point is m / 10**k, one correctly rounded
IEEE division: the same double as ``float(token)``. Any other token (``-1.5``, ``1.2e+06``, ``N/A``, ``+1``,
``nan``) sends its column to the pure conversion of :mod:`.text`, from the column's own token strings, so every
value is the one the pure path makes; a block that is not fixed-width is split and converted by the pure path.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from collscope.collectives.nccl_tests.text import Layout, TokenColumns, check_names

__all__ = ["FixedColumns", "fixed_columns"]

_WINDOW = 15
"""Longest token read by arithmetic: 14 digits and a point, below 10**15 < 2**53 (exact in float64)."""
_CHUNK = 7
"""Places summed in one float32 product: 14 * (10**7 - 1) / 9 < 2**24, so every partial sum is exact."""
_P10 = np.array([10.0 ** k for k in range(_WINDOW + 1)])
"""Exact doubles 1, 10, ..., 1e15."""
_SPACE, _DOT, _ZERO = 32, 46, 48


@lru_cache(maxsize=64)
def _place_weights(stride: int, windows: tuple[tuple[int, int], ...]) -> tuple[Any, Any]:
    """For fields ending where ``windows`` do: the float32 weights (10**place within a chunk of 7) that sum each
    chunk of a line's characters, and the float64 weights (10**(7 x chunk)) that join the chunks per field."""
    nchunks = [(b - first + _CHUNK - 1) // _CHUNK for first, b in windows]
    place = np.zeros((stride, sum(nchunks)), dtype=np.float32)
    chunk_of = np.zeros((sum(nchunks), len(windows)))
    c = 0
    for i, (first, b) in enumerate(windows):
        for d in range(b - first):
            place[b - 1 - d, c + d // _CHUNK] = 10.0 ** (d % _CHUNK)
        for n in range(nchunks[i]):
            chunk_of[c + n, i] = 10.0 ** (_CHUNK * n)
        c += nchunks[i]
    return place, chunk_of


def fixed_columns(block: str, nrows: int, lay: Layout) -> FixedColumns | None:
    """The columns of ``nrows`` lines of the table ``lay`` when they share one fixed-width layout, else None.

    ``block`` is whole lines joined by ``\n`` (no trailing break), as the parser finds them.
    """
    width = block.find("\n") if nrows > 1 else len(block)
    if width <= 0 or len(block) != nrows * (width + 1) - 1 or not block.isascii():
        return None
    raw = np.frombuffer((block + "\n").encode("ascii"), dtype=np.uint8)
    if np.count_nonzero(raw < _SPACE) != nrows:  # tabs and the other whitespace str.split() knows; \n only at ends
        return None
    grid = raw.reshape(nrows, width + 1)
    if not (grid[:, width] == 10).all():
        return None
    ink = grid > _SPACE  # printable and not a space (the \n column is not ink)
    ends = ink[:, :-1] > ink[:, 1:]  # the last character of each token
    if not (ends == ends[0]).all():
        return None
    stops = np.flatnonzero(ends[0]) + 1
    if len(stops) != lay.ntokens:
        return None
    starts = np.concatenate(([0], stops[:-1]))
    return FixedColumns(block, raw, nrows, list(zip(starts.tolist(), stops.tolist(), strict=True)), lay)


class FixedColumns:
    """The columns of a fixed-width block (the same methods as :class:`~.text.TokenColumns`).

    Field ``j`` is the character range from the end of token ``j - 1`` to the end of token ``j``: the token,
    right-aligned, after its separating spaces. The numeric columns of the layout (size, count, and each
    placement's time, algbw, busbw) are read together when the block is made.
    """

    __slots__ = ("_block", "_raw", "_grid", "_fields", "_numbers", "nrows")

    def __init__(self, block: str, raw: Any, nrows: int, fields: list[tuple[int, int]], lay: Layout) -> None:
        self._block = block
        self._raw = raw
        self._grid = raw.reshape(nrows, -1)
        self._fields = fields
        self.nrows = nrows
        self._numbers: dict[int, list[Any]] = {}
        ints = [0] + ([lay.i_count] if lay.i_count >= 0 else [])
        floats = [j for group in lay.groups for j in group[:3]]
        self._read_numbers(ints, floats)

    def tokens(self, j: int) -> list[str]:
        """Column ``j`` as the token strings ``str.split`` gives."""
        a, b = self._fields[j]
        text, stride = self._block, self._grid.shape[1]
        return [text[i + a:i + b].lstrip(" ") for i in range(0, stride * self.nrows, stride)]

    def _cells(self, j: int) -> Any:
        """Field ``j`` of every row as one fixed-size byte string (a view, no copy)."""
        a, b = self._fields[j]
        cell = np.dtype({"names": ["f"], "formats": [f"S{b - a}"], "offsets": [a], "itemsize": self._grid.shape[1]})
        return self._raw.view(cell)["f"]

    def _read_numbers(self, ints: list[int], floats: list[int]) -> None:
        """Read every column of ``ints`` and ``floats`` whose tokens all qualify (module docstring) at once.

        One float32 matrix product over the block's characters gives each field's digits in chunks of 7 places
        (exact); per character position, counts over the rows say which fields hold a point or anything else.
        A point at the same place in every row has one scale for the column; otherwise each row's is found.
        """
        grid, raw, nrows = self._grid, self._raw, self.nrows
        stride = grid.shape[1]
        cols = [j for j in ints + floats
                if self._fields[j][1] - self._fields[j][0] <= _WINDOW
                or not (grid[:, self._fields[j][0]:self._fields[j][1] - _WINDOW] > _SPACE).any()]
        if not cols:
            return
        windows = [(max(a, b - _WINDOW), b) for a, b in (self._fields[j] for j in cols)]
        place, chunk_of = _place_weights(stride, tuple(windows))
        # '0'..'9' & 15 = 0..9, ' ' & 15 = 0, '.' & 15 = 14 (taken off below)
        chunks = (raw & 15).astype(np.float32).reshape(nrows, stride) @ place
        marked = chunks.astype(np.float64) @ chunk_of  # the window's places as one integer (< 1.6e15: exact)
        dot = (raw == _DOT).reshape(nrows, stride)
        dots = np.add.reduce(dot, axis=0, dtype=np.uint16)  # per position: the rows with a point there
        other = np.add.reduce(((raw - _ZERO) >= 10).reshape(nrows, stride) & ~dot & (grid != _SPACE), axis=0,
                              dtype=np.uint16)  # ... or anything but a digit, a point or a space
        last = grid[:, [b - 1 for _, b in windows]]
        digit_last = ((last - _ZERO) < 10).all(axis=0)
        scale = np.ones((nrows, len(cols)))
        pointed = np.zeros((nrows, len(cols)), dtype=bool)
        for i, (j, (first, b)) in enumerate(zip(cols, windows, strict=True)):
            at = np.flatnonzero(dots[first:b])
            if other[first:b].any() or (j in ints and (len(at) or not digit_last[i])):
                continue
            if not (digit_last[i] or self._has_digit(j)):  # "5." is a number, "." is not
                continue
            if len(at) == 1 and dots[first + at[0]] == nrows:  # the point at one place in every row
                scale[:, i] = _P10[b - first - 1 - at[0]]
                pointed[:, i] = True
            elif len(at):  # at different places: per row (at most one each), 10**(places after it)
                places = [dot[:, first + p] for p in at.tolist()]
                npoints = sum(places)
                if (npoints > 1).any():
                    continue
                scale[:, i] = sum(np.where(d, _P10[b - first - 1 - p], 0.0)
                                  for d, p in zip(places, at.tolist(), strict=True))
                scale[:, i] += npoints == 0
                pointed[:, i] = npoints == 1
            cols[i] = -1 - j  # read here
        whole = marked - 14 * np.where(pointed, scale, 0.0)  # the digits as one integer, the point ignored
        low = whole - np.floor(whole / scale) * scale  # the digits after the point (exact: see module docstring)
        values = np.where(pointed, low + (whole - low) / 10, whole) / scale  # those before it sit one place high
        for i, j in enumerate(cols):
            if j < 0:
                j = -1 - j
                self._numbers[j] = whole[:, i].astype(np.int64).tolist() if j in ints else values[:, i].tolist()

    def _has_digit(self, j: int) -> bool:
        """Whether every token of column ``j`` ends in a digit or in a point after a digit (``5.``; ``.`` is not
        a number)."""
        b = self._fields[j][1]
        last = self._grid[:, b - 1]
        before = self._grid[:, b - 2] if b >= 2 else np.zeros_like(last)
        return bool((((last - _ZERO) < 10) | ((last == _DOT) & ((before - _ZERO) < 10))).all())

    def ints(self, j: int) -> list[int]:
        """Column ``j`` as ``int`` values (ValueError when a token is not an integer)."""
        values = self._numbers.get(j)
        return TokenColumns.numbers(self.tokens(j), int) if values is None else values

    def floats(self, j: int) -> list[float]:
        """Column ``j`` as ``float`` values (ValueError when a token is not a number)."""
        values = self._numbers.get(j)
        return TokenColumns.numbers(self.tokens(j), float) if values is None else values

    def equal(self, j: int, token: str) -> bool:
        """Whether every token of column ``j`` is ``token``."""
        a, b = self._fields[j]
        return len(token) <= b - a and bool((self._cells(j) == token.rjust(b - a).encode("ascii", "replace")).all())

    def names(self, j: int, what: str) -> list[str]:
        """Column ``j``'s tokens (one ``str`` object per run of equal tokens); ValueError when one does not start
        with a letter."""
        cells = self._cells(j)
        starts = np.concatenate(([0], np.flatnonzero(cells[1:] != cells[:-1]) + 1))
        lengths = np.diff(np.append(starts, self.nrows))
        a, b = self._fields[j]
        text, stride = self._block, self._grid.shape[1]
        names = check_names([text[i * stride + a:i * stride + b].lstrip(" ") for i in starts.tolist()], what)
        return np.repeat(np.array(names, dtype=object), lengths).tolist()
