"""The warnings an expert would raise on looking at one node's topology.

The rules read a node through :class:`TopologyView`, the few queries they need; ``NodeTopology``
provides them (and calls :func:`topology_warnings` from ``NodeTopology.warnings()``), so this module
does not import the model.
"""

from __future__ import annotations

from typing import Any, Protocol

from collscope.topo.gdr import gpu_nics
from collscope.topo.infiniband.host import port_transport
from collscope.topo.naming import natural_key
from collscope.topo.nic_choice import NicChoice, exclude_hca_value
from collscope.topo.nvidia_smi.fabric import GpuFabric
from collscope.topo.nvlink_partition import fabric_warnings
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
    def gpu_fabric(self) -> list[GpuFabric]:
        """The GPUs' NVLink fabric registrations (``nvidia-smi -q``)."""

    @property
    def gpus(self) -> list[str]: ...

    @property
    def nics(self) -> list[str]: ...

    def nic_choices(self) -> dict[str, NicChoice]: ...

    def nearest_nics(self, gpu: str) -> tuple[list[str], str | None]: ...

    def path_class(self, a: str, b: str) -> str: ...

    def nvlink_known(self) -> tuple[bool, str]: ...


_ON_SWITCH = ("PIX", "PXB")


def topology_warnings(node: TopologyView) -> list[str]:
    """Warnings about ``node``: NICs left out and GPUs without a compute NIC on their switch, distant NICs (GPUDirect
    RDMA off at PHB/NODE/SYS by NCCL's default level, :mod:`collscope.topo.gdr`), ports down, front-end ports to
    exclude, RoCE, NIC sharing, missing or unknown NVLink, NVLink fabric registrations pending, failed or degraded."""
    choices = node.nic_choices()
    out: list[str] = []
    lacking, no_nic = _no_compute_nic_on_switch(node, choices)
    out.extend(_distant_nic_warnings(node, skip=lacking))
    out.extend(no_nic)
    out.extend(_port_warnings(node, choices))
    out.extend(_nic_sharing(node, choices))
    out.extend(_nvlink_warnings(node))
    models = [node.graph.nodes[g].get("model") or node.graph.nodes[g].get("generation") for g in node.gpus]
    out.extend(fabric_warnings(node.gpu_fabric, next((m for m in models if m), None)))
    if node.sample:
        out.insert(0, f"this is the bundled sample {node.sample!r}, not a capture of this machine")
    return out


def _distant_nic_warnings(node: TopologyView, *, skip: list[str]) -> list[str]:
    out = []
    beyond: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    unsupported: dict[str, list[str]] = {}
    for gpu, item in gpu_nics(node).items():
        if gpu in skip or item.decision is None:
            continue
        if item.decision.unsupported:  # the GPU table says no NCCL setting gives it (gdr.py)
            unsupported.setdefault(item.decision.why, []).append(gpu)
        elif item.decision.path == "SYS":
            out.append(
                f"{gpu}: nearest NIC ({', '.join(item.nics)}) is only reachable across the SMP interconnect (SYS); "
                "GPUDirect RDMA is not used at that distance by default (NCCL_NET_GDR_LEVEL), so PXN "
                "(NCCL_PXN_DISABLE=0, NCCL_P2P_PXN_LEVEL) and NCCL_CROSS_NIC decide its inter-node bandwidth"
            )
        elif not item.decision.gdr:  # PHB or NODE (NCCL's PHB) beyond the default PXB; gdr.py has the rule
            beyond.setdefault((item.decision.path, item.nics), []).append(gpu)
    for (cls, nics), gpus in beyond.items():
        out.append(
            f"{', '.join(gpus)} ({len(gpus)} of {len(node.gpus)} GPUs): nearest compute NIC ({', '.join(nics)}) at "
            f"{cls}{' (NCCL counts NODE as PHB)' if cls == 'NODE' else ''}, beyond NCCL_NET_GDR_LEVEL's default PXB: "
            "GPUDirect RDMA is off, the NIC sends from and receives into host memory (NCCL src/graph/paths.cc "
            "ncclTopoCheckGdr). NCCL_NET_GDR_LEVEL=PHB turns it on, at a cost: the NIC then reaches GPU memory "
            "through the CPU's root complex, often slower than staging; compare nccl-tests busbw both ways"
        )
    for why, gpus in unsupported.items():
        out.append(f"{', '.join(gpus)}: no GPUDirect RDMA, whatever NCCL_NET_GDR_LEVEL says: {why}")
    return out


