"""The report's topology section: the node's drawing when it has GPUs, a table of its NICs when it has none.

A capture without GPUs (an ibstat of a CPU node, a NIC-only capture) draws as a row of NIC boxes on an
otherwise empty canvas; a table says the same in a few lines and says why there is no drawing.
"""

from __future__ import annotations

from typing import Any

from collscope.topo.model import NodeTopology

__all__ = ["NIC_HEADER", "nic_rows", "no_gpu_note"]

NIC_HEADER = ["NIC", "netdev", "port", "state", "link layer", "rate Gb/s"]


def _text(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def nic_rows(node: NodeTopology) -> list[list[str]]:
    """One row per NIC port (a NIC without port details: one row), in the node's NIC order."""
    rows = []
    g = node.graph
    for nic in node.nics:
        d = g.nodes[nic]
        ports = d.get("ports") or [{}]
        for port in ports:
            rate = port.get("rate_gbps", d.get("speed_gbps"))
            rows.append([nic, _text(port.get("netdev") or d.get("netdev")), _text(port.get("port")),
                         _text(port.get("state")), _text(port.get("link_layer")),
                         "-" if rate is None else f"{float(rate):g}"])
    return rows


def no_gpu_note(node: NodeTopology) -> str:
    """Why the section is a table: the captures name no GPU."""
    sources = ", ".join(node.sources) or "the captures"
    return (f"{node.host}: no GPU in {sources} (no nvidia-smi or NCCL topology capture among them), "
            f"so no drawing; its {len(node.nics)} NIC(s):")
