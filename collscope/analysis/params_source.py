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
from collscope.analysis.model_types import LinkParams
from collscope.analysis.params import link_params
from collscope.analysis.partition_domain import partition_domain
from collscope.errors import ConfigError
from collscope.geometry import Known
from collscope.topo.load import load_topology

if TYPE_CHECKING:
    import pandas as pd

    from collscope.topo.cluster import Cluster
    from collscope.topo.model import NodeTopology

__all__ = ["job_params_source", "domains_from_captures"]


def domains_from_captures(frame: pd.DataFrame, topology: NodeTopology | Cluster) -> None:
    """Give each group of ``frame`` whose records leave the NVLink domain unknown the domain the captures' NVLink
    partitions give it (:func:`~.partition_domain.partition_domain`: the nodes of the job that share one
    partition), as that field's evidence in the group's geometry (``frame.attrs["geometry"]``, in place). A value
    the records or ``--nvl-domain`` give, or a bound of theirs the partition's domain would break, is kept."""
    groups = frame.attrs.get("geometry") or ()
    out = []
    for group in groups:
        if isinstance(group, GroupGeometry) and group.nnodes is not None \
                and model_nvl_domain(group.geometry, group.nranks) is None:
            known = group.geometry.get("nvl_domain")
            domain, source, _ = partition_domain(topology, nranks=group.nranks, nnodes=group.nnodes)
            if domain is not None and (known.low is None or domain >= known.low) \
                    and (known.high is None or domain <= known.high):
                evidence = (f"--topo: {source}", *known.evidence)
                group = replace(group, geometry=replace(group.geometry, nvl_domain=Known(domain, evidence)))
        out.append(group)
    frame.attrs["geometry"] = tuple(out)


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

    def source(nranks: int, nnodes: int) -> LinkParams | None:
        nvl_domain = model_nvl_domain(geometry_of(frame, nranks, nnodes), nranks)
        name = gpu
        why = ""
        if from_records:
            name, why = records_gpu(frame, nranks, nnodes)
            if name is None:
                raise ConfigError(f"{why}; {NO_MODEL_HINT}")
        try:
            params = link_params(topology, gpu=name, nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain,
                                 alpha_us=alpha_us, bw_gbps=bw_gbps, nic_gbit=nic_gbit, nics_per_node=nics_per_node)
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
