"""``collscope predict``: expected time and busbw per algorithm and protocol, from the models."""

from __future__ import annotations

import json

import click

from collscope.analysis.predict import predict, render_predict_text
from collscope.cli.options import (
    geometry_options,
    gpu_option,
    link_options,
    nic_options,
    parse_settings,
    setting_option,
    size_range_options,
    sizes_option,
    topo_option,
)
from collscope.collectives.sizes import size_ladder
from collscope.errors import ConfigError
from collscope.topo.load import load_topology

DEFAULT_MIN, DEFAULT_MAX, DEFAULT_FACTOR = 1 << 10, 1 << 30, 4.0
"""The ladder predict uses when no size option is given (the library's DEFAULT_SIZES: 1K, 4K, ..., 1G)."""


def _sizes(sizes: tuple[int, ...] | None, min_bytes: int | None, max_bytes: int | None, factor: float | None,
           op: str, nranks: int) -> list[int] | None:
    """Explicit sizes, or the ladder of the range options (each defaulting to the default ladder's), or None
    (the library's default sizes) when no size option is given."""
    ladder = (min_bytes, max_bytes, factor)
    if sizes and any(v is not None for v in ladder):
        raise ConfigError("use either --sizes or --min-bytes/--max-bytes/--factor, not both")
    if sizes:
        return list(sizes)
    if all(v is None for v in ladder):
        return None
    return size_ladder(DEFAULT_MIN if min_bytes is None else min_bytes, DEFAULT_MAX if max_bytes is None else
                       max_bytes, DEFAULT_FACTOR if factor is None else factor, elem_size=1, op=op, nranks=nranks)


@click.command("predict")
@topo_option()
@gpu_option
@geometry_options("nranks", "nnodes", "nvl_domain", "op")
@sizes_option(instead_of="a ladder", minimum=1)
@size_range_options(min_default="1K", max_default="1G")
@click.option("--factor", default=None, type=click.FloatRange(min=1, min_open=True), metavar="F",
              help="Ladder factor, > 1.  [default: 4]")
@link_options
@nic_options
@click.option("--gamma-gbps", default=None, type=float, help="Reduction throughput, GB/s (default: free).")
@click.option("--nccl-version", default="2.30", show_default=True, metavar="VERSION",
              help="The job's NCCL release (e.g. 2.27.3) or a cost-model table (2.30, 2.19): releases up to 2.20 "
                   "get NCCL 2.19.4's tables, later ones 2.30.7's; the notes say which.")
@click.option("--collnet", is_flag=True,
              help="The job runs with a CollNet (SHARP) plugin and NCCL_COLLNET_ENABLE=1: model CollNetDirect, "
                   "CollNetChain and NVLS across nodes too.")
@setting_option
@click.option("--json", "as_json", is_flag=True, help="Print {predictions, nccl_choice, params} as JSON.")
def predict_cmd(topo: tuple[str, ...], gpu: str | None, nranks: int | None, nnodes: int | None,
                nvl_domain: int | None, op: str | None,
                sizes: tuple[int, ...] | None, min_bytes: int | None, max_bytes: int | None, factor: float | None,
                alpha_us: float | None, bw_gbps: float | None, nic_gbit: float | None, nics_per_node: int | None,
                gamma_gbps: float | None, nccl_version: str, collnet: bool, settings: tuple[str, ...],
                as_json: bool) -> None:
    """Expected time and busbw per algorithm (alpha-beta) and per algorithm/protocol (NCCL's model).

    Answers "is my number normal?": compare a measured busbw with the models for the same topology. Link
    parameters come from --topo, else --gpu's table rates, else --alpha-us and --bw-gbps. A prediction is for
    one job's geometry, stated in full: --op, --nranks and --nnodes are required (1 for one node; nothing is
    assumed), --nvl-domain when one NVLink fabric joins several nodes (72 on an NVL72 rack).

    \b
    Example:
      collscope predict --gpu H100 --op all_reduce --nranks 8 --nnodes 1 --sizes 1M,64M,1G
      collscope predict --topo node01/ --op all_gather --nranks 16 --nnodes 2 --json
      collscope predict --op all_reduce --nranks 4 --nnodes 1 --alpha-us 2 --bw-gbps 10
      collscope predict --gpu GB200 --op all_reduce --nranks 72 --nnodes 18 --nvl-domain 72
      collscope predict --gpu H200 --op all_reduce --nranks 16 --nnodes 2 --nic-gbit 400
      collscope predict --gpu H100 --op all_reduce --nranks 8 --nnodes 1 --setting NCCL_NVLS_ENABLE=0
    """
    missing = [opt for opt, value in (("--op OP", op), ("--nranks N", nranks), ("--nnodes N", nnodes))
               if value is None]
    if missing:
        raise ConfigError(f"a prediction needs the job's geometry: pass {', '.join(missing)} (--nnodes 1 for one "
                          "node; collscope assumes none of them)")
    assert op is not None and nranks is not None
    size_list = _sizes(sizes, min_bytes, max_bytes, factor, op, nranks)
    topology = load_topology(topo, gpu=gpu) if topo else None
    result = predict(op, topology=topology, gpu=gpu, nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain,
                     sizes=size_list,
                     alpha_us=alpha_us, bw_gbps=bw_gbps, gamma_gbps=gamma_gbps, version=nccl_version,
                     nic_gbit=nic_gbit, nics_per_node=nics_per_node, collnet=collnet, settings=parse_settings(settings))
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(render_predict_text(result))
