"""Which variables hold secrets, and their values as collscope writes and prints them: redacted.

A site's environment can carry credentials next to its tuning (a fabric manager's ``NCCL_IB_PASSWORD``, a
plugin's ``..._TOKEN``). collscope records and prints environment variables in many places (records'
``settings`` and ``environment``, ``sweep.json``'s ``inherited_env``, the ``env VAR=value`` lines of point logs
and ``--dry-run``, ``analyze``/``report``/``recommend``), so the rule is one function here that every writer and
printer calls: the value of a name containing ``PASSWORD``, ``TOKEN``, ``SECRET``, ``KEY`` or ``CREDENTIAL``
(any case) is written as :data:`REDACTED`. The process itself still gets the real value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["REDACTED", "SECRET_WORDS", "is_secret_name", "redacted", "redact_env"]

REDACTED = "REDACTED"
"""What a secret's value is written as (plain letters: safe in a shell line, a Markdown cell and HTML)."""

SECRET_WORDS = ("PASSWORD", "TOKEN", "SECRET", "KEY", "CREDENTIAL")
"""A variable whose name contains one of these (any case, anywhere: ``*KEY*`` also matches ``NCCL_IB_PKEY``,
which costs nothing) holds a secret."""

_SECRET = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether the variable ``name`` holds a secret (its name contains one of :data:`SECRET_WORDS`)."""
    return _SECRET.search(name) is not None


def redacted(name: str, value: str) -> str:
    """``value`` as written anywhere: :data:`REDACTED` for a secret's name, else unchanged."""
    return REDACTED if is_secret_name(name) else value


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with every secret's value :data:`REDACTED` (order kept)."""
    return {name: redacted(name, value) for name, value in env.items()}
