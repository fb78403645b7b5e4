"""A cluster: several nodes' captures merged, with rails and cross-node consistency checks.

Layout of a cluster directory (what ``slurm/collect-topo.sh`` writes)::

    DIR/<host>/            one ``collscope topo collect`` directory per node (captures + meta.json)
    DIR/ibnetdiscover.txt  optional fabric capture (any file at the top level whose content is
                           ibnetdiscover output); when present, rails come from leaf switches.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collscope.errors import ParseError
from collscope.topo.detect import detect_format, load_captures, read_capture_text, skip_reason
from collscope.topo.infiniband.fabric import IbFabric, parse_ibnetdiscover
from collscope.topo.model import NodeTopology
from collscope.topo.naming import natural_key
from collscope.topo.node import build_node
from collscope.topo.nvlink_partition import NvlinkPartition

__all__ = ["Rail", "Cluster", "CaptureNote", "load_cluster", "build_cluster", "hosts_text"]

SHOWN_HOSTS = 8
"""A note names at most this many hosts, then says how many more."""


@dataclass(frozen=True)
class Rail:
    index: int
    members: tuple[tuple[str, str], ...]
    """(host, NIC name) pairs on this rail."""
    switch: str | None = None
    """Leaf switch (name or GUID) when rails come from the fabric."""


@dataclass(frozen=True)
class CaptureNote:
    """One thing the node captures noted (a tool missing or failing, a capture that did not parse), said once for
    every host that noted it; a file at the cluster directory's top level has no host."""

    text: str
    hosts: tuple[str, ...] = ()

    def line(self, all_hosts: Sequence[str]) -> str:
        """``all 4 nodes: ibstat not found on PATH; ...``, ``node2, node3: ...``, or the text alone."""
        return f"{hosts_text(self.hosts, all_hosts)}: {self.text}" if self.hosts else self.text

    def to_json(self) -> dict[str, Any]:
        return {"note": self.text, "hosts": list(self.hosts)}


def hosts_text(hosts: Sequence[str], all_hosts: Sequence[str]) -> str:
    """Some hosts of a cluster in words: ``all 4 nodes``, ``node2, node3``, or the first :data:`SHOWN_HOSTS` and
    how many more (``n01, ..., n08 and 3 more (11 of 12 nodes)``)."""
    if len(hosts) == len(all_hosts) > 1:
        return f"all {len(all_hosts)} nodes"
    if len(hosts) > SHOWN_HOSTS:
        return (f"{', '.join(hosts[:SHOWN_HOSTS])} and {len(hosts) - SHOWN_HOSTS} more "
                f"({len(hosts)} of {len(all_hosts)} nodes)")
    return ", ".join(hosts)


def collapse_notes(per_host: Sequence[tuple[str | None, str]]) -> list[CaptureNote]:
    """``(host, note)`` pairs -> one :class:`CaptureNote` per distinct note, with its hosts in the order first seen
    (topo collect writes a missing tool once per capture it would have made: nvidia-smi three times)."""
    hosts: dict[str, list[str]] = {}
    for host, text in per_host:
        seen = hosts.setdefault(text, [])
        if host is not None and host not in seen:
            seen.append(host)
    return [CaptureNote(text, tuple(h)) for text, h in hosts.items()]


