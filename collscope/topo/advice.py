"""The warnings an expert would raise on looking at one node's topology.

The rules read a node through :class:`TopologyView`, the few queries they need; ``NodeTopology``
provides them (and calls :func:`topology_warnings` from ``NodeTopology.warnings()``), so this module
does not import the model.
"""

from __future__ import annotations

from typing import Any, Protocol

from collscope.topo.naming import natural_key
from collscope.topo.paths import is_nvlink

__all__ = ["TopologyView", "topology_warnings"]


class TopologyView(Protocol):
    """What the warning rules read of a node (``NodeTopology`` is one)."""

    @property
    def graph(self) -> Any:
        """The node's graph (networkx), nodes carrying ``kind``, ``ports``, ``sm`` attributes."""

    @property
    def paths(self) -> dict[str, dict[str, str]]:
        """Captured path classes, device -> device -> class."""

    @property
    def sample(self) -> str | None:
        """Name of the bundled sample, when the node is one."""

    @property
    def gpus(self) -> list[str]: ...

    @property
    def nics(self) -> list[str]: ...

    def nearest_nics(self, gpu: str) -> tuple[list[str], str | None]: ...

    def path_class(self, a: str, b: str) -> str: ...


def topology_warnings(node: TopologyView) -> list[str]:
    """Warnings about ``node``: distant NICs, ports down or at mixed rates, RoCE, NIC sharing, missing NVLink."""
    g = node.graph
    out: list[str] = []
    gpus, nics = node.gpus, node.nics

    for gpu in gpus:
        nearest, cls = node.nearest_nics(gpu)
        if cls == "SYS":
            out.append(
                f"{gpu}: nearest NIC ({', '.join(nearest)}) is only reachable across the SMP interconnect (SYS); "
                "GPUDirect RDMA is not used at that distance by default (NCCL_NET_GDR_LEVEL), so PXN "
                "(NCCL_PXN_DISABLE=0, NCCL_P2P_PXN_LEVEL) and NCCL_CROSS_NIC decide its inter-node bandwidth"
            )

    down, rates, roce = [], {}, []
    for nic in nics:
        ports = g.nodes[nic].get("ports") or []
        for p in ports:
            tag = f"{nic}/{p['port']}"
            if p.get("state") and p["state"] != "Active":
                rate = f", rate {p['rate_gbps']:g} Gb/s" if p.get("rate_gbps") is not None else ""
                down.append(f"{tag} ({p['state']}{rate})")
            elif p.get("rate_gbps") is not None:
                rates[tag] = p["rate_gbps"]
            if p.get("link_layer") == "Ethernet":
                roce.append(tag)
    if down:
        out.append(f"NIC ports not Active: {', '.join(down)}; NCCL skips them, check cabling/SM or NCCL_IB_HCA")
    if len(set(rates.values())) > 1:
        by_rate: dict[float, list[str]] = {}
        for tag, rate in rates.items():
            by_rate.setdefault(rate, []).append(tag)
        shown = "; ".join(f"{rate:g} Gb/s: {', '.join(sorted(tags, key=natural_key))}"
                          for rate, tags in sorted(by_rate.items(), reverse=True))
        out.append(f"active NIC ports at mixed rates ({shown}); NCCL uses every active port unless NCCL_IB_HCA "
                   "selects some, and a ring through a slow port runs at that port's rate")
    if roce:
        out.append(
            f"RoCE (Ethernet link layer) ports: {', '.join(roce)}; set NCCL_IB_GID_INDEX to a RoCEv2 GID "
            "(show_gids) and make sure the fabric is lossless (PFC/ECN)"
        )

    active_nics = [n for n in nics if not g.nodes[n].get("ports")
                   or any(p.get("state") == "Active" for p in g.nodes[n]["ports"])]
    if gpus and nics and len(active_nics) < len(gpus):
        out.append(
            f"{len(active_nics)} usable NIC(s) for {len(gpus)} GPUs: GPUs share NICs, so inter-node bandwidth per "
            "GPU is at most a fraction of one NIC"
        )
    # Hand-written NCCL_TOPO_FILEs describe PCIe placement only: no <gpu> elements, so no NVLink facts.
    nvlink_known = bool(node.paths) or any(g.nodes[gpu].get("sm") is not None for gpu in gpus)
    if len(gpus) > 1 and nvlink_known:
        alone = [gpu for gpu in gpus if not any(
            is_nvlink(node.path_class(gpu, other)) for other in gpus if other != gpu)]
        if alone and len(alone) == len(gpus):
            out.append(f"no NVLink between any GPUs: all {len(gpus)} GPUs talk over PCIe/host memory")
        elif alone:
            out.append(f"GPUs without NVLink peers: {', '.join(alone)}")
    if node.sample:
        out.insert(0, f"this is the bundled sample {node.sample!r}, not a capture of this machine")
    return out
