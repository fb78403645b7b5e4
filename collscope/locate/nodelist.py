"""Slurm host lists: ``node[1-4,7],gpu-a[01-02]`` <-> ``["node1", ..., "gpu-a02"]`` (pure).

:func:`parse_nodelist` expands what ``SLURM_JOB_NODELIST``, ``sinfo`` and ``scontrol show hostnames`` accept:
comma-separated entries, each a name with one or more bracket ranges (``rack[1-2]-n[01-04]`` is the product),
ranges ``a-b`` keeping zero padding (``[01-10]``), single numbers and lists inside the brackets.
:func:`format_nodelist` compresses names back into that syntax (the form ``srun -w`` and ``--exclude=`` take).
Errors are :class:`~collscope.errors.ConfigError` naming the bad text and what is valid.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from collscope.errors import ConfigError

__all__ = ["parse_nodelist", "format_nodelist", "MAX_NODES"]

MAX_NODES = 100_000
"""More names than this in one list is an error (a typo like ``node[1-100000000]``), not a memory blow-up."""

_NAME_CHARS = re.compile(r"[A-Za-z0-9_.\-]+")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_SPLIT_NUMBER = re.compile(r"^(.*?)(\d+)$")


def _bad(text: str, why: str) -> ConfigError:
    return ConfigError(f"node list {text!r}: {why}; valid: names like node1, ranges like node[1-4,7], "
                       "comma-separated")


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise _bad(text, "nested brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise _bad(text, "']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise _bad(text, "'[' without ']'")
    parts.append(text[start:])
    return parts


def _expand_range(body: str, text: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.fullmatch(item.strip())
        if m is None:
            raise _bad(text, f"range {item!r} is not N or N-M")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise _bad(text, f"range {item!r} runs backwards")
        if hi - lo + 1 > MAX_NODES:
            raise _bad(text, f"range {item!r} holds more than {MAX_NODES} names")
        width = len(lo_s) if lo_s.startswith("0") and len(lo_s) > 1 else 0
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def _expand_entry(entry: str, text: str) -> list[str]:
    names = [""]
    rest = entry
    while rest:
        i = rest.find("[")
        if i < 0:
            prefix, body, rest = rest, None, ""
        else:
            j = rest.index("]", i)
            prefix, body, rest = rest[:i], rest[i + 1:j], rest[j + 1:]
        if prefix and not _NAME_CHARS.fullmatch(prefix):
            raise _bad(text, f"{prefix!r} holds characters a host name cannot")
        names = [n + prefix for n in names]
        if body is not None:
            numbers = _expand_range(body, text)
            names = [n + k for n in names for k in numbers]
            if len(names) > MAX_NODES:
                raise _bad(text, f"more than {MAX_NODES} names")
    return names


def parse_nodelist(text: str) -> list[str]:
    """The host names of a Slurm host list, in order, each once (a repeat is an error: it is a typo)."""
    if not isinstance(text, str):
        raise TypeError(f"parse_nodelist takes a string, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise _bad(text, "it is empty")
    if any(c.isspace() for c in stripped):
        raise _bad(text, "it holds white space")
    names: list[str] = []
    for entry in _split_top(stripped):
        if not entry:
            raise _bad(text, "an empty entry (two commas, or a trailing comma)")
        names.extend(_expand_entry(entry, text))
        if len(names) > MAX_NODES:
            raise _bad(text, f"more than {MAX_NODES} names")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise _bad(text, f"{name} is listed twice")
        seen.add(name)
    return names


def _ranges(numbers: list[str]) -> str:
    """``["1","2","3","7"]`` -> ``"1-3,7"``; numbers of one width (padding kept)."""
    values = sorted(numbers, key=int)
    out: list[str] = []
    start = prev = values[0]
    for cur in values[1:]:
        if int(cur) == int(prev) + 1:
            prev = cur
            continue
        out.append(start if start == prev else f"{start}-{prev}")
        start = prev = cur
    out.append(start if start == prev else f"{start}-{prev}")
    return ",".join(out)


def format_nodelist(names: Iterable[str]) -> str:
    """The shortest-form Slurm host list of ``names``: ``node1,node2,node3,node7`` -> ``node[1-3,7]``.

    Names are grouped by prefix and number width (``node01`` and ``node1`` stay apart, so parsing the result
    gives back exactly the same names); groups keep the order of their first name; a lone name stays bare.
    """
    groups: dict[tuple[str, int], list[str]] = {}
    order: list[tuple[str, int] | str] = []
    for name in names:
        if not name or not _NAME_CHARS.fullmatch(name):
            raise ConfigError(f"host name {name!r} is invalid; valid: letters, digits, '.', '-', '_'")
        m = _SPLIT_NUMBER.match(name)
        if m is None:
            order.append(name)
            continue
        prefix, digits = m.group(1), m.group(2)
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        key = (prefix, width)
        if key not in groups:
            groups[key] = []
            order.append(key)
        if digits not in groups[key]:
            groups[key].append(digits)
    parts: list[str] = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        digits = groups[item]
        if len(digits) == 1:
            parts.append(item[0] + digits[0])
        else:
            parts.append(f"{item[0]}[{_ranges(digits)}]")
    return ",".join(parts)
