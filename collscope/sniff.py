"""The one rule every format table's detection follows: the first row whose test accepts the input wins, and a
test that crashes on an odd input counts as a no (a sniffer must never decide the outcome by crashing)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

__all__ = ["Sniffed", "first_accepting"]


class Sniffed(Protocol):
    """A row of a format table: something with a ``looks_like`` test."""

    @property
    def looks_like(self) -> Callable[[Any], bool]: ...


RowT = TypeVar("RowT", bound=Sniffed)


def first_accepting(rows: Iterable[RowT], data: Any) -> RowT | None:
    """The first of ``rows`` whose ``looks_like(data)`` is true, or None."""
    for row in rows:
        try:
            if row.looks_like(data):
                return row
        except Exception:  # a sniffer must never decide the outcome by crashing
            continue
    return None
