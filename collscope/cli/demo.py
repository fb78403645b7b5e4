"""``collscope demo``: topology, a real CPU sweep, analysis, recommendation and report, with nothing set up."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("demo")
@click.option("--out", "out_dir", default="collscope-demo", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Where the demo writes everything.")
@click.option("--workers", type=click.Choice(["persistent", "per-point"]), default="persistent", show_default=True,
              help="persistent: one mpirun for the Open MPI points, the algorithms switched in-process (as `sweep "
                   "run --workers persistent`); per-point: one launch per point (torch/gloo runs so either way).")
def demo(out_dir: Path, workers: str) -> None:
    """The main job end to end on this machine, with nothing configured (a minute or two on 2 cores).

    Topology (live with nvidia-smi, else the bundled sample, labelled as such), a real sweep of Open MPI's
    allreduce algorithms on 2 local ranks through mpirun on persistent workers (plus torch.distributed/gloo
    when torch is installed), analysis, recommendation and an HTML report with figures.

    \b
    Example:
      collscope demo --out demo/
    """
    from collscope.demo import run_demo

    result = run_demo(out_dir, echo=click.echo, workers=workers)  # type: ignore[arg-type]  # click checked it
    click.echo("")
    click.echo("recommendation (" + str(out_dir / "recommendation.env") + "):")
    for line in result.recommendation.rstrip().splitlines()[:12]:
        click.echo("  " + line)
    click.echo(f"\ndone in {result.seconds:.0f} s; open {result.report} in a browser "
               f"(topology: {result.topology_source})")
