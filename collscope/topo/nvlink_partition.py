"""NVLink partitions: which GPUs one multi-node NVLink fabric joins, read from each GPU's fabric registration.

GPUs registered with the same ClusterUUID and CliqueId (:class:`~collscope.topo.nvidia_smi.fabric.GpuFabric`) are
one NVLink partition, and NCCL joins the ranks on them as one NVLink domain (MNNVL: its ``cliqueId``, src/mnnvl.cc).
A node's captures say which partition its GPUs are in, not how many GPUs the partition holds: only the captures of
every node of the job give the domain, by counting the nodes that share it
(:meth:`collscope.topo.cluster.Cluster.nvlink_partitions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collscope.topo.gpus import gpu_generation
from collscope.topo.nvidia_smi.fabric import GpuFabric
from collscope.topo.systems import SYSTEMS

__all__ = ["NvlinkPartition", "fabric_warnings", "node_partition"]

_PENDING = ("In Progress", "Not Started")


@dataclass(frozen=True, slots=True, order=True)
class NvlinkPartition:
    """One NVLink partition: the cluster (ClusterUUID) and the clique in it (CliqueId)."""

    cluster_uuid: str
    clique_id: int

    @property
    def text(self) -> str:
        return f"NVLink clique {self.clique_id} of cluster {self.cluster_uuid}"


def node_partition(fabric: Sequence[GpuFabric]) -> NvlinkPartition | None:
    """The partition every listed GPU of a node is registered in; ``None`` when none is listed, one is not
    registered, or they are in different partitions (:func:`fabric_warnings` says which)."""
    cliques = {f.clique for f in fabric}
    if len(cliques) != 1:
        return None
    (clique,) = cliques
    return None if clique is None else NvlinkPartition(*clique)


def _multi_node_gpu(fabric: Sequence[GpuFabric], gpu_model: str | None) -> bool:
    """Whether these GPUs are meant to join a multi-node fabric: one is registered, or the GPU is one of a
    multi-node NVLink rack (the systems table)."""
    if any(f.registered for f in fabric):
        return True
    racks = {s.gpu for s in SYSTEMS if s.mnnvl}
    names = [gpu_model, *(f.product for f in fabric)]
    return any((gen := gpu_generation(n)) is not None and gen.name in racks for n in names if n)


def fabric_warnings(fabric: Sequence[GpuFabric], gpu_model: str | None = None) -> list[str]:
    """What a node's fabric registrations tell an expert: GPUs whose registration is pending (CUDA waits for it),
    failed, or outside any partition on a multi-node NVLink system; GPUs of one node in different partitions;
    degraded or unhealthy fabric links. ``gpu_model``: the node's GPU name when the blocks do not carry it."""
    if not fabric:
        return []
    out: list[str] = []
    pending = [f for f in fabric if f.state in _PENDING]
    if pending:
        out.append(f"{len(pending)} of {len(fabric)} GPUs not registered with the NVLink fabric "
                   f"({_where(pending)}: State {pending[0].state}): CUDA waits for the registration (error 802, "
                   "'system not yet initialized') and NCCL cannot use these GPUs' NVLinks; on an NVL72 rack the "
                   "partition is assigned on the NVLink switch trays (NMX), on an HGX node by nvidia-fabricmanager")
    if _multi_node_gpu(fabric, gpu_model):
        failed = [f for f in fabric if f.state == "Completed" and f.status != "Success"]
        if failed:
            out.append(f"NVLink fabric registration failed on {len(failed)} of {len(fabric)} GPUs ({_where(failed)}: "
                       f"Status {failed[0].status}): no multi-node NVLink for them; NCCL falls back to the network")
        outside = [f for f in fabric if f.state == "Completed" and f.status == "Success" and f.clique is None]
        if outside:
            out.append(f"{len(outside)} of {len(fabric)} GPUs in no NVLink partition ({_where(outside)}: CliqueId "
                       f"{outside[0].clique_id}, ClusterUUID {outside[0].cluster_uuid}): no multi-node NVLink for "
                       "them")
        cliques = sorted({f.clique for f in fabric if f.clique is not None})
        if len(cliques) > 1:
            out.append("GPUs of this node are in different NVLink partitions (" + "; ".join(
                f"{NvlinkPartition(*c).text}: {_where([f for f in fabric if f.clique == c])}" for c in cliques)
                + "): NCCL's MNNVL domain is one partition, so a job across them joins them over the network")
    degraded = [f for f in fabric if f.health_problems or f.health_summary in ("Unhealthy", "Limited Capacity")]
    if degraded:
        shown = degraded[0]
        health = "; ".join((*shown.health_problems,
                            *([f"Summary: {shown.health_summary}"] if shown.health_summary else [])))
        out.append(f"NVLink fabric health on {len(degraded)} of {len(fabric)} GPUs ({_where(degraded)}: {health}): "
                   "NVLink traffic of these GPUs may run below the rate the models assume, or fail")
    return out


def _where(fabric: Sequence[GpuFabric]) -> str:
    return ", ".join(f.where for f in fabric)

