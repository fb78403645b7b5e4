"""``collscope nccl-log FILE [--json]``: what NCCL really did, from an NCCL_DEBUG=INFO log."""

from __future__ import annotations

import json

import click

from collscope.collectives.nccl_log.parse import read_nccl_log
from collscope.collectives.nccl_log.render import nccl_log_summary_text


@click.command("nccl-log")
@click.argument("file", metavar="FILE")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document (see DESIGN.md).")
def nccl_log(file: str, as_json: bool) -> None:
    """What NCCL really did, from an NCCL_DEBUG=INFO log.

    Shows the NCCL version, ranks, nodes and hosts, channels, ring orders and trees, transports per
    connection (P2P, SHM, NET/IB with GDRDMA and PXN proxies, sockets), NVLS and CollNet, the
    environment overrides NCCL echoed, its TUNING table and the algorithm/protocol chosen per
    operation, and whether forced settings (NCCL_ALGO, NCCL_PROTO, NCCL_IB_HCA, channel limits) took
    effect. Logs may be excerpts, with prefixes stripped or ranks interleaved.

    \b
    Example:
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING all_reduce_perf -b 8 -e 1G -g 8 > run.log 2>&1
      collscope nccl-log run.log
      collscope nccl-log run.log --json
    """
    log = read_nccl_log(file)
    if as_json:
        click.echo(json.dumps(log.to_json(), indent=2))
    else:
        click.echo(nccl_log_summary_text(log))
