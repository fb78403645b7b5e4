"""The NVLink domain a job's captured NVLink partitions give, when nobody stated it.

Item 1 of the geometry rules: the domain is read from evidence, never guessed. The captures of every node
(``collscope topo collect`` on each, one cluster directory) give it: the nodes whose GPUs share one partition
(:mod:`collscope.topo.nvlink_partition`) are one NVLink domain, and the job's ranks on them are one NCCL node. One
node's capture says its GPUs are in a multi-node partition, not how many GPUs the partition joins, and the captures
of some of a job's nodes do not say where the others are: then nothing is assumed and the model says so.
``--nvl-domain`` (or an NCCL log's MNNVL lines) wins over both.
"""

from __future__ import annotations

from collscope.topo.cluster import Cluster, hosts_text
from collscope.topo.model import NodeTopology

__all__ = ["partition_domain"]


def partition_domain(topology: NodeTopology | Cluster | None, *, nranks: int, nnodes: int
                     ) -> tuple[int | None, str, str]:
    """``(nvl_domain, source, caveat)`` for ``nranks`` ranks on ``nnodes`` nodes of ``topology``.

    ``nvl_domain`` (ranks of one domain) and its ``source`` when the captures of several nodes put them in one
    partition; a ``caveat`` when one node's capture shows a multi-node partition whose size it does not give;
    ``(None, "", "")`` when the captures say nothing of partitions or the job is on one node."""
    if topology is None or nnodes < 2:
        return None, "", ""
    ppn = nranks // nnodes
    if isinstance(topology, Cluster):
        partitions = topology.nvlink_partitions()
        shared = {p: hosts for p, hosts in partitions.items() if len(hosts) > 1}
        if not shared:
            lone = next(iter(partitions.items()), None)
            return (None, "", "") if lone is None else (None, "", _one_node_caveat(lone[1][0], lone[0].text, nnodes))
        partition = max(shared, key=lambda p: (len(shared[p]), p))
        hosts = shared[partition]
        shown = hosts_text(hosts, list(topology.nodes))
        uncaptured = nnodes - len(topology.nodes)
        if len(hosts) < nnodes and uncaptured > 0:  # the job's other nodes may be in it too: not known
            return None, "", (
                f"{len(hosts)} captured nodes ({shown}) share {partition.text} (nvidia-smi -q Fabric), but the job "
                f"has {nnodes} nodes and the captures hold {len(topology.nodes)}: whether the other {uncaptured} are "
                f"in that partition is not known, so each of the {nnodes} nodes is modelled as its own NVLink "
                "domain, joined by the NICs; pass --nvl-domain N (the GPUs of the partition the job runs in: 72 on "
                "a whole NVL72 rack), or the captures of every node of the job (collscope topo collect on each, one "
                "cluster directory)")
        domain = ppn * min(len(hosts), nnodes)
        others = [p for p in partitions if p != partition]
        source = (f"NVLink domain of {domain} ranks: {len(hosts)} captured nodes ({shown}) "
                  f"share {partition.text} (nvidia-smi -q Fabric), {ppn} ranks on each; --nvl-domain N overrides")
        if others:
            source += (f"; the captures hold {len(others)} more partition(s) ({', '.join(p.text for p in others)}), "
                       "the largest one is taken")
        return domain, source, ""
    own = topology.nvlink_partition()
    return (None, "", "") if own is None else (None, "", _one_node_caveat(topology.host, own.text, nnodes))


def _one_node_caveat(host: str, partition: str, nnodes: int) -> str:
    return (f"the GPUs of {host} are in {partition} (nvidia-smi -q Fabric), a multi-node NVLink partition whose size "
            f"one node's capture does not give: each of the {nnodes} nodes is modelled as its own NVLink domain, "
            "joined by the NICs; pass --nvl-domain N (the GPUs of the partition the job runs in: 72 on a whole NVL72 "
            "rack), or the captures of every node of the job (collscope topo collect on each, one cluster directory)")
