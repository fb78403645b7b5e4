"""The results table of nccl-tests text output: column layout from the header, row lines -> Blocks.

Columns are found by the names of the header line (nccl-tests ``src/util.cu`` writeResultHeader, and the
older generations in ``shared/reference/nccl-facts.md`` 4.3): ``size count type [redop] [root]``, then per
placement ``time|cputime algbw busbw [#wrong|error]`` with optional ``i_min i_max i_p99 i_cv%`` columns,
and an optional trailing ``timestamp`` (two tokens: date and time).

Rows are converted a block at a time, column by column (the ingest hot path): the tokens of consecutive rows
are split once, each column is a stride of the token list, numbers are read by msgspec's JSON decoder (the
same values as ``int``/``float``, which take over for anything that is not a JSON number), and a column that
holds one value throughout (``-1`` roots, ``0`` wrong counts) is noted as uniform instead of converted. A
block whose tokens do not line up (a damaged row, noise starting with a digit) raises ValueError and the caller
retries its lines one by one, which places any error on its line.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import count
from typing import Any, NamedTuple, Protocol

import msgspec

from collscope.collectives.nccl_tests.records import DTYPE_BYTES, Block, Placement, valid_times
from collscope.collectives.record import SIZE_LIMIT_BYTES
from collscope.errors import ParseError, shown
from collscope.vocab.ops import DTYPE_ALIASES

__all__ = ["Layout", "layout_from_header", "layout_from_row", "convert_block", "convert_columns", "Columns",
           "TokenColumns", "check_names", "new_seen", "Seen", "OutOfRange"]

_NO_REDOP = {"none": None}
_CHECK_NAMES = {"#wrong": "wrong", "wrong": "wrong", "error": "error", "#error": "error"}
RepeatKey = tuple[int, str, "str | None", "int | None"]
Seen = defaultdict[RepeatKey, "count[int]"]
"""Per (size, type, redop, root): a counter of the rows seen so far (``next`` gives a row's ``repeat``)."""
_INTS = msgspec.json.Decoder(list[int]).decode
_FLOATS = msgspec.json.Decoder(list[float]).decode
_INF = float("inf")


def new_seen() -> Seen:
    """An empty repeat counter for one run."""
    return defaultdict(count)


def _numbers(tokens: list[str], kind: type) -> list[Any]:
    """``list(map(kind, tokens))`` for ``int`` or ``float``, at C speed when the tokens are JSON numbers.

    A JSON number reads as the same value as ``int(token)``/``float(token)``; anything else (``nan``, ``+1``,
    ``012``, a number too large for JSON, a float ``-0...``) goes through ``kind`` itself, which accepts or rejects it.
    """
    text = "[" + ",".join(tokens) + "]"
    if kind is int or ("[-0" not in text and ",-0" not in text):  # JSON reads float -0.0 as 0.0
        try:
            values: list[Any] = (_INTS if kind is int else _FLOATS)(text)
            if len(values) == len(tokens):  # a token "1,2" reads as two
                return values
        except msgspec.DecodeError:
            pass
    return list(map(kind, tokens))


class OutOfRange(ValueError):
    """A row's values read as their types but no record can hold them; the message says what was expected."""


class Layout(NamedTuple):
    ntokens: int
    """Tokens per row (a timestamp counts two)."""
    i_count: int
    i_type: int
    i_redop: int
    """-1 when the table has no such column (the same for ``i_root``, ``i_count``)."""
    i_root: int
    groups: tuple[tuple[int, int, int, int, str], ...]
    """Per placement: indexes of time, algbw, busbw, check (-1: none) and the check kind (wrong|error)."""
    timestamp: bool
    cputime: bool
    described: str


def layout_from_header(names: list[str], source: str, lineno: int) -> Layout:
    """The layout named by a header line's tokens (``size count type redop root time algbw ...``)."""
    index = {"count": -1, "type": -1, "redop": -1, "root": -1}
    groups: list[tuple[int, int, int, int, str]] = []
    cputime = False
    for i, name in enumerate(names):
        if name in index and index[name] < 0 and not groups:
            index[name] = i
        elif name in ("time", "cputime"):
            cputime = cputime or name == "cputime"
            if names[i + 1: i + 3] != ["algbw", "busbw"]:
                raise ParseError(source, lineno, "'algbw busbw' after 'time' in the column header",
                                 found=" ".join(names))
            kind = _CHECK_NAMES.get(names[i + 3], "") if i + 3 < len(names) else ""
            groups.append((i, i + 1, i + 2, i + 3 if kind else -1, kind))
    if not groups or index["type"] < 0 or len(groups) > 2 or names[0] != "size":
        raise ParseError(source, lineno, "a column header 'size count type ... time algbw busbw ...'",
                         found=" ".join(names))
    timestamp = names[-1] == "timestamp"
    return Layout(len(names) + (1 if timestamp else 0), index["count"], index["type"], index["redop"],
                  index["root"], tuple(groups), timestamp, cputime, " ".join(names))


def layout_from_row(parts: list[str]) -> Layout | None:
    """Columns of a table pasted without its header, from the shape of one row (8 timing columns)."""
    lead = len(parts) - 8
    if lead not in (3, 4, 5) or not (parts[0].isdigit() and parts[1].isdigit()) or parts[2] not in DTYPE_BYTES:
        return None
    names = ["size", "count", "type"]
    if lead == 4:
        names.append("root" if parts[3].lstrip("-").isdigit() else "redop")
    elif lead == 5:
        names += ["redop", "root"]
    check = "error" if any(c in parts[lead + 3] for c in ".e") else "#wrong"
    names += ["time", "algbw", "busbw", check] * 2
    return layout_from_header(names, "<row>", 0)


def _wrong(tok: str) -> int | None:
    if tok == "N/A":
        return None
    return int(float(tok))  # %6g prints large counts as 1.2e+06


def _check_column(tokens: list[str], kind: str) -> list[Any]:
    if kind == "wrong":
        try:
            return list(map(int, tokens))
        except ValueError:
            return [_wrong(t) for t in tokens]
    try:
        return list(map(float, tokens))
    except ValueError:
        return [None if t == "N/A" else float(t) for t in tokens]


def check_names(tokens: list[str], what: str) -> list[str]:
    """``tokens`` when each starts with a letter (a type or redop name), else ValueError."""
    for name in set(tokens):
        if not name[:1].isalpha():
            raise ValueError(f"{what} column holds {name!r}")
    return tokens


class TokenColumns:
    """The columns of a block split into tokens: column ``j`` is every ``ntokens``-th token from ``j``.

    The pure conversion; :class:`~.fixed.FixedColumns` has the same methods for fixed-width blocks.
    """

    __slots__ = ("_tokens", "_n")

    def __init__(self, tokens: list[str], ntokens: int) -> None:
        self._tokens = tokens
        self._n = ntokens

    numbers = staticmethod(_numbers)

    def tokens(self, j: int) -> list[str]:
        return self._tokens[j::self._n]

    def ints(self, j: int) -> list[int]:
        return _numbers(self._tokens[j::self._n], int)

    def floats(self, j: int) -> list[float]:
        return _numbers(self._tokens[j::self._n], float)

    def equal(self, j: int, token: str) -> bool:
        column = self._tokens[j::self._n]
        return column.count(token) == len(column)

    def names(self, j: int, what: str) -> list[str]:
        return check_names(self._tokens[j::self._n], what)


class Columns(Protocol):
    """What :func:`convert_columns` reads a block through (:class:`TokenColumns`, :class:`~.fixed.FixedColumns`)."""

    def tokens(self, j: int) -> list[str]: ...
    def ints(self, j: int) -> list[int]: ...
    def floats(self, j: int) -> list[float]: ...
    def equal(self, j: int, token: str) -> bool: ...
    def names(self, j: int, what: str) -> list[str]: ...


def convert_block(lay: Layout, tokens: list[str], nrows: int, seen: Seen, out: list[Block]) -> None:
    """Append the :class:`Block` of ``nrows`` rows whose tokens are ``tokens`` (all or nothing).

    Raises ValueError when the tokens are not ``nrows`` rows of this layout (see :func:`convert_columns`).
    """
    if len(tokens) != lay.ntokens * nrows:
        raise ValueError("rows do not line up with the header")
    convert_columns(lay, TokenColumns(tokens, lay.ntokens), nrows, seen, out)


def _check_64_bit(values: list[int], column: str) -> None:
    """A record's integers are 64-bit (record.Int64, what analysis' columns hold): a count of 1e20 is an input
    error here, never an OverflowError when the records are analysed."""
    if values and not -SIZE_LIMIT_BYTES <= min(values) <= max(values) < SIZE_LIMIT_BYTES:
        bad = max(values) if max(values) >= SIZE_LIMIT_BYTES else min(values)
        raise OutOfRange(f"every {column} within 64 bits (found {shown(bad)})")


def convert_columns(lay: Layout, cols: Columns, nrows: int, seen: Seen, out: list[Block]) -> None:
    """Append the :class:`Block` of the ``nrows`` rows in ``cols`` (all or nothing).

    ``seen`` counts rows per (size, type, redop, root) over the whole run, for ``repeat`` (``-N`` cycles).
    Raises ValueError when a value does not read as its column's type, or a time is negative.
    """
    n = lay.ntokens
    none: list[Any] = [None] * nrows
    uniform = {"root", "timestamp", "wrong", "error"}
    sizes = cols.ints(0)
    if max(sizes) >= SIZE_LIMIT_BYTES:
        raise OutOfRange(f"every size below 2**63 bytes (found {shown(max(sizes))})")
    counts: list[Any] = cols.ints(lay.i_count) if lay.i_count >= 0 else none
    if counts is not none:
        _check_64_bit(counts, "count")
    dtypes = cols.names(lay.i_type, "type")
    dtypes = list(map(DTYPE_ALIASES.get, dtypes, dtypes))  # collscope's names (float -> float32), C-level
    redops: list[Any] = none
    if lay.i_redop >= 0:
        names = cols.names(lay.i_redop, "redop")
        redops = list(map(_NO_REDOP.get, names, names))  # "none" -> None, C-level
    roots: list[Any] = none
    if lay.i_root >= 0 and not cols.equal(lay.i_root, "-1"):  # -1 (no root) in every row of the usual table
        values = cols.ints(lay.i_root)
        _check_64_bit(values, "root")
        if max(values) >= 0:
            roots = values if min(values) >= 0 else [r if r >= 0 else None for r in values]
            uniform.discard("root")
    stamps: list[Any] = none
    if lay.timestamp:
        stamps = [f"{d} {t}" for d, t in zip(cols.tokens(n - 2), cols.tokens(n - 1), strict=True)]
        uniform.discard("timestamp")
    placements = []
    in_place_flags = (False, True) if len(lay.groups) == 2 else (True,)  # trace replays print in-place only
    for in_place, (ti, ai, bi, ci, kind) in zip(in_place_flags, lay.groups, strict=True):
        times = cols.floats(ti)
        if not valid_times(times):
            raise ValueError("a negative or undefined time")
        if not 0 < min(times) <= max(times) < _INF:
            raise OutOfRange("every time finite and > 0 (no bandwidth follows from a time of 0)")
        checks = none
        if ci >= 0:
            if kind == "wrong" and cols.equal(ci, "0"):
                checks = [0] * nrows
            else:
                checks = _check_column(cols.tokens(ci), kind)
                if kind == "wrong":
                    _check_64_bit([c for c in checks if c is not None], "#wrong")
                uniform.discard(kind)
        placements.append(Placement(in_place, times, cols.floats(ai), cols.floats(bi),
                                    none if kind == "error" else checks, checks if kind == "error" else none))
    repeats = list(map(next, map(seen.__getitem__, zip(sizes, dtypes, redops, roots, strict=True))))
    out.append(Block(sizes, counts, dtypes, redops, roots, stamps, repeats, tuple(placements), frozenset(uniform)))
