"""What NCCL said about itself in a log: its git version and the net/tuner/profiler plugins it loaded (pure).

One table, :data:`LOGGED_LINES`: the INFO lines (``NCCL_DEBUG=INFO``) that name a provenance column of the store,
each with the pattern NCCL prints (sources cited per row). A line that is not there leaves the column null:
"not logged", never "none loaded".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LoggedLine", "LOGGED_LINES", "logged_provenance", "SCAN_BYTES"]

SCAN_BYTES = 4 << 20
"""Only the first 4 MiB of a log are scanned: NCCL prints these lines at init, before any table or per-call line."""


@dataclass(frozen=True, slots=True)
class LoggedLine:
    """An INFO line that names a provenance value (and its plugin API version)."""

    column: str
    version_column: str | None
    pattern: re.Pattern[str]
    """Group 1: the value; group 2 (when ``version_column``): the API version (``v10``)."""
    source: str


LOGGED_LINES: tuple[LoggedLine, ...] = (
    LoggedLine("nccl_version", None, re.compile(r"(?:^|\s)NCCL version (\S+)", re.M),
               "NCCL src/init.cc showVersion: 'NCCL version 2.29.2+cuda13.0'"),
    LoggedLine("nccl_git", None, re.compile(r"NCCL git version (\S+ \S+)"),
               "NCCL >= 2.29 src/misc/git_version.cc: 'NCCL git version <branch> <git describe>'"),
    LoggedLine("net_plugin", "net_plugin_version",
               re.compile(r"NET/Plugin ?: Loaded net plugin (.+?) \((v\d+)\)\s*$", re.M),
               "NCCL src/plugin/net/net_v*.cc: 'NET/Plugin: Loaded net plugin %s (v10)'"),
    LoggedLine("tuner_plugin", "tuner_plugin_version",
               re.compile(r"TUNER/Plugin ?: (?:Using|Loaded) (?:tuner plugin )?(.+?) \((v\d+)\)\s*$", re.M),
               "NCCL src/plugin/tuner/tuner_v*.cc: 'TUNER/Plugin: Using %s (v5)'"),
    LoggedLine("profiler_plugin", "profiler_plugin_version",
               re.compile(r"PROFILER/Plugin ?: Loaded (?:profiler plugin )?(.+?) \((v\d+)\)\s*$", re.M),
               "NCCL src/plugin/profiler/profiler_v*.cc: 'PROFILER/Plugin: Loaded %s (v5)'"),
)
"""The provenance NCCL logs at init, one row per fact."""


def logged_provenance(text: str) -> dict[str, str]:
    """Column -> value for each :data:`LOGGED_LINES` row found in ``text`` (its first occurrence); nothing for a
    text without NCCL INFO lines."""
    head = text[:SCAN_BYTES]
    if "NCCL" not in head or "version" not in head and "Plugin" not in head:
        return {}
    candidates = "\n".join(line for line in head.split("\n") if "version" in line or "Plugin" in line)
    found: dict[str, str] = {}
    for row in LOGGED_LINES:
        m = row.pattern.search(candidates)
        if m is None:
            continue
        found[row.column] = m.group(1).strip()
        if row.version_column is not None:
            found[row.version_column] = m.group(2)
    return found
