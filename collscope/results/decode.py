"""Strict decoding of Measurement JSONL: bytes or a file -> Measurements, errors naming file, line and field.

Types are checked as declared on :class:`~collscope.collectives.record.Measurement`, with no coercion: a
string for a bool (``"ok": "false"``), a fraction for an integer (``"size_bytes": 1048576.9``) and an unknown
field are errors. JSON does not tell ``2`` from ``2.0``, so an integer is accepted where a float is declared,
and a whole float (``8.0``) where an integer is (older writers); nothing else is converted.
A last line without its newline (a writer killed mid-line) is reported as such, not silently dropped. Blank
lines are skipped.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import msgspec

from collscope.collectives.record import Measurement
from collscope.errors import ParseError
from collscope.files import read_input_bytes

__all__ = ["decode_records", "read_jsonl", "read_bytes", "EXPECTED_RECORD"]

EXPECTED_RECORD = "a Measurement record as a JSON object"
_DECODER = msgspec.json.Decoder(Measurement)
_INT_FIELDS = tuple(name for name, kind in typing.get_type_hints(Measurement).items()
                    if int in (kind, *typing.get_args(kind)) and float not in typing.get_args(kind))
"""Fields declared ``int`` or ``int | None``: where a whole float is taken as the integer it is."""
_PATH = re.compile(r" - at `\$(?:\[\d+\])?\.?([^`]*)`$")


def _problem(exc: msgspec.DecodeError) -> str:
    """``Expected `int`, got `float` - at `$.size_bytes``` -> ``size_bytes: Expected `int`, got `float```."""
    text = str(exc)
    m = _PATH.search(text)
    if m is None:
        return text
    field = m[1].split("[", 1)[0] or "record"
    return f"{field}: {text[: m.start()]}"


def _whole_floats(line: bytes) -> Measurement:
    """The record of a line whose only fault may be whole floats (``8.0``) in integer fields."""
    doc = json.loads(line)
    if isinstance(doc, dict):
        for name in _INT_FIELDS:
            value = doc.get(name)
            if isinstance(value, float) and value.is_integer():
                doc[name] = int(value)
    return msgspec.convert(doc, Measurement)


def _line_by_line(data: bytes, source: str) -> list[Measurement]:
    """The slow path, after decode_lines refused the bytes: each line alone, the first bad one named."""
    records = []
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            records.append(_DECODER.decode(line))
        except RecursionError:  # msgspec's own depth limit (a record nests 2 levels)
            raise ParseError(source, lineno, EXPECTED_RECORD, found="JSON nested too deeply") from None
        except msgspec.DecodeError as exc:
            try:
                records.append(_whole_floats(line))
            except (ValueError, TypeError):  # json.JSONDecodeError and msgspec.ValidationError are ValueErrors
                raise ParseError(source, lineno, EXPECTED_RECORD, found=_problem(exc)) from None
            except RecursionError:
                raise ParseError(source, lineno, EXPECTED_RECORD, found="JSON nested too deeply") from None
    return records


def decode_records(data: bytes, source: str) -> list[Measurement]:
    """The records of JSONL bytes read from ``source`` (a file name, for the messages)."""
    tail = data.rstrip(b" \t\r")
    if tail and not tail.endswith(b"\n"):
        raise ParseError(source, data.count(b"\n") + 1, "a complete JSON line (the file ends mid-line)")
    try:
        return _DECODER.decode_lines(data)
    except (msgspec.DecodeError, RecursionError):
        return _line_by_line(data, source)


def read_bytes(path: Path | str, what: str = "a Measurement JSONL file", *, follow_links: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (:func:`collscope.files.read_input_bytes`: a FIFO, a directory or
    a dangling symlink is a ParseError naming it, never opened for a blocking read). ``follow_links=False`` for a
    file collscope made itself (a results directory's, a locate step's): a symbolic link there is a ParseError,
    never followed."""
    return read_input_bytes(path, what, follow_links=follow_links)


def read_jsonl(path: Path | str, *, follow_links: bool = True) -> list[Measurement]:
    """The records of a Measurement JSONL file (see the module doc for what is an error; ``follow_links``: as
    :func:`read_bytes`)."""
    return decode_records(read_bytes(path, follow_links=follow_links), str(path))