@dataclass
class Cluster:
    nodes: dict[str, NodeTopology]
    rails: list[Rail]
    rail_source: str
    fabric: IbFabric | None = None
    warnings: list[str] = field(default_factory=list)
    """The capture notes (each once, with its hosts), then what differs between nodes and the rails' gaps."""
    notes: list[CaptureNote] = field(default_factory=list)
    """What the captures noted, each note once with the hosts that noted it."""
    root: Path | None = None
    """The cluster directory it was read from."""

    def hosts_noting(self, tool: str) -> tuple[str, ...]:
        """The hosts whose captures noted ``tool`` missing or failing (a note begins with the tool's name:
        ``nvidia-smi not found on PATH; ...``, ``ibstat exited 1: ...``), in node order."""
        found = {h for note in self.notes if note.text.startswith(f"{tool} ") for h in note.hosts}
        return tuple(h for h in self.nodes if h in found)

    def nvlink_partitions(self) -> dict[NvlinkPartition, list[str]]:
        """The nodes whose GPUs are all in one NVLink partition, by partition (``nvidia-smi -q`` Fabric blocks), hosts
        in natural order; a node without captured blocks, or whose GPUs are not all in one partition, is in none."""
        out: dict[NvlinkPartition, list[str]] = {}
        for host in sorted(self.nodes, key=natural_key):
            partition = self.nodes[host].nvlink_partition()
            if partition is not None:
                out.setdefault(partition, []).append(host)
        return out

    def partition_gpus(self, hosts: Sequence[str]) -> int:
        """The GPUs of ``hosts`` (the nodes of one partition)."""
        return sum(len(self.nodes[h].gpus) for h in hosts)

    def to_json(self) -> dict[str, Any]:
        from collscope.topo.render import node_to_json

        per_node = {}
        for host, node in self.nodes.items():
            doc = node_to_json(node)
            doc.pop("graph", None)
            per_node[host] = {k: doc[k] for k in ("gpus", "nics", "nvswitch", "nvlink_domains", "warnings")}
            if "nvlink_partition" in doc:
                per_node[host]["nvlink_partition"] = doc["nvlink_partition"]
        return {
            "nodes": list(self.nodes),
            "rail_source": self.rail_source,
            "rails": [{"index": r.index, "switch": r.switch, "members": [list(m) for m in r.members]}
                      for r in self.rails],
            "nic_gpu_ratio": {h: _ratio(n) for h, n in self.nodes.items()},
            "nvlink_partitions": [{"cluster_uuid": p.cluster_uuid, "clique_id": p.clique_id, "hosts": hosts,
                                   "gpus": self.partition_gpus(hosts)}
                                  for p, hosts in self.nvlink_partitions().items()],
            "warnings": self.warnings,
            "notes": [note.to_json() for note in self.notes],
            "per_node": per_node,
        }


def _ratio(node: NodeTopology) -> float | None:
    return round(len(node.nics) / len(node.gpus), 3) if node.gpus else None


def _active_nics(node: NodeTopology) -> list[str]:
    g = node.graph
    out = []
    for nic in node.nics:
        ports = g.nodes[nic].get("ports") or []
        if not ports or any(p.get("state") == "Active" for p in ports):
            out.append(nic)
    return out


def _signature(node: NodeTopology) -> dict[str, Any]:
    g = node.graph
    s = node.summary()
    rates = sorted({p.get("rate_gbps") for n in node.nics for p in g.nodes[n].get("ports") or []
                    if p.get("state") == "Active"} - {None})
    return {
        "GPUs": s["gpus"],
        "GPU models": tuple(s["gpu_models"]),
        "NICs": s["nics"],
        "active NICs": len(_active_nics(node)),
        "NIC rates (Gb/s)": tuple(rates),
        "NVLink counts": tuple(s["nvlink_counts"]),
        "NVSwitch": s["nvswitch"],
        "NUMA nodes": s["numa_nodes"],
        "NVLink partition": _partition_text(node),
    }


def _partition_text(node: NodeTopology) -> str:
    """The node's NVLink partition in words (nvidia-smi -q Fabric), for the comparison between nodes."""
    if not node.gpu_fabric:
        return "not captured"
    partition = node.nvlink_partition()
    return partition.text if partition is not None else "none (GPUs not all registered in one)"


def build_cluster(nodes: dict[str, NodeTopology], fabric: IbFabric | None = None) -> Cluster:
    warnings: list[str] = []
    sigs = {host: _signature(n) for host, n in nodes.items()}
    if len(nodes) > 1:
        for key in next(iter(sigs.values())):
            counts = Counter(sig[key] for sig in sigs.values())
            majority, _ = counts.most_common(1)[0]
            for host, sig in sigs.items():
                if sig[key] != majority:
                    warnings.append(f"{host} differs from the majority: {key} {_show(sig[key])} "
                                    f"(majority {_show(majority)})")
    rails, source = _rails_from_fabric(nodes, fabric) if fabric else ([], "")
    if not rails:
        rails, source = _rails_by_index(nodes), "NIC index (i-th InfiniBand NIC, else i-th NIC, of every node)"
        for rail in rails:
            missing = sorted(set(nodes) - {h for h, _ in rail.members})
            if missing and len(nodes) > 1:
                warnings.append(f"rail {rail.index}: no active NIC on {', '.join(missing)}")
    for node in nodes.values():
        ratio = _ratio(node)
        if ratio is not None and len(nodes) > 1 and ratio < 1:
            warnings.append(f"{node.host}: {len(node.nics)} NICs for {len(node.gpus)} GPUs (ratio {ratio:g})")
    return Cluster(nodes=nodes, rails=rails, rail_source=source, fabric=fabric, warnings=warnings)


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _rail_nics(node: NodeTopology) -> list[str]:
    """The NICs that carry collective traffic: InfiniBand ones when the node has any (Ethernet ports next to
    them are front-end or storage NICs), else all; in natural name order."""
    g = node.graph
    layers = {n: {p.get("link_layer") for p in g.nodes[n].get("ports") or []} for n in node.nics}
    ib = [n for n in node.nics if "InfiniBand" in layers[n]]
    return ib or list(node.nics)


