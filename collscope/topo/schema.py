"""The vocabulary of the topology graph: node kinds, link kinds, and how nodes and edges are added.

Every builder (nvidia-smi matrix, NCCL XML, InfiniBand captures) goes through :func:`add_device` and
:func:`add_link`, so a graph from any source has the same attributes:

nodes: ``kind`` (one of :data:`NODE_KINDS`) plus kind-specific attributes (``index``, ``model``,
``pci_bus_id``, ``numa``, ``label``, ...).

edges: ``kind`` (one of :data:`LINK_KINDS`), ``bw_gbps`` (decimal GB/s **per direction**, or ``None``
when unknown), ``bw_source`` (``"measured"``, ``"captured: <what>"`` or ``"assumed: <table>"``) and, for
NVLink, ``nlinks``.
"""

from __future__ import annotations

from typing import Any, Literal

import networkx as nx

__all__ = [
    "NODE_KINDS",
    "LINK_KINDS",
    "NodeKind",
    "LinkKind",
    "add_device",
    "add_link",
    "nodes_of_kind",
]

NodeKind = Literal["gpu", "nic", "numa", "pcie_switch", "host_bridge", "nvswitch", "cpu"]
LinkKind = Literal["nvlink", "pcie", "host", "smp", "c2c"]
NODE_KINDS: tuple[str, ...] = ("gpu", "nic", "numa", "pcie_switch", "host_bridge", "nvswitch", "cpu")
LINK_KINDS: tuple[str, ...] = ("nvlink", "pcie", "host", "smp", "c2c")
"""``nvlink``: GPU-GPU or GPU-NVSwitch; ``pcie``: a PCIe link below a host bridge; ``host``: host
bridge to its NUMA node (CPU root complex); ``smp``: the inter-socket interconnect (QPI/UPI/xGMI);
``c2c``: Grace chip-to-chip."""


def add_device(graph: nx.Graph, name: str, kind: str, **attrs: Any) -> None:
    """Add (or update) one node; ``kind`` must be one of :data:`NODE_KINDS`."""
    if kind not in NODE_KINDS:
        raise ValueError(f"unknown node kind {kind!r}; valid: {', '.join(NODE_KINDS)}")
    if name in graph:
        graph.nodes[name].update({k: v for k, v in attrs.items() if v is not None})
        graph.nodes[name]["kind"] = kind
    else:
        graph.add_node(name, kind=kind, **attrs)


def add_link(
    graph: nx.Graph,
    a: str,
    b: str,
    kind: str,
    *,
    bw_gbps: float | None,
    bw_source: str,
    **attrs: Any,
) -> None:
    """Add one undirected link; both ends must exist. ``bw_gbps`` is per direction, decimal GB/s."""
    if kind not in LINK_KINDS:
        raise ValueError(f"unknown link kind {kind!r}; valid: {', '.join(LINK_KINDS)}")
    for end in (a, b):
        if end not in graph:
            raise ValueError(f"link {a}-{b}: node {end!r} is not in the graph")
    graph.add_edge(a, b, kind=kind, bw_gbps=bw_gbps, bw_source=bw_source, **attrs)


def nodes_of_kind(graph: nx.Graph, kind: str) -> list[str]:
    """Names of the nodes of one kind, in natural order (GPU2 before GPU10, mlx5_2 before mlx5_10)."""
    from collscope.topo.naming import natural_key

    return sorted((n for n, d in graph.nodes(data=True) if d.get("kind") == kind), key=natural_key)