def _no_compute_nic_on_switch(node: TopologyView, choices: dict[str, NicChoice]) -> tuple[list[str], list[str]]:
    """GPUs whose PCIe switch (PIX/PXB) holds only left-out NICs, and the warning naming them: what is on their
    switch and where their nearest compute NIC is."""
    left = [c for c in choices.values() if c.left_out]
    lacking: list[str] = []
    seen: dict[str, NicChoice] = {}
    farther: set[tuple[str, str | None]] = set()
    for gpu in node.gpus:
        on_switch = [c for c in left if node.path_class(gpu, c.name) in _ON_SWITCH]
        nearest, cls = node.nearest_nics(gpu)
        if on_switch and cls not in _ON_SWITCH:
            lacking.append(gpu)
            seen.update((c.name, c) for c in on_switch)
            farther.add((", ".join(nearest) or "none", cls))
    if not lacking:
        return [], []
    there = ", ".join(f"{c.name} ({c.role})" for c in sorted(seen.values(), key=lambda c: natural_key(c.name)))
    where = "; ".join(f"{nics} across {cls}" if cls else "no compute NIC at all" for nics, cls in sorted(farther))
    return lacking, [
        f"{', '.join(lacking)} ({len(lacking)} of {len(node.gpus)} GPUs) have no active compute NIC on their PCIe "
        f"switch (PIX/PXB): it holds only {there}. Their nearest compute NIC: {where}; inter-node traffic then "
        "crosses the host bridges (GPUDirect RDMA off beyond NCCL_NET_GDR_LEVEL) or goes through an NVLink peer's "
        "NIC (PXN: NCCL_PXN_DISABLE=0, NCCL_P2P_PXN_LEVEL): bring the Down ports up if they are compute NICs, or "
        "expect less network bandwidth for these GPUs"
    ]


def _port_warnings(node: TopologyView, choices: dict[str, NicChoice]) -> list[str]:
    g = node.graph
    out: list[str] = []
    down, roce = [], []
    for nic in node.nics:
        for p in g.nodes[nic].get("ports") or []:
            tag = f"{nic}/{p['port']}"
            if p.get("state") and p["state"] != "Active" and not choices[nic].left_out:
                rate = f", rate {p['rate_gbps']:g} Gb/s" if p.get("rate_gbps") is not None else ""
                down.append(f"{tag} ({p['state']}{rate})")
            elif port_transport(p.get("link_layer"), rdma=g.nodes[nic].get("rdma", True)) == "RoCE" \
                    and not choices[nic].left_out:
                roce.append(tag)
    if down:
        out.append(f"NIC ports not Active: {', '.join(down)}; NCCL skips them, check cabling/SM or NCCL_IB_HCA")
    left = [c for c in choices.values() if c.left_out]
    if left:
        shown = "; ".join(f"{c.name} ({c.why})" for c in left)
        hint = " (NCCL skips ports that are not Active; check cabling and the subnet manager)" \
            if any(c.role == "down" for c in left) else ""
        out.append(f"NICs left out of the nearest-NIC choice (a GPU's NIC for NCCL is an Active port at the node's "
                   f"fastest rate, InfiniBand or RoCE): {shown}{hint}")
    exclude = exclude_hca_value(choices.values())
    if exclude:
        slow = [c for c in left if c.active]
        names = ", ".join(f"{c.name} ({c.link_layer or '?'} {c.rate_gbps:g} Gb/s)" for c in slow
                          if c.rate_gbps is not None)
        out.append(f"active front-end/slower NIC(s) {names}: NCCL uses every active port unless told otherwise, and "
                   f"a ring through a slow port runs at that port's rate; exclude them with NCCL_IB_HCA={exclude} "
                   f"(`^` excludes, `=` matches the exact names: without it {slow[0].name} is a prefix that also "
                   f"matches {slow[0].name}0..{slow[0].name}9)")
    if roce:
        out.append(
            f"RoCE (Ethernet link layer) compute ports: {', '.join(roce)}; set NCCL_IB_GID_INDEX to a RoCEv2 GID "
            "(show_gids) and make sure the fabric is lossless (PFC/ECN)"
        )
    return out


def _nic_sharing(node: TopologyView, choices: dict[str, NicChoice]) -> list[str]:
    gpus = node.gpus
    usable = [c for c in choices.values() if not c.left_out]
    if gpus and choices and len(usable) < len(gpus):
        return [f"{len(usable)} usable NIC(s) for {len(gpus)} GPUs: GPUs share NICs, so inter-node bandwidth per "
                "GPU is at most a fraction of one NIC"]
    return []


def _nvlink_warnings(node: TopologyView) -> list[str]:
    gpus = node.gpus
    known, why = node.nvlink_known()
    if not gpus:
        return []
    not_described = node.graph.graph.get("nvlink_not_described")  # nccl_xml.undescribed: a provider's file
    if not_described:
        return [str(not_described) if known else f"NVLink unknown: {not_described}"]
    if not known:
        return [f"NVLink unknown: {why}; capture `nvidia-smi topo -m` (or an NCCL_TOPO_DUMP_FILE) to know it"]
    if len(gpus) < 2:
        return []
    alone = [gpu for gpu in gpus if not any(is_nvlink(node.path_class(gpu, other)) for other in gpus if other != gpu)]
    if alone and len(alone) == len(gpus):
        return [f"no NVLink between any GPUs: all {len(gpus)} GPUs talk over PCIe/host memory"]
    if alone:
        return [f"GPUs without NVLink peers: {', '.join(alone)}"]
    return []
