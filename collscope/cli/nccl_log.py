"""``collscope nccl-log FILE [--json]``: what NCCL really did, from an NCCL_DEBUG=INFO log."""

from __future__ import annotations

import json

import click

from collscope.cli.options import geometry_options, gpu_option, topo_option
from collscope.collectives.nccl_log.parse import read_nccl_log
from collscope.collectives.nccl_log.render import nccl_log_summary_text


@click.command("nccl-log")
@click.argument("file", metavar="FILE")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document (keys in docs/formats.md).")
@topo_option(cluster=False)
@gpu_option
@geometry_options("nranks", "nnodes", "nvl_domain")
def nccl_log(file: str, as_json: bool, topo: tuple[str, ...], gpu: str | None, nranks: int | None,
             nnodes: int | None, nvl_domain: int | None) -> None:
    """What NCCL really did, from an NCCL_DEBUG=INFO log.

    Shows the NCCL version, ranks, nodes and hosts, channels, ring orders and trees, transports per
    connection (P2P, SHM, NET/IB with GDRDMA and PXN proxies, sockets), NVLS and CollNet, the
    environment overrides NCCL echoed, its TUNING table and the algorithm/protocol chosen per
    operation, and whether forced settings (NCCL_ALGO, NCCL_PROTO, NCCL_IB_HCA, channel limits) took
    effect. Per operation size (NCCL >= 2.21 with NCCL_DEBUG_SUBSYS=TUNING): the algorithm, protocol and
    channels NCCL chose with its own predicted time, and which NIC (rail) each rank's channels use. With
    --topo or --gpu, collscope's model of NCCL's tuner is shown next to NCCL's prediction, for the ranks and
    nodes the log says (--nranks, --nnodes and --nvl-domain override them). Logs may be
    excerpts, with prefixes stripped or ranks interleaved.

    \b
    Example:
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING all_reduce_perf -b 8 -e 1G -g 8 > run.log 2>&1
      collscope nccl-log run.log
      collscope nccl-log run.log --json
      collscope nccl-log run.log --topo node01/
    """
    log = read_nccl_log(file)
    against = None
    if topo or gpu:
        from collscope.analysis.log_model import choices_against_model
        from collscope.topo.load import load_one_node

        against = choices_against_model(log, gpu=gpu, topology=load_one_node(topo, gpu=gpu) if topo else None,
                                        nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain)
    if as_json:
        doc = log.to_json()
        if against is not None:
            doc["model"] = against.to_json()
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(nccl_log_summary_text(log))
        if against is not None:
            from collscope.analysis.log_model import render_against_model_text

            click.echo(render_against_model_text(against))
