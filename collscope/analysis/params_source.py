"""The link parameters of each job in a results frame: what ``analyze`` and ``report`` model every group against.

One function for both commands, so that a report's verdicts are analyze's verdicts: the topology (``--topo``), the
GPU named by hand (``--gpu``), hand-given alpha/beta (``--alpha-us``/``--bw-gbps``), or else the GPU the group's
records name (nccl-tests' rank lines); the NVLink domain from each group's geometry (``--nvl-domain`` wins there),
or, where the records leave it unknown, from the NVLink partitions of the ``--topo`` captures, which then become
evidence of the group's geometry (:func:`domains_from_captures`): the Geometry printed is the one the models use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from collscope.analysis.efficiency import NO_MODEL_HINT
from collscope.analysis.job_geometry import GroupGeometry, geometry_of, host_backends, model_nvl_domain, records_gpu
from collscope.analysis.model_types import LinkParams, NetSettings
from collscope.analysis.params import link_params
from collscope.analysis.partition_domain import partition_domain
from collscope.errors import ConfigError
from collscope.geometry import Geometry, Known
from collscope.topo.load import load_topology

if TYPE_CHECKING:
    import pandas as pd

    from collscope.topo.cluster import Cluster
    from collscope.topo.model import NodeTopology

__all__ = ["job_params_source", "domains_from_captures", "captured_domain"]


def captured_domain(geometry: Geometry, topology: NodeTopology | Cluster, nranks: int, nnodes: int) -> Geometry:
    """``geometry`` (of ``nranks`` ranks on ``nnodes`` nodes) with the NVLink domain the captures' NVLink
    partitions give (:func:`~.partition_domain.partition_domain`: the job's nodes that share one partition) as
    that field's evidence, where the geometry leaves it unknown; ``geometry`` itself when it knows the domain
    (the input, ``--nvl-domain``), the captures do not give one, or theirs would break a bound the input gives."""
    known = geometry.get("nvl_domain")
    if model_nvl_domain(geometry, nranks) is not None:
        return geometry
    domain, source, _ = partition_domain(topology, nranks=nranks, nnodes=nnodes)
    if domain is None or (known.low is not None and domain < known.low) \
            or (known.high is not None and domain > known.high):
        return geometry
    return replace(geometry, nvl_domain=Known(domain, (f"--topo: {source}", *known.evidence)))


def domains_from_captures(frame: pd.DataFrame, topology: NodeTopology | Cluster) -> None:
    """Each group of ``frame`` with the NVLink domain the captures give it (:func:`captured_domain`), in its
    geometry (``frame.attrs["geometry"]``, in place), so that the Geometry printed is the one the models use."""
    frame.attrs["geometry"] = tuple(
        replace(g, geometry=captured_domain(g.geometry, topology, g.nranks, g.nnodes))
        if isinstance(g, GroupGeometry) and g.nnodes is not None else g
        for g in frame.attrs.get("geometry") or ())


def job_params_source(frame: pd.DataFrame, *, topo_paths: Sequence[str] = (), gpu: str | None = None,
                      alpha_us: float | None = None, bw_gbps: float | None = None, nic_gbit: float | None = None,
                      nics_per_node: int | None = None) -> Callable[[int, int], LinkParams | None] | None:
    """Link parameters per (nranks, nnodes) group of ``frame`` (:func:`~.load.load_results`).

    Without ``topo_paths``, ``gpu`` or ``bw_gbps``, each group takes the GPU its records name, said in the
    parameters' caveats (the analysis' notes); None when no record names one (no efficiency; the analysis
    notes say :data:`~.efficiency.NO_MODEL_HINT`). A group whose records all ran on the hosts' CPUs
    (:func:`~.job_geometry.host_backends`) is not modelled with a GPU's links unless ``bw_gbps`` is given.
    ConfigError: ``alpha_us`` alone; per group (the analysis' notes): no single GPU named, a host group against a
    GPU's links."""
    from_records = not (topo_paths or gpu or bw_gbps)
    if from_records:
        if alpha_us is not None:
            raise ConfigError("--alpha-us needs --bw-gbps, --topo or --gpu")
        if "gpu" not in frame.columns or not frame["gpu"].notna().any():
            return None
    topology = load_topology(list(topo_paths), gpu=gpu) if topo_paths else None
    if topology is not None:
        domains_from_captures(frame, topology)

    def source(nranks: int, nnodes: int, *, net: NetSettings | None = None) -> LinkParams | None:
        nvl_domain = model_nvl_domain(geometry_of(frame, nranks, nnodes), nranks)
        name = gpu
        why = ""
        if from_records:
            name, why = records_gpu(frame, nranks, nnodes)
            if name is None:
                raise ConfigError(f"{why}; {NO_MODEL_HINT}")
        try:
            params = link_params(topology, gpu=name, nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain,
                                 alpha_us=alpha_us, bw_gbps=bw_gbps, nic_gbit=nic_gbit, nics_per_node=nics_per_node,
                                 net=net)
        except ConfigError as exc:
            if from_records:
                raise ConfigError(f"{exc} (GPU {name}: {why})") from exc
            raise
        host = host_backends(frame, nranks, nnodes)
        if host and params.gpu is not None and bw_gbps is None:
            raise ConfigError(f"its records ({host}) ran on the hosts' CPUs, no GPU named, and the link parameters "
                              f"are GPU {params.gpu}'s (--topo or --gpu); pass --alpha-us A --bw-gbps B for the "
                              "hosts' network")
        if from_records:
            return replace(params, caveats=(f"GPU {name} for {nranks} ranks on {nnodes} node(s): {why}",
                                            *params.caveats))
        return params

    return source
