"""Ordering and naming helpers shared by the topology modules."""

from __future__ import annotations

import re

__all__ = ["natural_key"]

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[object, ...]:
    """Sort key that orders embedded numbers numerically: ``mlx5_2`` < ``mlx5_10``."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(name))
