"""``collscope recommend DIR...``: the best configuration per op and size range, with the evidence."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from collscope.analysis.load import load_results
from collscope.analysis.recommend.core import Recommendation, RecommendOptions, recommend, render_json
from collscope.analysis.recommend.env import render_env
from collscope.analysis.recommend.logged import logged_algorithms
from collscope.analysis.recommend.tuner import render_tuner
from collscope.analysis.recommend.workload import read_workload
from collscope.cli.options import geometry_options

_RENDER: dict[str, Callable[[Recommendation], str]] = {"env": render_env, "json": render_json, "tuner": render_tuner}


@click.command("recommend")
@click.argument("directories", nargs=-1, required=True, metavar="DIR...")
@click.option("--format", "fmt", type=click.Choice(sorted(_RENDER)), default="env", show_default=True,
              help="env: export lines with evidence; tuner: NCCL tuner-plugin CSV rules; json: everything.")
@click.option("--min-gain", type=float, default=0.03, show_default=True,
              help="Gain over the default a config must exceed (0.03 = 3%), on top of the measured noise.")
@click.option("--workload", "workload_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="The job's calls per step: JSON {\"workload\": [{op, size_bytes, calls, nranks}]} or CSV "
                   "op,size_bytes,calls,nranks [default: one call per measured size].")
@click.option("--op", default=None, metavar="OP", help="Only this collective (all_reduce, all_gather, ...).")
@geometry_options("nranks", "nnodes")
@click.option("--in-place/--out-of-place", "in_place", default=None,
              help="Use in-place or out-of-place records [default: out-of-place when both were measured].")
def recommend_command(directories: tuple[str, ...], fmt: str, min_gain: float, workload_path: str | None,
                      op: str | None, nranks: int | None, nnodes: int | None, in_place: bool | None) -> None:
    """Best configuration per op and message-size range, only where it beats the default beyond noise.

    A config wins a size when both sides have >= 3 repeats and its median busbw beats the default's
    (nothing forced, always measured) by more than --min-gain and by more than the spread (max-min)/median
    of both, at >= 2 adjacent measured sizes. Rows with wrong values or whose forced setting NCCL did not
    apply never win. Settings are judged by the time they save per step of the workload (--workload, else
    one call per measured size); an export line appears only for a setting that saves time and loses beyond
    noise at no size carrying more than 5% of that time, else the tuner rules (per size range) are the answer.
    --nranks and --nnodes say what the records do not (nodes unknown: the tuner rules match any node count).

    \b
    Examples:
      collscope recommend results/ > nccl.env
      collscope recommend results/ --format tuner > nccl_tuner.conf
      collscope recommend results/ --workload job.csv
      collscope recommend run1/ run2/ --op all_reduce --format json
    """
    options = RecommendOptions(min_gain=min_gain, op=op, in_place=in_place)
    workload = None if workload_path is None else read_workload(workload_path)
    paths = [Path(d) for d in directories]
    frame = load_results(paths, nranks=nranks, nnodes=nnodes)
    result = recommend(frame, options, workload=workload, algorithms=logged_algorithms(paths, frame))
    click.echo(_RENDER[fmt](result), nl=False)
