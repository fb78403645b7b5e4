"""The collscope command line: a thin click layer over the library.

Each command parses options, calls one library function and renders the result. Errors that are the
user's (bad input, bad options) exit with code 2 and one line naming the file and line; no traceback
(:mod:`collscope.cli._errors`). Commands live in one module each and are imported only when they run or
``--help`` lists them (:mod:`collscope.cli._group`), so the per-rank ``collscope bench`` stays light.
"""

from __future__ import annotations

import logging
import sys

try:
    import click

    from collscope._version import __version__
    from collscope.cli._group import CollscopeGroup
except KeyboardInterrupt:  # Ctrl-C while the command line loads: 130 as for any command, never a traceback
    sys.stderr.write("interrupted (SIGINT)\n")
    raise SystemExit(130) from None

log = logging.getLogger("collscope")

COMMANDS = {
    "analyze": "collscope.cli.analyze:analyze_command",
    "bench": "collscope.cli.bench:bench",
    "demo": "collscope.cli.demo:demo",
    "ingest": "collscope.cli.ingest:ingest",
    "locate": "collscope.cli.locate:locate_command",
    "nccl-log": "collscope.cli.nccl_log:nccl_log",
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
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


__all__ = ["COMMANDS", "main"]
