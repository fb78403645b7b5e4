"""``collscope topo ...`` commands."""

from __future__ import annotations

import json
from pathlib import Path

import click

from collscope.cli.options import check_output_file, gpu_option, parse_settings
from collscope.errors import ConfigError
from collscope.files import check_output_dir
from collscope.topo.capture import collect_to_dir
from collscope.topo.cluster import hosts_text, load_cluster
from collscope.topo.draw import draw_png, write_dot, write_graphml
from collscope.topo.load import load_node
from collscope.topo.render import node_summary_text, node_to_json
from collscope.topo.samples import sample_names
from collscope.vocab.nccl import pxn_disabled


@click.group()
def topo() -> None:
    """Discover, show and merge hardware topologies (GPUs, NVLink, PCIe, NUMA, NICs, rails).

    \b
    Example:
      collscope topo show --from nvidia-smi-topo.txt --from ibstat.txt --json
    """


_SHOW_SETTINGS = ("NCCL_NET_GDR_LEVEL", "NCCL_PXN_DISABLE")
"""The NCCL variables that change what ``topo show`` prints: GPUDirect RDMA per GPU and the crossing."""


def _crossing_settings(settings: dict[str, str]) -> tuple[str | None, bool]:
    """(NCCL_NET_GDR_LEVEL or None, PXN allowed) from ``topo show --setting`` (values already checked by
    :func:`~collscope.cli.options.parse_settings`); ConfigError for another variable."""
    other = sorted(set(settings) - set(_SHOW_SETTINGS))
    if other:
        raise ConfigError(f"topo show --setting takes {' and '.join(_SHOW_SETTINGS)} (what it shows depends on no "
                          f"other variable), got {', '.join(other)}; predict --setting takes the rest")
    return settings.get("NCCL_NET_GDR_LEVEL"), not pxn_disabled(settings.get("NCCL_PXN_DISABLE"))


@topo.command("show")
@click.option("--from", "sources", multiple=True, metavar="PATH",
              help="Captured file or directory (repeatable); format detected from content.")
@click.option("--sample", type=click.Choice(sample_names()), default=None,
              help="Show a bundled sample node instead of this machine.")
@gpu_option
@click.option("--setting", "settings", multiple=True, metavar="NAME=VALUE",
              help="NCCL_NET_GDR_LEVEL=LEVEL or NCCL_PXN_DISABLE=1 (repeatable): show GPUDirect RDMA and where "
                   "NCCL's graphs cross nodes as NCCL reads them with it (default: NCCL's defaults).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document (keys in docs/formats.md).")
@click.option("--graphml", type=click.Path(dir_okay=False, path_type=Path), help="Write GraphML here.")
@click.option("--dot", type=click.Path(dir_okay=False, path_type=Path), help="Write Graphviz DOT here.")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Write a PNG drawing here.")
def show(sources: tuple[str, ...], sample: str | None, gpu: str | None, settings: tuple[str, ...], as_json: bool,
         graphml: Path | None, dot: Path | None, png: Path | None) -> None:
    """Show one node: GPUs, NICs, NVLink domain, nearest NIC per GPU, bandwidths, warnings.

    Without --from it runs nvidia-smi and the InfiniBand tools on this machine; where nvidia-smi is
    missing it says so and shows a bundled sample, clearly labelled.

    \b
    Examples:
      collscope topo show
      collscope topo show --from captures/node01/ --png node01.png
      collscope topo show --from topo.txt --gpu A100 --json
      collscope topo show --from captures/node01/ --setting NCCL_NET_GDR_LEVEL=PHB
    """
    if sources and sample:
        raise click.UsageError("use either --from or --sample, not both")
    level, pxn = _crossing_settings(parse_settings(settings))
    for path, option in ((graphml, "--graphml"), (dot, "--dot"), (png, "--png")):
        if path is not None:
            check_output_file(path, option)
    loaded = load_node(sources, sample=sample, gpu=gpu)
    node = loaded.node
    for note in dict.fromkeys(loaded.notes):  # a missing nvidia-smi is noted once per capture it would have made
        click.echo(f"note: {note}", err=True)
    if graphml:
        write_graphml(node, graphml)
    if dot:
        write_dot(node, dot)
    if png:
        draw_png(node, png)
    if as_json:
        click.echo(json.dumps(node_to_json(node, level=level, pxn=pxn), indent=2, default=str))
    else:
        click.echo(node_summary_text(node, level=level, pxn=pxn))
        for path, what in ((graphml, "GraphML"), (dot, "DOT"), (png, "PNG")):
            if path is not None:
                click.echo(f"wrote {what}: {path}")


@topo.command("collect")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory for this node's raw captures and meta.json.")
@click.option("--timeout", "timeout_s", default=60.0, show_default=True, help="Seconds per tool.")
def collect(out_dir: Path, timeout_s: float) -> None:
    """Save this node's raw captures (nvidia-smi, ibstat, ibdev2netdev) plus meta.json.

    Missing tools are recorded in meta.json, not fatal; slurm/collect-topo.sh runs this on every node.

    \b
    Example:
      collscope topo collect --out topo/$(hostname)
    """
    check_output_dir(out_dir, "--out")
    meta = collect_to_dir(out_dir, timeout_s).to_dict()
    click.echo(f"{meta['host']}: wrote {len(meta['files'])} capture(s) to {out_dir}: {', '.join(meta['files'])}")
    for err in dict.fromkeys(meta["errors"]):  # meta.json keeps one per capture; said once here
        click.echo(f"note: {err}", err=True)


@topo.command("cluster")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@gpu_option
@click.option("--json", "as_json", is_flag=True, help="Print the cluster as JSON.")
def cluster(directory: Path, gpu: str | None, as_json: bool) -> None:
    """Merge per-node capture directories: rails, NIC/GPU ratio, nodes that differ from the majority.

    DIRECTORY holds one `topo collect` directory per node, and optionally an ibnetdiscover capture
    at its top level (then rails follow leaf switches instead of NIC index). What the captures noted (a
    tool missing or failing) is said once, with the nodes it concerns ("all 4 nodes: ibstat not found").

    \b
    Example:
      collscope topo cluster topo/ --json
    """
    result = load_cluster(directory, gpu=gpu)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, default=str))
        return
    click.echo(f"{len(result.nodes)} node(s): {', '.join(result.nodes)}")
    click.echo(f"rails ({result.rail_source}): {len(result.rails)}")
    for rail in result.rails:
        members = ", ".join(f"{h}:{n}" for h, n in rail.members)
        where = f" [{rail.switch}]" if rail.switch else ""
        click.echo(f"  rail {rail.index}{where}: {members}")
    partitions = result.nvlink_partitions()
    if partitions:
        click.echo(f"NVLink partitions (nvidia-smi -q Fabric): {len(partitions)}")
        for partition, hosts in partitions.items():
            click.echo(f"  {partition.text}: {result.partition_gpus(hosts)} GPUs on "
                       f"{hosts_text(hosts, list(result.nodes))}")
    click.echo(f"warnings: {len(result.warnings)}")
    for w in result.warnings:
        click.echo(f"  - {w}")
