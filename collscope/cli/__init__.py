"""The collscope command line: a thin click layer over the library.

Each command parses options, calls one library function and renders the result. Errors that are the
user's (bad input, bad options) exit with code 2 and one line naming the file and line; no traceback.
"""

from __future__ import annotations

import logging

import click

from collscope import __version__

log = logging.getLogger("collscope")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


# Commands live in their own modules; registered here, after main exists.
from collscope.cli.analyze import analyze_command  # noqa: E402
from collscope.cli.bench import bench  # noqa: E402
from collscope.cli.demo import demo  # noqa: E402
from collscope.cli.ingest import ingest  # noqa: E402
from collscope.cli.nccl_log import nccl_log  # noqa: E402
from collscope.cli.predict import predict_cmd  # noqa: E402
from collscope.cli.recommend import recommend_command  # noqa: E402
from collscope.cli.report import report  # noqa: E402
from collscope.cli.sweep import sweep  # noqa: E402
from collscope.cli.topo import topo  # noqa: E402

for _command in (topo, ingest, nccl_log, bench, sweep, recommend_command, predict_cmd, analyze_command,
                 report, demo):
    main.add_command(_command)

__all__ = ["main"]
