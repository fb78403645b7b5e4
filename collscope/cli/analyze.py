"""``collscope analyze``: fits, efficiency against the models, half-peak sizes, crossovers and anomalies."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from collscope.analysis.compare import analyze
from collscope.analysis.compare_render import render_csv, render_text
from collscope.analysis.load import load_results
from collscope.analysis.logged_choices import logged_choices
from collscope.analysis.params_source import job_params_source
from collscope.cli.options import geometry_options, gpu_option, link_options, nic_options, topo_option
from collscope.collectives.record import OPS
from collscope.errors import ConfigError

_FAILING = ("wrong_values", "not_applied", "failure")


@click.command("analyze")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@topo_option()
@gpu_option
@geometry_options("nranks", "nnodes", "nvl_domain", "op", op_choices=OPS)
@link_options
@nic_options
@click.option("--json", "as_json", is_flag=True, help="Print everything as one JSON document.")
@click.option("--csv", "as_csv", is_flag=True, help="Print per configuration x size rows with efficiency as CSV.")
def analyze_command(paths: tuple[Path, ...], topo: tuple[str, ...], gpu: str | None, nranks: int | None,
                    nnodes: int | None, nvl_domain: int | None, op: str | None, alpha_us: float | None,
                    bw_gbps: float | None, nic_gbit: float | None, nics_per_node: int | None, as_json: bool,
                    as_csv: bool) -> None:
    """Fit alpha and beta per configuration, compare with the models, find crossovers and anomalies.

    PATHS are sweep results directories, Measurement JSONL files or nccl-tests outputs. Per configuration:
    the fitted latency (alpha) and bandwidth (1/beta) with 95% intervals, the peak busbw and the size that
    reaches half of it, and with link parameters (--topo, --gpu, or --alpha-us with --bw-gbps; without
    them, the GPU the results name, as nccl-tests' rank lines do) the efficiency = measured busbw / model
    busbw. The geometry of each job (ranks, nodes, ranks per node, NVLink domain) is printed with its
    evidence; the models take it from there (--nranks, --nnodes, --nvl-domain win), and a job whose nodes
    nobody knows gets no efficiency until --nnodes says.
    Anomalies: dips, non-monotone curves, a size slower than the next size allows at the link bound
    (time that is not data movement), run-to-run spread above 10%, wrong values, forced settings that did
    not apply, failed points, busbw above the link limit.

    Each path is kept apart: a configuration that two paths measured (a sweep and a check run) is shown
    side by side, with whether they differ beyond noise, never pooled. Configurations measured on
    different hosts are flagged: their difference is a node difference, not a setting difference.

    Exit status: 0 analysed; 1 the results hold wrong values, settings not applied or failed points;
    2 bad input (one line naming the file).

    \b
    Example:
      collscope analyze results/mpi-algos
      collscope analyze results/nccl --gpu H100 --json > analysis.json
      collscope analyze results/a results/b all_reduce.txt --csv > sizes.csv
      collscope analyze results/cpu --alpha-us 2 --bw-gbps 10
      collscope analyze table-only.txt --op all_reduce --nranks 64
      collscope analyze nvl72.txt --gpu GB200 --nnodes 18 --nvl-domain 72
    """
    if as_json and as_csv:
        raise ConfigError("use either --json or --csv, not both")
    frame = load_results(paths, op=op, nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain)
    source = job_params_source(frame, topo_paths=topo, gpu=gpu, alpha_us=alpha_us, bw_gbps=bw_gbps,
                               nic_gbit=nic_gbit, nics_per_node=nics_per_node)
    result = analyze(frame, params=source, logged=logged_choices(paths, frame) if source is not None else None)
    if as_json:
        click.echo(result.to_json(), nl=False)
    elif as_csv:
        click.echo(render_csv(result), nl=False)
    else:
        click.echo(render_text(result), nl=False)
    if any(a.kind in _FAILING for a in result.anomalies):
        sys.exit(1)
