"""Figures show text as written: matplotlib's math text and TeX are off for every label collscope draws.

A label comes from an input (a configuration value ``NCCL_TOPO_FILE=$SLURM_SUBMIT_DIR/topo_$SLURM_JOB_ID.xml``,
a capture's host name): two ``$`` in it would be parsed as math text and a bad formula raises at save time.
Text objects take ``text.parse_math`` and ``text.usetex`` when they are made, tick labels when the figure is
drawn, so both the building and the saving of a figure run inside :func:`plain_text`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar, cast

__all__ = ["plain_text", "PLAIN_TEXT_RC"]

PLAIN_TEXT_RC = {"text.parse_math": False, "text.usetex": False}
"""matplotlib settings (3.5 and later) under which a label's ``$`` is a dollar sign."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


@contextmanager
def _rc() -> Iterator[None]:
    import matplotlib  # imported here: the CLI's light commands never load it

    with matplotlib.rc_context(cast(Any, PLAIN_TEXT_RC)):  # its stubs type the keys as a Literal
        yield


def plain_text(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """``func`` run with :data:`PLAIN_TEXT_RC` in force (a decorator for functions that build or save figures)."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with _rc():
            return func(*args, **kwargs)

    return wrapper
