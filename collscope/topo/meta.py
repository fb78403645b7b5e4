"""The ``meta.json`` of a capture directory: what ``topo collect`` writes, read back strictly.

:class:`CaptureMeta` is the one schema, for writing and reading. Reading (:func:`read_meta`) checks every known
field's type with no coercion: ``{"errors": 5}`` is a ParseError naming the file, the field, the value found and
the type expected. Every field has a default, so hand-written files (``{"host": "node01"}``) and the bundled
samples load; keys this version does not know (a newer writer's, or the samples' ``note``) are ignored, never
an error, so a capture from a newer collscope still loads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec

from collscope.errors import ParseError, shown
from collscope.files import decode_text, read_input_bytes
from collscope.json_input import load_json

__all__ = ["CaptureMeta", "META_FILE", "read_meta"]

META_FILE = "meta.json"
EXPECTED_META = "the meta.json of `collscope topo collect` (a JSON object)"


class CaptureMeta(msgspec.Struct, frozen=True, kw_only=True):
    """What ``topo collect`` saved: the ``meta.json`` of a capture directory."""

    host: str = ""
    """The node's host name; empty when unknown (the directory's name is used then)."""
    collscope_version: str = ""
    captured_at: str = ""
    """Local time, ``%Y-%m-%dT%H:%M:%S%z``."""
    tools: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    """Per capture file name: argv, return code, timed_out, duration_s (or ``missing``)."""
    errors: tuple[str, ...] = ()
    """Missing tools and failed runs, one line each."""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """The NCCL_*, CUDA_VISIBLE*, Slurm job/node variables of the capturing process."""
    files: tuple[str, ...] = ()
    """Capture files written, sorted."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``meta.json``."""
        return {"host": self.host, "collscope_version": self.collscope_version, "captured_at": self.captured_at,
                "tools": self.tools, "errors": list(self.errors), "env": dict(self.env), "files": list(self.files)}


_FIELD_TYPES = {"host": "text", "collscope_version": "text", "captured_at": "text",
                "tools": "a mapping of capture file name -> a JSON object", "errors": "a list of text",
                "env": "a mapping of variable -> text", "files": "a list of text"}
"""What each field must hold, in words."""
_AT_FIELD = re.compile(r" - at `\$\.(\w+)")


def read_meta(directory: Path) -> CaptureMeta | None:
    """The ``meta.json`` of ``directory``, or ``None`` where it has none; ParseError naming the file (and the line
    or the field) when it is not a regular file, not UTF-8, not JSON, or a field has the wrong type."""
    path = directory / META_FILE
    if not path.exists() and not path.is_symlink():
        return None
    text = decode_text(read_input_bytes(path, EXPECTED_META), str(path), EXPECTED_META)
    doc = load_json(text, str(path), EXPECTED_META)
    if not isinstance(doc, dict):
        raise ParseError(str(path), None, EXPECTED_META, found=f"a JSON {type(doc).__name__}")
    try:
        return msgspec.convert(doc, CaptureMeta, strict=True)
    except msgspec.ValidationError as exc:
        raise _field_error(str(path), doc, exc) from None


def _field_error(source: str, doc: dict[str, Any], exc: msgspec.ValidationError) -> ParseError:
    m = _AT_FIELD.search(str(exc))
    if m is None or m[1] not in _FIELD_TYPES:
        return ParseError(source, None, EXPECTED_META, found=str(exc))
    name = m[1]
    return ParseError(source, None, f"{json.dumps(name)} to be {_FIELD_TYPES[name]}",
                      found=_json_text(doc[name]))


def _json_text(value: Any) -> str:
    """``value`` as JSON for a message (ParseError bounds its length), its bounded repr if it cannot be."""
    try:
        return json.dumps(value, default=str)
    except (RecursionError, ValueError):
        return shown(value)
