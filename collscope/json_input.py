"""JSON text read from an input file: every way it can fail is a ParseError naming the file (and line).

``json.loads`` raises more than ``JSONDecodeError``: RecursionError for nesting deeper than the interpreter's
stack (100,000 ``[`` in 200 kB), ValueError for an integer of more than ``sys.int_max_str_digits`` digits.
"""

from __future__ import annotations

import json
from typing import Any

from collscope.errors import ParseError

__all__ = ["load_json"]


def load_json(text: str | bytes, source: str, expected: str) -> Any:
    """The value of the JSON ``text`` read from ``source``; ParseError saying ``expected`` otherwise."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(source, exc.lineno, expected, found=exc.msg) from None
    except RecursionError:
        raise ParseError(source, None, expected, found="JSON nested too deeply") from None
    except ValueError as exc:  # an integer too long to convert (sys.int_max_str_digits), bytes not UTF-8
        raise ParseError(source, None, expected, found=str(exc)) from None
