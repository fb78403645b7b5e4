"""Large blocks of table rows read with numpy, when every row has the same fixed-width layout.

nccl-tests prints its rows with fixed widths (``%12li %12li %8s %6s %6i %7s %6s %6s %6s ...``, right-aligned),
so in a block of rows every token ends at the same character position. When that holds for every row of a
block (the lines the same length, printable ASCII only, each token ending where row 0's does), the block is a
character matrix whose columns are fixed ranges, and the numeric columns are read together by arithmetic on
that matrix instead of one ``str`` per token.

Only what is read exactly as the pure path reads it is converted here: tokens of at most 15 characters made of
digits and at most one ``.`` (integer columns: digits only). Their digits form an integer m < 10**15 < 2**53,
put together exactly by integer arithmetic on 8-byte words of the line, and a decimal with k digits after its
point is m / 10**k, one correctly rounded IEEE division: the same double as ``float(token)``. Any other token
(``-1.5``, ``1.2e+06``, ``N/A``, ``+1``, ``nan``) sends its column to the pure conversion of :mod:`.text`, from
the column's own token strings, so every value is the one the pure path makes; a block that is not fixed-width
is split and converted by the pure path.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from collscope.collectives.nccl_tests.text import Layout, TokenColumns, check_names

__all__ = ["FixedColumns", "fixed_columns"]

_WINDOW = 15
"""Longest token read by arithmetic: 14 digits and a point, below 10**15 < 2**53 (exact in float64)."""
_P10 = np.array([10.0 ** k for k in range(_WINDOW + 1)])
"""Exact doubles 1, 10, ..., 1e15."""
_SPACE, _DOT, _ZERO = 32, 46, 48


@lru_cache(maxsize=64)
def _eights(windows: tuple[tuple[int, int], ...]) -> tuple[list[int], Any, Any, list[int], list[int]] | None:
    """How to read fields ending where ``windows`` do as 8-byte words (at most two per field): the words' offsets
    in a line, a mask per word (0x0F on the window's bytes, 0 on the others), the power of ten each word's value
    is worth in its field, and per field the index of its last word and of the word before (an extra zero word
    when there is none). None when a word would have to start before the line."""
    offsets, masks, worth, last, before = [], [], [], [], []
    for first, b in windows:
        hi = b
        while hi > first:
            if hi < 8 and b < 8:  # the word would start before the line (its value would need a division)
                return None
            at = max(hi - 8, 0)
            offsets.append(at)
            masks.append(sum(0x0F << (8 * i) for i in range(8) if max(first, hi - 8) <= at + i < hi))
            worth.append(10 ** (b - hi - (at + 8 - hi)))  # the place of byte hi - 1, less the bytes after hi
            hi = max(first, hi - 8)
        n = len(offsets)
        last.append(n - 1 if hi == first and b - first <= 8 else n - 2)
        before.append(n - 1 if b - first > 8 else -1)
    offsets.append(0)
    masks.append(0)  # the zero word
    worth.append(0)
    before = [len(offsets) - 1 if i < 0 else i for i in before]
    return offsets, np.array(masks, dtype=np.uint64), np.array(worth, dtype=np.uint64), last, before


def _digits(words: Any) -> Any:
    """Each 8-byte word (little-endian, each byte 0..15) as the decimal number its bytes spell, first byte first:
    three multiply-and-shift steps on all words at once (SWAR; no lane overflows: 15 * 11111111 < 2**32)."""
    words = (words * 10 + (words >> 8)) & 0x00FF00FF00FF00FF
    words = (words * 100 + (words >> 16)) & 0x0000FFFF0000FFFF
    return (words * 10000 + (words >> 32)) & 0xFFFFFFFF


@lru_cache(maxsize=256)
def _field_words(a: int, b: int) -> tuple[list[int], Any]:
    """Bytes ``a:b`` of a line as 8-byte words: their offsets and masks (0xFF on the field's bytes)."""
    offsets, masks = [], []
    hi = b
    while hi > a:
        at = max(hi - 8, 0)
        offsets.append(at)
        masks.append(sum(0xFF << (8 * i) for i in range(8) if max(a, hi - 8) <= at + i < hi))
        hi = max(a, hi - 8)
    return offsets, np.array(masks, dtype=np.uint64)


def fixed_columns(text: str, start: int, end: int, lay: Layout) -> FixedColumns | None:
    """The columns of the lines ``text[start:end]`` of the table ``lay`` when they share one fixed-width layout,
    else None.

    The lines are whole, joined by ``\n`` (the break after the last one not included), as the parser finds them.
    """
    width = text.find("\n", start, end)
    width = end - start if width < 0 else width - start
    nrows = (end - start + 1) // (width + 1)
    if width < 16 or end - start + 1 != nrows * (width + 1):
        return None
    lines = text[start:end + 1] if end < len(text) else text[start:end] + "\n"
    if not lines.isascii():
        return None
    raw = np.frombuffer(lines.encode("ascii"), dtype=np.uint8)
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
    return FixedColumns(text, start, raw, nrows, list(zip(starts.tolist(), stops.tolist(), strict=True)), lay)


class FixedColumns:
    """The columns of a fixed-width block (the same methods as :class:`~.text.TokenColumns`).

    Field ``j`` is the character range from the end of token ``j - 1`` to the end of token ``j``: the token,
    right-aligned, after its separating spaces. The numeric columns of the layout (size, count, and each
    placement's time, algbw, busbw) are read together when the block is made.
    """

    __slots__ = ("_text", "_base", "_raw", "_grid", "_lines", "_fields", "_numbers", "nrows")

    def __init__(self, text: str, base: int, raw: Any, nrows: int, fields: list[tuple[int, int]],
                 lay: Layout) -> None:
        self._text = text
        self._base = base
        self._raw = raw
        self._grid = raw.reshape(nrows, -1)
        stride = self._grid.shape[1]
        self._lines = np.ndarray((nrows, stride - 7), dtype="<u8", buffer=raw, strides=(stride, 1))
        """An 8-byte word (little-endian) at each byte of each line."""
        self._fields = fields
        self.nrows = nrows
        self._numbers: dict[int, list[Any]] = {}
        ints = [0] + ([lay.i_count] if lay.i_count >= 0 else [])
        floats = [j for group in lay.groups for j in group[:3]]
        self._read_numbers(ints, floats)

    def tokens(self, j: int) -> list[str]:
        """Column ``j`` as the token strings ``str.split`` gives."""
        a, b = self._fields[j]
        text, stride, base = self._text, self._grid.shape[1], self._base
        return [text[i + a:i + b].lstrip(" ") for i in range(base, base + stride * self.nrows, stride)]

    def _words(self, j: int) -> Any:
        """Field ``j`` of every row as 8-byte words (the bytes of other fields zeroed): rows x words."""
        offsets, masks = _field_words(*self._fields[j])
        return self._lines[:, offsets] & masks

    def _read_numbers(self, ints: list[int], floats: list[int]) -> None:
        """Read every column of ``ints`` and ``floats`` whose tokens all qualify (module docstring) at once.

        Each field's last (at most 15) characters are read as 8-byte words whose digits are combined by integer
        arithmetic (exact); per character position, counts over the rows say which fields hold a point or anything else.
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
        words = _eights(tuple(windows))
        if words is None:
            return
        offsets, masks, worth, last, before = words
        lines = self._lines
        # '0'..'9' & 15 = 0..9, ' ' & 15 = 0, '.' & 15 = 14 (taken off below)
        places = _digits(lines[:, offsets] & masks) * worth
        marked = (places[:, last] + places[:, before]).astype(np.float64)  # < 1.6e15: exact
        dot = (raw == _DOT).reshape(nrows, stride)
        dots = np.add.reduce(dot, axis=0, dtype=np.uint16)  # per position: the rows with a point there
        other = np.add.reduce(((raw - _ZERO) >= 10).reshape(nrows, stride) & ~dot & (grid != _SPACE), axis=0,
                              dtype=np.uint16)  # ... or anything but a digit, a point or a space
        last = grid[:, [b - 1 for _, b in windows]]
        digit_last = ((last - _ZERO) < 10).all(axis=0).tolist()
        dots_at, others = dots.tolist(), other.tolist()
        scale = np.ones((nrows, len(cols)))
        pointed = np.zeros((nrows, len(cols)), dtype=bool)
        for i, (j, (first, b)) in enumerate(zip(cols, windows, strict=True)):
            at = [p for p in range(b - first) if dots_at[first + p]]
            if any(others[first:b]) or (j in ints and (at or not digit_last[i])):
                continue
            if not (digit_last[i] or self._has_digit(j)):  # "5." is a number, "." is not
                continue
            if len(at) == 1 and dots_at[first + at[0]] == nrows:  # the point at one place in every row
                scale[:, i] = _P10[b - first - 1 - at[0]]
                pointed[:, i] = True
            elif len(at):  # at different places: per row (at most one each), 10**(places after it)
                places = [dot[:, first + p] for p in at]
                npoints = sum(places)
                if (npoints > 1).any():
                    continue
                scale[:, i] = sum(np.where(d, _P10[b - first - 1 - p], 0.0)
                                  for d, p in zip(places, at, strict=True))
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
        if len(token) > b - a or not token.isascii():
            return False
        offsets, masks = _field_words(a, b)
        line = np.frombuffer((" " * a + token.rjust(b - a)).ljust(b + 8).encode("ascii"), dtype=np.uint8)
        pattern = np.ndarray((len(line) - 7,), dtype="<u8", buffer=line, strides=(1,))[offsets] & masks
        return bool((self._words(j) == pattern).all())

    def names(self, j: int, what: str) -> list[str]:
        """Column ``j``'s tokens (one ``str`` object per run of equal tokens); ValueError when one does not start
        with a letter."""
        words = self._words(j)
        starts = np.concatenate(([0], np.flatnonzero((words[1:] != words[:-1]).any(axis=1)) + 1))
        lengths = np.diff(np.append(starts, self.nrows))
        a, b = self._fields[j]
        text, stride, base = self._text, self._grid.shape[1], self._base + a
        names = check_names([text[base + i * stride:base + i * stride + b - a].lstrip(" ") for i in starts.tolist()],
                            what)
        return np.repeat(np.array(names, dtype=object), lengths).tolist()
