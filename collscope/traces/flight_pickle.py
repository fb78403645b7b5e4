"""Read a Flight Recorder dump in its default form: a pickle, read as plain data and nothing else.

``torch._C._distributed_c10d._dump_fr_trace()`` returns it, and ``TORCH_NCCL_DUMP_ON_TIMEOUT`` writes it to
``$TORCH_FR_DUMP_TEMP_FILE<rank>`` (formerly ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, default ``/tmp/nccl_trace_rank_``):
a file without an extension. PyTorch writes it with its own pickler (``c10d/FlightRecorderDetail.hpp``
``dump_dict`` + ``TraceUtils.h`` ``pickle_str``, protocol 2, ``tag_aggregates`` off): a dict of ``version``,
``pg_config``, ``comm_lib_version``, ``pg_status``, ``entries`` and ``nccl_comm_state`` made of dicts, lists,
tuples (``process_group``), strings, ints, floats, bools and None only. So this reader accepts exactly those:

- ``find_class`` always refuses (a GLOBAL / STACK_GLOBAL / INST / EXT opcode, the only way a pickle names a
  callable that REDUCE / BUILD / OBJ / NEWOBJ could run): the error names the file and the refused global, and
  nothing of the pickle has run; persistent ids are refused the same way;
- the unpickler is Python's own pure-Python one (``pickle._Unpickler``), whose memo is a dict: the C one sizes
  its memo array by the largest index a PUT names, so a 12-byte pickle saying ``LONG_BINPUT 4294967295`` makes it
  allocate 64 GiB;
- the loaded value may hold only those builtin types (no bytes, sets, ...), and is walked with a budget of
  visits proportional to the file's size, so a pickle whose objects refer to themselves or fan out through
  shared references (a "pickle bomb") is refused rather than walked;
- a file larger than :data:`MAX_PICKLE_BYTES` is refused unless ``$COLLSCOPE_MAX_TRACE_BYTES`` allows it.

The plain dict then goes through the same reader as the JSON dump (:mod:`collscope.traces.flight`).
"""

from __future__ import annotations

import io
import pickle
from typing import Any, NoReturn

from collscope.errors import ParseError
from collscope.traces.flight import flight_recorder_from_doc
from collscope.traces.record import RankTrace

__all__ = ["MAX_PICKLE_BYTES", "PLAIN_TYPES", "looks_like_flight_pickle", "parse_flight_pickle", "is_pickle",
           "load_plain_pickle"]

MAX_PICKLE_BYTES = 64 * 1024**2
"""A Flight Recorder pickle of 2,000 entries with stack frames is a few MB (250 KB unpickles in about 0.3 s); the
objects a pickle unpacks into take several times its size in memory."""

PLAIN_TYPES = (dict, list, tuple, str, int, float, bool, type(None))
"""The only types a Flight Recorder pickle may hold."""

_FR_KEYS = (b"entries", b"pg_config", b"pg_status", b"nccl_comm_state", b"comm_lib_version")
_EXPECTED = "a Flight Recorder dump (a pickle of plain data: dicts, lists, strings, numbers)"
_VISITS_PER_BYTE = 4
"""Each object of a tree-shaped pickle costs at least one opcode byte; shared references cost two bytes each."""


class _Refused(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class _PlainUnpickler(pickle._Unpickler):
    """An unpickler that builds builtin containers and scalars only: every global and persistent id is refused
    before anything is looked up, imported or called."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise _Refused(f"the global {module}.{name}")

    def persistent_load(self, pid: Any) -> NoReturn:
        raise _Refused("a persistent id")


def is_pickle(head: bytes) -> bool:
    """A pickle of protocol 2 or later starts with the PROTO opcode and its version."""
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def looks_like_flight_pickle(head: bytes) -> bool:
    """A pickle that names a Flight Recorder key near its start (``pg_config`` and ``version`` come first)."""
    return is_pickle(head) and any(key in head[:65536] for key in _FR_KEYS)


def _check_plain(value: Any, source: str, budget: int) -> None:
    """Every object reachable from ``value`` is one of :data:`PLAIN_TYPES` (dict keys: str or int), visiting at
    most ``budget`` objects."""
    stack = [value]
    visits = 0
    while stack:
        obj = stack.pop()
        visits += 1
        if visits > budget:
            raise ParseError(source, None, _EXPECTED, found=f"objects that refer to themselves or to each other "
                             f"more than {budget} times (a pickle bomb?): refused")
        kind = type(obj)
        if kind is dict:
            for key in obj:
                if type(key) not in (str, int):
                    raise ParseError(source, None, _EXPECTED, found=f"a dict key of type {type(key).__name__}")
            stack.extend(obj.values())
        elif kind is list or kind is tuple:
            stack.extend(obj)
        elif kind not in PLAIN_TYPES:
            raise ParseError(source, None, _EXPECTED, found=f"a value of type {kind.__name__}: refused")


def load_plain_pickle(data: bytes, source: str) -> Any:
    """The value a pickle of plain data holds; ParseError naming ``source`` for anything else (a refused global
    is named; nothing it refers to is imported or run)."""
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except _Refused as exc:
        raise ParseError(source, None, _EXPECTED, found=f"a pickle that asks for {exc.what}: refused, nothing in "
                         "it was run") from None
    except RecursionError:
        raise ParseError(source, None, _EXPECTED, found="a pickle nested too deeply") from None
    except MemoryError:
        raise ParseError(source, None, _EXPECTED, found="a pickle too large to unpack in memory") from None
    except Exception as exc:  # UnpicklingError, EOFError, ValueError, TypeError...: damaged or hostile opcodes
        raise ParseError(source, None, _EXPECTED, found=f"a damaged pickle ({type(exc).__name__}: {exc})") from None
    _check_plain(value, source, _VISITS_PER_BYTE * len(data) + 64)
    return value


def parse_flight_pickle(data: bytes, source: str, rank_hint: int | None) -> list[RankTrace]:
    doc = load_plain_pickle(data, source)
    if not isinstance(doc, dict):
        raise ParseError(source, None, "a Flight Recorder dump (a dict with version, pg_config, entries)",
                         found=f"a pickled {type(doc).__name__}")
    return [flight_recorder_from_doc(doc, source, rank=rank_hint)]
