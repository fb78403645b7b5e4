"""Unit conversions, in one place. Bandwidths are decimal GB/s (1e9 bytes/s), as nccl-tests prints them."""

from __future__ import annotations

import re

__all__ = ["algbw_gbps", "parse_size", "format_size", "GB"]

GB = 1e9
_SUFFIX = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2, "MIB": 1024**2,
           "G": 1024**3, "GB": 1024**3, "GIB": 1024**3, "T": 1024**4, "TB": 1024**4, "TIB": 1024**4}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?I?B?)\s*$", re.IGNORECASE)


def algbw_gbps(size_bytes: float, time_us: float) -> float:
    """Algorithm bandwidth in decimal GB/s: size / time (nccl-tests: bytes / seconds / 1e9)."""
    if time_us <= 0:
        return 0.0
    return size_bytes / (time_us * 1e-6) / GB


def parse_size(text: str) -> int:
    """``"8"``, ``"1K"``, ``"128M"``, ``"8G"``, ``"1MiB"`` -> bytes.

    Suffixes are binary, as in nccl-tests' ``-b``/``-e``.
    """
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (expected a number with an optional K/M/G/T suffix)")
    value = float(m.group(1)) * _SUFFIX[m.group(2).upper()]
    if value != int(value):
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)


def format_size(size_bytes: int) -> str:
    """Bytes -> the shortest exact binary form: 1048576 -> ``"1M"``, 1000 -> ``"1000"``."""
    for suffix, factor in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if size_bytes >= factor and size_bytes % factor == 0:
            return f"{size_bytes // factor}{suffix}"
    return str(size_bytes)