def _rails_by_index(nodes: dict[str, NodeTopology]) -> list[Rail]:
    """Rail i = the i-th rail NIC by name on every node (``mlx5_3`` with ``mlx5_3``). A NIC that is down stays
    in its rail's position, so one bad port never shifts the other rails; it is left out of the rail."""
    per_node = {host: _rail_nics(n) for host, n in nodes.items()}
    active = {host: set(_active_nics(n)) for host, n in nodes.items()}
    width = max((len(v) for v in per_node.values()), default=0)
    rails = []
    for i in range(width):
        members = tuple((h, nics[i]) for h, nics in per_node.items() if i < len(nics) and nics[i] in active[h])
        rails.append(Rail(i, members))
    return rails


def _norm_guid(guid: str | None) -> str | None:
    if not guid:
        return None
    return guid.lower().removeprefix("0x").lstrip("0") or "0"


def _rails_from_fabric(nodes: dict[str, NodeTopology], fabric: IbFabric) -> tuple[list[Rail], str]:
    """Group NICs by the leaf switch their CA is cabled to; match CAs by node GUID, else by name."""
    by_guid = {_norm_guid(n.guid): n for n in fabric.cas()}
    by_name = {n.name.lower(): n for n in fabric.cas()}
    switch_names = {s.guid: s.name for s in fabric.switches()}
    groups: dict[str, list[tuple[str, str]]] = {}
    for host, node in nodes.items():
        for nic in _active_nics(node):
            guid = _norm_guid(node.graph.nodes[nic].get("node_guid"))
            ca = by_guid.get(guid) if guid else None
            if ca is None:
                ca = by_name.get(f"{host} {nic}".lower())
            if ca is None:
                continue
            leaf = fabric.leaf_of(ca.guid)
            if leaf is not None:
                groups.setdefault(leaf, []).append((host, nic))
    if not groups:
        return [], ""
    ordered = sorted(groups.items(), key=lambda kv: natural_key(switch_names.get(kv[0], kv[0])))
    rails = [Rail(i, tuple(sorted(members)), switch_names.get(leaf, leaf)) for i, (leaf, members) in
             enumerate(ordered)]
    return rails, "ibnetdiscover leaf switches"


def load_cluster(directory: Path | str, *, gpu: str | None = None) -> Cluster:
    """The cluster of ``directory`` (see the module doc). What the node captures noted (tools that failed, files
    skipped) comes first in the cluster's warnings, each note once with the hosts that noted it (``all 4 nodes:
    ibstat not found on PATH; ...``), and in ``notes``."""
    root = Path(directory)
    if not root.is_dir():
        raise ParseError(str(root), None, "a directory with one capture directory per node")
    nodes: dict[str, NodeTopology] = {}
    notes: list[tuple[str | None, str]] = []
    fabric: IbFabric | None = None
    for path in sorted(root.iterdir(), key=lambda p: natural_key(p.name)):
        if path.is_dir():
            captures = load_captures([path])
            host = captures.host if captures.host != "localhost" else path.name
            captures.host = host
            if host in nodes:
                raise ParseError(str(path), None, f"one directory per host, but {host!r} appears twice")
            nodes[host] = build_node(captures, gpu=gpu)
            notes.extend((host, note) for note in captures.errors)
        elif path.name.startswith("."):
            continue
        elif (why := skip_reason(path)) is not None:
            notes.append((None, f"{path}: {why}, skipped"))
        else:
            text = read_capture_text(path)
            if detect_format(text) == "ibnetdiscover":
                fabric = parse_ibnetdiscover(text, str(path))
    if not nodes:
        raise ParseError(str(root), None, "at least one node directory (from collscope topo collect)")
    cluster = build_cluster(nodes, fabric)
    cluster.notes = collapse_notes(notes)
    cluster.warnings[:0] = [note.line(list(nodes)) for note in cluster.notes]
    cluster.root = root
    return cluster
