"""``collscope report``: figures and a self-contained HTML page for a sweep's results."""

from __future__ import annotations

from pathlib import Path

import click

from collscope.cli.options import geometry_options, gpu_option, link_options, nic_options, topo_option
from collscope.collectives.record import OPS
from collscope.files import check_output_dir


@click.command("report")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory for index.html, report.md and the PNGs.")
@topo_option("topo_paths", cluster=False)
@gpu_option
@geometry_options("nranks", "nnodes", "nvl_domain", "op", op_choices=OPS)
@link_options
@nic_options
@click.option("--min-gain", default=0.03, show_default=True, help="Gain over the default needed to recommend.")
def report(sources: tuple[Path, ...], out_dir: Path, topo_paths: tuple[str, ...], gpu: str | None,
           nranks: int | None, nnodes: int | None, nvl_domain: int | None, op: str | None, alpha_us: float | None,
           bw_gbps: float | None, nic_gbit: float | None, nics_per_node: int | None, min_gain: float) -> None:
    """Plots (PNG) and a self-contained HTML report (opens offline) of results directories or record files.

    Per collective: busbw vs size per configuration with the spread of repeats and the alpha-beta model
    curves, a heatmap of each configuration against the default by size (one 'no baseline' line when the
    default was not measured), fitted alpha/beta, anomalies grouped by configuration and size range (the
    worst shown), the recommendation, the measurements against the model of the job's geometry (each job's
    geometry with its evidence and the efficiency verdicts, as `collscope analyze` prints them: link parameters
    from --topo, --gpu, --alpha-us with --bw-gbps, or the GPU the results name), the topology drawing (with
    --topo; a table of NICs for a node without GPUs), and how to read busbw. --nranks, --nnodes, --nvl-domain and
    --op tell what the inputs do not (a table without its header or rank list), as for analyze.

    \b
    Example:
      collscope report results/mpi-algos --out report/ --topo topo/node01/
      collscope report all_reduce.txt --out report/ --nic-gbit 400
    """
    check_output_dir(out_dir, "--out")
    from collscope.analysis.report import write_report

    index = write_report(list(sources), out_dir, topo_paths=list(topo_paths) or None, min_gain=min_gain, op=op,
                         nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain, gpu=gpu, alpha_us=alpha_us,
                         bw_gbps=bw_gbps, nic_gbit=nic_gbit, nics_per_node=nics_per_node)
    click.echo(f"report: {index}")
