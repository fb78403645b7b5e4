"""Unit conversions, in one place. Bandwidths are decimal GB/s (1e9 bytes/s), as nccl-tests prints them."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["algbw_gbps", "parse_size", "format_size", "format_size_span", "GB"]

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


_UNITS = (("G", 1024**3), ("M", 1024**2), ("K", 1024))
"""The suffixes nccl-tests' ``-b``/``-e`` take (nccl-tests src/common.cu ``parsesize``: a number, then K, M or G,
binary): the units every size collscope prints is written in."""


def _exact(size_bytes: int, factor: int) -> str | None:
    """``size_bytes / factor`` written exactly in at most 4 significant digits and 3 decimals, else None."""
    for decimals in range(4):
        scaled, rest = divmod(size_bytes * 10**decimals, factor)
        if not rest:
            digits = str(scaled)
            if len(digits.lstrip("0")) > 4:
                return None
            if not decimals:
                return digits
            whole, frac = digits[:-decimals] or "0", digits[-decimals:]
            return f"{whole}.{frac}"
    return None


def format_size(size_bytes: float) -> str:
    """Bytes as collscope prints every size: in text, JSON notes, HTML and plots.

    Binary units as nccl-tests' ``-b``/``-e`` take them (K = 1024, M, G; no T: nccl-tests has none): the largest
    unit that fits, exact when the value has at most 4 significant digits in it (``1M``, ``512K``, ``9.5M``,
    ``1.25G``, ``1000K``), else 3 significant figures (976563 -> ``954K``, 10030 -> ``9.79K``; from 100 up a
    whole number, never an exponent: 16 TiB -> ``16384G``); below 1K the whole number of bytes (``8``, ``1000``).
    Every output reads back with :func:`parse_size` (and nccl-tests ``-b``) to within 0.5%, exactly when exact.
    """
    n = int(round(float(size_bytes)))
    if n < 0:
        raise ValueError(f"not a size: {size_bytes!r} (bytes are >= 0)")
    if n < 1024:
        return str(n)
    index, (suffix, factor) = next((i, u) for i, u in enumerate(_UNITS) if n >= u[1])
    exact = _exact(n, factor)
    if exact is not None:
        return exact + suffix
    scaled = n / factor
    text = f"{scaled:.0f}" if scaled >= 100 else f"{scaled:.3g}"
    if float(text) >= 1024 and index > 0:  # 1023.7K rounds to 1024K: that is 1M
        return "1" + _UNITS[index - 1][0]
    return text + suffix


def format_size_span(sizes: Iterable[float]) -> str:
    """The smallest and the largest of ``sizes`` as ``64M-4G`` (:func:`format_size`), one size alone as ``8G``."""
    held = sorted(sizes)
    return format_size(held[0]) + (f"-{format_size(held[-1])}" if len(held) > 1 else "")
