"""Sweep spec files (YAML or JSON) -> SweepSpec, decoded with msgspec.

The file's shape is a msgspec Struct derived from SweepSpec's fields (``forbid_unknown_fields``), so an unknown
key, a wrong type and a bad value are each a ConfigError naming the file, the field and what was expected.
The file is looser than the dataclass where people write it loosely: ``ops: all_reduce`` (one op),
``min_bytes: 1K`` (a size with a suffix), a grid value as a scalar or a list of scalars (``default``, ``""`` or
null for unset). Choices (``engine``, ``dtype``, ...) are read as text and checked by SweepSpec itself, whose
messages list the valid values. A key left out takes SweepSpec's default; ``name`` defaults to the file name.
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from collscope.errors import ConfigError, ParseError, shown
from collscope.files import read_input_text
from collscope.sweeps.spec import SPEC_KEYS, SweepSpec
from collscope.units import parse_size

__all__ = ["load_spec", "spec_from_dict", "decode_spec"]

_Unset = msgspec.UnsetType

_LOOSE: dict[str, Any] = {
    "min_bytes": int | str,
    "max_bytes": int | str,
    "ops": str | list[str],
    "grid": dict[str, Any],
    "per_op_grid": dict[str, Any],
    "fixed_env": dict[str, Any],
    "variants": list[dict[str, Any]],
}
"""Fields a file writes more loosely than the dataclass holds them; SweepSpec normalises the values."""

_EXPECTED: dict[str, str] = {
    "min_bytes": "a size such as 8, '1K' or '1M'",
    "max_bytes": "a size such as 8, '1K' or '1M'",
    "ops": "an op or a list of ops",
    "grid": "a mapping of knob -> values",
    "per_op_grid": "a mapping of op -> grid",
    "fixed_env": "a mapping of variable -> value",
    "variants": "a list of mappings of knob -> value",
}
"""What a field's value should look like, in words, where the type's name would not say it."""

_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "text",
               "object": "a mapping", "array": "a list", "null": "null"}


def _file_type(hint: Any) -> Any:
    """The type a file may write for a field of type ``hint``: Literal choices are read as text."""
    if typing.get_origin(hint) is typing.Literal:
        return str
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        out: Any = None
        for part in typing.get_args(hint):
            out = _file_type(part) if out is None else out | _file_type(part)
        return out
    return hint


def _spec_file_struct() -> type[msgspec.Struct]:
    hints = typing.get_type_hints(SweepSpec)
    shape = [(name, (_LOOSE.get(name) or _file_type(hints[name])) | _Unset, msgspec.UNSET) for name in SPEC_KEYS]
    return msgspec.defstruct("SweepSpecFile", shape, forbid_unknown_fields=True, frozen=True)


_FILE = _spec_file_struct()
_EXPECTED_AT = re.compile(r"^Expected `(?P<want>[^`]+)`(?:, got `(?P<got>[^`]+)`)? - at `(?P<path>[^`]+)`"
                          r"(?: in `(?P<where>[^`]+)`)?$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>.+)`")


_SEGMENT = re.compile(r"\.(\w+)|\[(\d+)\]|\[\.\.\.\]")


def _value_at(data: Any, path: str) -> tuple[bool, Any]:
    """(found, value) at a msgspec path such as ``$.ops[1]``; a ``[...]`` (a dict key) is not resolvable."""
    value = data
    for m in _SEGMENT.finditer(path.removeprefix("$")):
        key, index = m.group(1), m.group(2)
        if key is not None and isinstance(value, Mapping) and key in value:
            value = value[key]
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return False, None
    return True, value


def _explain(exc: msgspec.ValidationError, data: Mapping[str, Any]) -> str:
    """msgspec's message -> ``field: expected ..., got ...`` in the project's words."""
    text = str(exc)
    m = _UNKNOWN.match(text)
    if m:
        key = m.group("key")
        close = difflib.get_close_matches(key, SPEC_KEYS, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key {shown(key)}; valid keys: {', '.join(SPEC_KEYS)}{hint}"
    m = _EXPECTED_AT.match(text)
    if not m:
        return text
    if m.group("path") == "key":
        where = (m.group("where") or "$").removeprefix("$").removeprefix(".") or "the spec"
        return f"{where}: every key must be text"
    path = m.group("path").removeprefix("$.")
    if path in _EXPECTED:
        want = _EXPECTED[path]
    else:
        want = " or ".join(_TYPE_WORDS.get(w.strip(), w.strip()) for w in m.group("want").split("|"))
    found, value = _value_at(data, m.group("path"))
    got = shown(value) if found else _TYPE_WORDS.get(m.group("got") or "", "another type")
    return f"{path}: expected {want}, got {got}"


def _size(key: str, value: int | str) -> int:
    try:
        return parse_size(str(value))
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def spec_from_dict(data: Any, *, source: str = "<spec>") -> SweepSpec:
    """A validated SweepSpec from decoded data (the parsed YAML or JSON); errors name ``source`` and the key."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of spec keys, got {type(data).__name__}")
    try:
        try:
            shaped = msgspec.convert(data, _FILE)
        except msgspec.ValidationError as exc:
            raise ConfigError(_explain(exc, data)) from None
        given = {f: v for f in SPEC_KEYS if (v := getattr(shaped, f)) is not msgspec.UNSET}
        for key in ("min_bytes", "max_bytes"):
            if key in given:
                given[key] = _size(key, given[key])
        if isinstance(given.get("ops"), str):
            given["ops"] = (given["ops"],)
        for key in ("ops", "variants"):
            if key in given:
                given[key] = tuple(given[key])
        given.setdefault("name", Path(source).stem or "sweep")
        return SweepSpec(**given)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's several-line message -> one line: ``line L, column C: <problem>``."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(str(problem).split())


