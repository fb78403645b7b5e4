"""Which engine a locate run uses and how its rails are pinned, read from the one engine table
(:data:`collscope.vocab.engines.ENGINE_ROWS`: what a test measures, where it runs, its rail variables) (pure).

    engine       device  a rail r is pinned by                                           rail r is
    nccl-tests   gpu     NCCL_IB_HCA==<nic>                                              rail_nics[r]
    torch/nccl   gpu     NCCL_IB_HCA==<nic>                                              rail_nics[r]
    mpi          host    OMPI_MCA_btl_tcp_if_include, OMPI_MCA_oob_tcp_if_include=<if>   <iface_prefix><r>
    torch/gloo   host    GLOO_SOCKET_IFNAME=<if>                                         <iface_prefix><r>

A *gpu* engine runs NCCL on every GPU of each node, so a slow GPU, an NVLink fault or a NIC without GPUDirect
RDMA shows in its numbers; a *host* engine measures the CPUs and the host network only. Each engine reads its
own rail variables and no other's: NCCL_IB_HCA means nothing to Open MPI or gloo, so pinning a host engine's
rails with it would run R identical tests.

:func:`choose_engine` picks the engine from the request and the GPUs per node (:mod:`collscope.collectives.allocation`):
on GPU nodes nccl-tests by default (torch means torch with NCCL) and the host engines are refused; with
``--gpus-per-node 0`` (or ``SLURM_GPUS_ON_NODE=0``...) the host engines only; with no GPU evidence at all the
host engines stay allowed (mpi by default) and the GPU engines need ``--gpus-per-node``.
:func:`check_rails` refuses rail tests the engine cannot tell apart, before any test runs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from collscope.collectives.allocation import GpuCount
from collscope.errors import ConfigError
from collscope.vocab.engines import ENGINE_ROWS, EngineRow, engine_row, rows_of

__all__ = ["EngineChoice", "choose_engine", "rail_variables", "check_rails"]

log = logging.getLogger(__name__)

_GPU_OPTIONS = " or ".join(r.option for r in ENGINE_ROWS if r.device == "gpu")
_HOST_OPTIONS = " or ".join(r.option for r in ENGINE_ROWS if r.device == "host")


@dataclass(frozen=True, slots=True)
class EngineChoice:
    row: EngineRow
    reason: str
    """Why this engine: what was asked and what the GPU count says (shown in locate's output)."""


def choose_engine(engine: str | None, backend: str | None, gpus: GpuCount) -> EngineChoice:
    """The engine of a locate run from ``--engine``/``--backend`` (None: not given) and the GPUs per node.

    Raises ConfigError naming the options to use when the engine cannot test these nodes: a host engine on GPU
    nodes, a GPU engine without GPUs or without a known GPU count, ``--backend`` without ``--engine torch``.
    """
    with_backends = {r.engine for r in ENGINE_ROWS if r.backend is not None}
    if backend is not None and engine not in with_backends:
        raise ConfigError(f"--backend {backend} applies to --engine {' or '.join(sorted(with_backends))} only"
                          + (f", not --engine {engine}" if engine is not None else
                             f"; add --engine {' or '.join(sorted(with_backends))}"))
    engines = dict.fromkeys(r.engine for r in ENGINE_ROWS)
    if engine is not None and engine not in engines:
        raise ConfigError(f"--engine {engine} is invalid; valid: {', '.join(engines)}")
    has_gpus = gpus.value is not None and gpus.value > 0
    device = "gpu" if has_gpus else "host"
    if engine is None:  # the first row of a device is its default
        row = next(r for r in ENGINE_ROWS if r.device == device)
        asked = "the default"
    elif backend is None and engine in with_backends:  # the engine's backend for these nodes
        row = next(r for r in rows_of(engine) if r.device == device)
        asked = f"--engine {engine} (backend {row.backend} by the GPU count)"
    else:
        row = engine_row(engine, backend)
        asked = row.option
    if has_gpus and row.device == "host":
        raise ConfigError(f"{row.option} measures {row.measures}, not the {gpus.describe()}: slow GPUs, NVLink "
                          f"faults and lost GPUDirect RDMA would stay invisible. Use {_GPU_OPTIONS}, or "
                          "--gpus-per-node 0 to test the host network on purpose")
    if row.device == "gpu" and gpus.value == 0:
        raise ConfigError(f"{row.option} needs GPUs, and the nodes have none ({gpus.evidence}); valid here: "
                          f"{_HOST_OPTIONS}, or --gpus-per-node G on GPU nodes")
    if row.device == "gpu" and gpus.value is None:
        raise ConfigError(f"{row.option} needs the GPU count of a node: give --gpus-per-node G ({gpus.evidence})")
    if row.device == "gpu":
        why = f"{row.name}, {asked}: {gpus.describe()}; it measures {row.measures}"
    elif gpus.value == 0:
        why = f"{row.name}, {asked}: no GPUs ({gpus.evidence}); it measures {row.measures}"
    else:
        why = (f"{row.name}, {asked}: no GPU evidence ({gpus.evidence}); it measures {row.measures}. On GPU "
               "nodes give --gpus-per-node G")
    return EngineChoice(row, why)


def rail_variables(row: EngineRow, rail: int, *, rail_nics: Sequence[str], iface_prefix: str) -> dict[str, str]:
    """The variables that pin one step of ``row`` to ``rail``."""
    if row.rail_by == "nic":
        if rail >= len(rail_nics) or not rail_nics[rail]:
            raise ConfigError(f"rail {rail} has no NIC name: give --rail-nics NIC0,NIC1,... (one per rail) or "
                              "--topo with the cluster's rails")
        return {name: f"={rail_nics[rail]}" for name in row.rail_variables}
    return {name: f"{iface_prefix}{rail}" for name in row.rail_variables}


def check_rails(row: EngineRow, rails: int, *, rail_nics: Sequence[str], nics_given: bool,
                environ: Mapping[str, str], iface_prefix: str = "") -> None:
    """Refuse ``--rails R`` (R > 1) when the rail tests could not differ: the engine does not read the variable
    that would pin them, or a rail has no NIC to pin to. ``nics_given``: ``--rail-nics`` was on the command line.
    A rail variable the user set in ``environ`` is replaced in the rail tests: logged as old -> new."""
    if rails == 1:
        return
    unread = row.rail_unread(environ)
    if unread is not None:
        raise ConfigError(f"--rails {rails} with {row.option}: {unread}, so {', '.join(row.rail_variables)} "
                          f"would not pin a rail and all {rails} rail tests would be the same test; unset it, or "
                          "use --rails 1")
    if row.rail_by == "iface" and nics_given:
        raise ConfigError(f"--rail-nics pins rails with NCCL_IB_HCA, which {row.option} does not read (it measures "
                          f"{row.measures}; its rail r is interface --iface-prefix<r> through "
                          f"{', '.join(row.rail_variables)}): drop --rail-nics, or use {_GPU_OPTIONS}")
    pins = [rail_variables(row, rail, rail_nics=rail_nics, iface_prefix=iface_prefix) for rail in range(rails)]
    for name in row.rail_variables:
        if name in environ:
            log.warning("%s=%s (yours) is replaced in the rail tests: -> %s", name, environ[name],
                        ", ".join(f"{pin[name]} (rail {r})" for r, pin in enumerate(pins)))
