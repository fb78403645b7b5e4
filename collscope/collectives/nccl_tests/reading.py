"""How nccl-tests text is read, around the parser itself (:mod:`.parse`): one kind of line break, the parse's
garbage-collection pause and error net, and the error that marks a second run in one input (:mod:`.runs` reads
the runs one by one when it sees it).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from collscope.errors import ParseError
from collscope.files import size_limit_from_env

__all__ = ["one_break", "parsing", "SecondRun", "text_cap", "MAX_TEXT_BYTES", "MAX_TEXT_BYTES_ENV"]

MAX_TEXT_BYTES = 256 * 2**20
"""The largest nccl-tests text read unless ``$COLLSCOPE_MAX_INPUT_BYTES`` allows more. The text is read whole and
every row becomes a record held in memory: about 10 bytes of memory per byte of text (``bench/ingest_memory.py``:
1.9 GB for 200 MB), so 256 MiB needs ~2.5 GB. Published outputs are kilobytes to a few megabytes."""
MAX_TEXT_BYTES_ENV = "COLLSCOPE_MAX_INPUT_BYTES"


def text_cap() -> tuple[int, str]:
    """(the cap, the words the refusal adds) for an nccl-tests text file, ``$COLLSCOPE_MAX_INPUT_BYTES`` winning."""
    cap = size_limit_from_env(MAX_TEXT_BYTES_ENV, "512M or 4G")
    cap = MAX_TEXT_BYTES if cap is None else cap
    return cap, (f" (read whole, ~10 bytes of memory per byte: split the file, or set {MAX_TEXT_BYTES_ENV}=4G to "
                 "read it anyway)")


_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")
_BREAKS_NOT_ASCII = ("\x85", "\u2028", "\u2029")


def one_break(text: str) -> str:
    """``text`` with every line break a ``\\n`` (as ``str.splitlines`` breaks it), the lines (and their numbers)
    the same; ``text`` itself when it has no other break."""
    if any(c in text for c in _BREAKS) or (not text.isascii() and any(c in text for c in _BREAKS_NOT_ASCII)):
        return "\n".join(text.splitlines())
    return text


@contextmanager
def parsing(source: str) -> Iterator[None]:
    """Garbage collection off (the parse allocates no cycles; collections over 10^5 fresh records only cost
    time), and any error that is not a ParseError turned into one (a safety net)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    except ParseError:
        raise
    except (ValueError, IndexError, OverflowError, RecursionError) as exc:  # pragma: no cover - a safety net
        raise ParseError(source, None, "nccl-tests output", found=f"{type(exc).__name__}: {exc}") from exc
    finally:
        if gc_was_enabled:
            gc.enable()


class SecondRun(ParseError):
    """A second run starts after table rows (:func:`.runs.parse_nccl_tests_runs` then reads the runs one by one)."""
