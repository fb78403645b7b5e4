"""The collscope command line: a thin click layer over the library.

Each command parses options, calls one library function and renders the result. Errors that are the
user's (bad input, bad options) exit with code 2 and one line naming the file and line; no traceback
(:mod:`collscope.cli._errors`). Commands live in one module each and are imported only when they run or
``--help`` lists them (:mod:`collscope.cli._group`), so the per-rank ``collscope bench`` stays light.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

_SAID: dict[int, bytes] = {signal.SIGINT: b"interrupted (SIGINT)\n",
                           signal.SIGTERM: b"stopped (SIGTERM) while collscope started\n"}


def _stop_while_loading(signum: int, frame: Any) -> None:
    """SIGINT/SIGTERM while the command line loads: one line and exit 128 + the signal's number (130, 143) at
    once, as a command stopped later does. Exiting in the handler, rather than raising KeyboardInterrupt inside an
    import (a C extension's init may swallow it or turn it into another error, and ``import logging`` gave a
    traceback), holds wherever the signal lands; nothing has run or been written yet."""
    os.write(2, _SAID[signum])
    os._exit(128 + signum)


def _hold_startup() -> dict[int, Any]:
    """Install :func:`_stop_while_loading` (main thread only; a signal the parent ignores stays ignored); the
    handlers it replaced, to put back once the command line is loaded."""
    replaced: dict[int, Any] = {}
    for signum in _SAID:
        try:
            if signal.getsignal(signum) != signal.SIG_IGN:
                replaced[signum] = signal.signal(signum, _stop_while_loading)
        except ValueError:  # imported from another thread: signals are the main thread's business
            break
    return replaced


_replaced = _hold_startup()
try:
    import logging

    import click

    from collscope._version import __version__
    from collscope.cli._group import CollscopeGroup
finally:  # from here on a command handles signals itself (cli._errors: 130; a sweep's SIGTERM: 143)
    for _signum, _handler in _replaced.items():
        signal.signal(_signum, _handler)

log = logging.getLogger("collscope")

COMMANDS = {
    "analyze": "collscope.cli.analyze:analyze_command",
    "bench": "collscope.cli.bench:bench",
    "canary": "collscope.cli.canary:canary",
    "demo": "collscope.cli.demo:demo",
    "ingest": "collscope.cli.ingest:ingest",
    "locate": "collscope.cli.locate:locate_command",
    "nccl-log": "collscope.cli.nccl_log:nccl_log",
    "observe": "collscope.cli.observe:observe",
    "predict": "collscope.cli.predict:predict_cmd",
    "recommend": "collscope.cli.recommend:recommend_command",
    "report": "collscope.cli.report:report",
    "sweep": "collscope.cli.sweep:sweep",
    "topo": "collscope.cli.topo:topo",
    "trace": "collscope.cli.trace:trace_command",
}
"""Command name -> ``module:attribute`` of its click command."""


@click.group(cls=CollscopeGroup, lazy_commands=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="collscope")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def main(verbose: int) -> None:
    """collscope: what is my GPU topology, how fast are my collectives, which NCCL settings to use.

    \b
    Example:
      collscope topo show --from captures/node01/
    """
    _log_to_stderr(logging.WARNING - 10 * min(verbose, 2))


class _UserLines(logging.Formatter):
    """A warning or error is a plain line for the person at the terminal (its message, nothing else); the
    debugging records -v/-vv add keep their level and logger name."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage() if record.levelno >= logging.WARNING else \
            f"{record.levelname.lower()} {record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (click's test runner swaps it per command)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _log_to_stderr(level: int) -> None:
    """One handler on the ``collscope`` logger, installed once, printing :class:`_UserLines`; ``level`` is set
    on the logger only when -v asks for more than warnings (the default level is the root logger's WARNING)."""
    logger = logging.getLogger("collscope")
    handler = next((h for h in logger.handlers if isinstance(h, _Stderr)), None)
    if handler is None:
        handler = _Stderr()
        handler.setFormatter(_UserLines())
        logger.addHandler(handler)
    handler.setLevel(level)
    if level < logging.WARNING:
        logger.setLevel(level)


__all__ = ["COMMANDS", "main"]
