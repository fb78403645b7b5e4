"""What NCCL really did, from an ``NCCL_DEBUG=INFO`` log: ``parse_nccl_log(text) -> NcclLog``.

The log may be a complete multi-rank capture or a pasted excerpt: lines of several ranks interleaved
out of order, prefixes stripped, timestamps on lines of their own, damaged or incomplete lines. Every
fact is best effort; only a text without a single NCCL line is an error. Values NCCL did not print but
that follow from what it printed (nodes from host names, local ranks from init lines) are listed in
``NcclLog.inferred``. Line formats: ``nccl_log.lines`` (prefix), ``nccl_log.messages`` (rings, trees,
connections, NICs), ``nccl_log.tuning`` (TUNING table and algorithm choices); the accumulator:
``nccl_log.build``; the records: ``nccl_log.records``; facts that tell whether a forced setting took
effect: ``nccl_log.effects``.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from collscope.collectives.nccl_log.build import LogBuilder
from collscope.collectives.nccl_log.effects import (
    algorithms_used,
    forced_setting_effects,
    ib_devices_used,
    protocols_used,
)
from collscope.collectives.nccl_log.lines import iter_log_lines
from collscope.collectives.nccl_log.messages import Connection, RingOrder, TreeLink
from collscope.collectives.nccl_log.records import NcclLog, NetInfo
from collscope.collectives.nccl_log.tuning import TuningTable
from collscope.errors import ParseError
from collscope.files import read_input_text

__all__ = [
    "NcclLog",
    "NetInfo",
    "Connection",
    "RingOrder",
    "TreeLink",
    "TuningTable",
    "parse_nccl_log",
    "read_nccl_log",
    "forced_setting_effects",
    "algorithms_used",
    "protocols_used",
    "ib_devices_used",
]

log = logging.getLogger(__name__)


def parse_nccl_log(text: str, source: str = "<text>") -> NcclLog:
    """Parse NCCL_DEBUG=INFO output (any NCCL version 2.3+); ParseError when no line is NCCL's."""
    builder = LogBuilder()
    first_text: str | None = None
    skipped: list[str] = []  # lines too long to read (collscope.line_cap)
    for line in iter_log_lines(text, skipped):
        if first_text is None:
            first_text = line.message
        builder.feed(line)
    if builder.nccl_lines == 0:
        raise ParseError(source, None, "an NCCL_DEBUG=INFO log (no line with 'NCCL INFO' or an NCCL message)",
                         found=first_text if first_text is not None or not skipped else skipped[0])
    log = builder.finish(source)
    return dataclasses.replace(log, warnings=log.warnings + tuple(skipped)) if skipped else log


def read_nccl_log(path: str | Path) -> NcclLog:
    """Read a log file and parse it; ParseError names the file (and the line of bytes that are not UTF-8 text).

    The file must be a regular file: a FIFO is refused, never opened for a blocking read.
    """
    return parse_nccl_log(read_input_text(path, "an NCCL_DEBUG=INFO log (UTF-8 text)"), source=str(path))