def _json_line(text: str, exc: msgspec.DecodeError) -> str:
    m = re.search(r"\(byte (\d+)\)", str(exc))
    if not m:
        return str(exc)
    line = text.encode()[:int(m.group(1))].count(b"\n") + 1
    return f"line {line}: {exc}"


SPEC_DEPTH_LIMIT = 32
"""Nesting levels a spec may have (a real one has 4: spec, grid, knob, values); deeper is refused, never a
RecursionError."""


class _SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without aliases and with a depth limit.

    An alias (``*name``) repeats a node: nine of them nested expand a 618-byte file to ~10^8 strings ("billion
    laughs"). A spec has no use for them, so one is refused with its line; so is nesting deeper than
    :data:`SPEC_DEPTH_LIMIT` (the composer recurses once per level).
    """

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        mark: Any = event.start_mark  # types-PyYAML: the C and the Python Mark
        if isinstance(event, yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None, None, f"no YAML alias (*{event.anchor}) in a spec file: write the value out instead",
                mark)
        if self._depth >= SPEC_DEPTH_LIMIT:
            raise yaml.composer.ComposerError(
                None, None, f"nesting deeper than {SPEC_DEPTH_LIMIT} levels", mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _depth(value: Any, limit: int) -> bool:
    """Whether ``value`` (decoded JSON) nests deeper than ``limit`` levels, found without recursion."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level > limit:
                return True
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def decode_spec(text: str, *, source: str, json: bool = False) -> SweepSpec:
    """A SweepSpec from the text of a spec file: JSON (msgspec's decoder) or YAML (``yaml.safe_load`` without
    aliases, :class:`_SpecLoader`); nesting deeper than :data:`SPEC_DEPTH_LIMIT` is refused."""
    if json:
        try:
            data = msgspec.json.decode(text.encode())
        except msgspec.DecodeError as exc:
            raise ConfigError(f"{source}: not valid JSON: {_json_line(text, exc)}") from None
        except RecursionError:
            raise ConfigError(f"{source}: not a sweep spec: nested deeper than {SPEC_DEPTH_LIMIT} levels") from None
        if _depth(data, SPEC_DEPTH_LIMIT):
            raise ConfigError(f"{source}: not a sweep spec: nested deeper than {SPEC_DEPTH_LIMIT} levels")
    else:
        try:
            data = yaml.load(text, Loader=_SpecLoader)  # noqa: S506  # a SafeLoader, aliases refused
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
    return spec_from_dict({} if data is None else data, source=source)


def load_spec(path: str | os.PathLike[str]) -> SweepSpec:
    """Read a sweep spec file: JSON when it ends in ``.json``, else YAML; ConfigError names the file, the key
    and what was expected. The file must be a regular UTF-8 text file: a FIFO is refused without blocking,
    bytes that are not text are named with their line."""
    p = Path(path)
    try:
        text = read_input_text(p, "a sweep spec file (YAML or JSON text)")
    except ParseError as exc:
        where = p if exc.line is None else f"{p}:{exc.line}"
        raise ConfigError(f"{where}: cannot read the spec: {exc.found}") from None
    return decode_spec(text, source=str(p), json=p.suffix.lower() == ".json")

