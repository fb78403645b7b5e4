"""Node topology as the ``topo show`` JSON contract and as a readable text summary."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import networkx as nx

from collscope.topo.crossing import node_crossing
from collscope.topo.gdr import GpuNic, gpu_nics
from collscope.topo.model import NodeTopology

__all__ = ["node_to_json", "node_summary_text"]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def node_to_json(node: NodeTopology, *, level: str | None = None, pxn: bool = True) -> dict[str, Any]:
    """The ``collscope topo show --json`` document (see DESIGN.md); ``level`` / ``pxn``: NCCL_NET_GDR_LEVEL as set
    and False for NCCL_PXN_DISABLE=1, which the GDR decisions and the crossing follow."""
    g = node.graph
    gpus = []
    nic_of = gpu_nics(node, level=level, pxn=pxn)
    for gpu in node.gpus:
        d = g.nodes[gpu]
        nearest, cls = node.nearest_nics(gpu)
        gpus.append({
            "name": gpu,
            "index": d.get("index"),
            "model": d.get("model"),
            "pci_bus_id": d.get("pci_bus_id"),
            "cpu_affinity": d.get("cpu_affinity"),
            "numa_affinity": d.get("numa_affinity"),
            "gpu_numa_id": d.get("gpu_numa_id"),
            "numa": d.get("numa"),
            "nearest_nics": nearest,
            "nearest_nic_path": cls,
            "nic": nic_of[gpu].to_dict(),
        })
    crossing = node_crossing(node, level=level, pxn=pxn)
    nics = []
    choices = node.nic_choices()
    for nic in node.nics:
        d = g.nodes[nic]
        ports = [{k: p.get(k) for k in ("port", "state", "physical_state", "rate_gbps", "link_layer", "lid",
                                        "netdev")} for p in d.get("ports") or []]
        speed = d.get("speed_gbps")
        choice = choices[nic]
        nics.append({
            "name": nic,
            "label": d.get("label"),
            "ports": ports,
            "netdev": d.get("netdev"),
            "speed_gbps": speed,
            "bw_gbytes_per_s": None if speed is None else speed / 8.0,
            "numa": d.get("numa"),
            "role": choice.role,
            "left_out_why": choice.why or None,
            "bond": choice.bond or None,
        })
    matrix = node.bandwidth_matrix()
    known, unknown_why = node.nvlink_known()
    extras: dict[str, Any] = {}
    if crossing is not None:
        extras["crossing"] = {"path": crossing.path, "nics": list(crossing.nics), "text": crossing.text(),
                              "staged": list(crossing.staged()),
                              "gpus": [{"gpu": c.gpu, "path": c.path, "nics": list(c.nics), "gdr": c.gdr,
                                        "relays": list(c.relays)} for c in crossing.gpus]}
    given = {k: v for k, v in (("NCCL_NET_GDR_LEVEL", level), ("NCCL_PXN_DISABLE", None if pxn else "1"))
             if v is not None}
    if given:
        extras["nccl_settings"] = given
    if "nccl_graphs" in node.extras:
        extras["nccl_graphs"] = [_graph_json(gr) for gr in node.extras["nccl_graphs"].graphs]
    if "fabric" in node.extras:
        extras["fabric"] = node.extras["fabric"].to_dict()
    if node.gpu_fabric:
        partition = node.nvlink_partition()
        extras["nvlink_partition"] = None if partition is None else dataclasses.asdict(partition)
        extras["gpu_fabric"] = [dataclasses.asdict(f) for f in node.gpu_fabric]
    return _clean({
        "host": node.host,
        "sample": node.sample,
        "sources": node.sources,
        "gpus": gpus,
        "nics": nics,
        "links": node.links(),
        "nvlink_domains": node.nvlink_domains(),
        "nvlink": {"known": known, "why_unknown": unknown_why or None},
        "left_out_nics": node.left_out_nics(),
        "nvswitch": node.has_nvswitch,
        "gpu_bandwidth_gbps": {a: {b: matrix.loc[a, b] for b in matrix.columns} for a in matrix.index},
        "warnings": node.warnings(),
        "graph": nx.node_link_data(g, edges="links"),
        **extras,
    })


def _graph_json(gr: Any) -> dict[str, Any]:
    return {"id": gr.id, "kind": gr.kind, "pattern": gr.pattern, "crossnic": gr.crossnic, "nchannels": gr.nchannels,
            "speed_intra": gr.speed_intra, "speed_inter": gr.speed_inter, "type_intra": gr.type_intra,
            "type_inter": gr.type_inter, "channels": [[f"{k}{v}" for k, v in ch] for ch in gr.channels]}


def _extras_text(node: NodeTopology) -> list[str]:
    lines = []
    graphs = node.extras.get("nccl_graphs")
    if graphs is not None:
        lines.append(f"  NCCL graphs ({len(graphs.graphs)}):")
        for gr in graphs.graphs:
            first = " ".join(f"{k}{v}" for k, v in gr.channels[0]) if gr.channels else "-"
            lines.append(f"    {gr.kind:<14} {gr.nchannels} channel(s), intra {gr.type_intra or '?'} "
                         f"{_fmt_bw(gr.speed_intra)} GB/s, inter {gr.type_inter or '?'} {_fmt_bw(gr.speed_inter)} GB/s;"
                         f" channel 0: {first}")
    registrations = node.gpu_fabric
    if registrations:
        partition = node.nvlink_partition()
        registered = sum(f.registered for f in registrations)
        lines.append(f"  NVLink fabric: {registered} of {len(registrations)} GPUs registered"
                     + (f", all in {partition.text}" if partition is not None else ""))
    fabric = node.extras.get("fabric")
    if fabric is not None:
        rates = sorted({lk.rate_gbps for lk in fabric.links if lk.rate_gbps is not None})
        lines.append(f"  fabric: {len(fabric.switches())} switch(es), {len(fabric.cas())} CA(s), {len(fabric.links)} "
                     f"link(s) at {', '.join(f'{r:g}' for r in rates) or '?'} Gb/s")
    return lines


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns as wide as their widest cell, indented by two spaces."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]


def _fmt_bw(value: float | None) -> str:
    return "?" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:g}"


def _role_text(role: str) -> str:
    return {"unknown": "?", "down": "down (left out)", "front-end": "front-end (left out)",
            "slower": "slower (left out)"}.get(role, role)


def _nvlink_text(node: NodeTopology, nvswitch: bool) -> list[str]:
    """The NVLink lines: domains (or none / unknown), then the per-direction data rate with its source and, when
    known, NCCL's model constant (shown as NCCL's)."""
    if not node.gpus:
        return []
    g = node.graph
    known, why = node.nvlink_known()
    if not known:
        return [f"  NVLink: unknown ({why})"]
    kind = "NVSwitch" if nvswitch else "direct NVLink"
    domains = [d for d in node.nvlink_domains() if len(d) > 1 or nvswitch]
    if not domains:
        return ["  NVLink: none"]
    lines = [f"  NVLink: {kind}; domains: " + "  ".join("[" + " ".join(d) + "]" for d in domains)
             + (" (the only GPU in this capture)" if len(node.gpus) == 1 else "")]
    nv_edges = [g.edges[e] for e in g.edges if g.edges[e]["kind"] == "nvlink"]
    if not nv_edges:
        return lines
    counts = sorted({int(e.get("nlinks") or 0) for e in nv_edges})
    links = "/".join(f"NV{c}" for c in counts)
    what = "per GPU to the NVSwitch" if nvswitch else "per GPU pair"
    origin = str(nv_edges[0]["bw_source"]).split(";")[0]
    origin = origin.split(" x ")[0] if len(counts) > 1 else origin
    xgmi = any(e.get("fabric") == "xgmi" for e in nv_edges)
    rate = "RCCL's xGMI model constant" if xgmi else "data rate"
    lines.append(f"  {'xGMI' if xgmi else 'NVLink'} {what}: {links}, {_span(e.get('bw_gbps') for e in nv_edges)} GB/s "
                 f"per direction ({rate}; {origin})")
    nccl = [e for e in nv_edges if e.get("nccl_bw_gbps") is not None]
    if nccl:
        lines.append(f"  NCCL's model of it: {_span(e['nccl_bw_gbps'] for e in nccl)} GB/s "
                     f"({nccl[0]['nccl_bw_source']}; NCCL's effective-bandwidth constant, not the link rate)")
    return lines


def _span(values: Any) -> str:
    bws = sorted({float(v) for v in values if v is not None})
    if not bws:
        return "?"
    return f"{bws[0]:g}" if len(bws) == 1 else f"{bws[0]:g}-{bws[-1]:g}"


def _gdr_cell(item: GpuNic) -> str:
    if item.decision is None:
        return "-"
    return ("yes" if item.decision.gdr else "no") + ("" if item.decision.nccl_path == item.decision.path
                                                     else f" ({item.decision.nccl_path})")


def _gdr_lines(items: dict[str, GpuNic]) -> list[str]:
    """One line per distinct GPUDirect RDMA decision (why, the variable that changes it) and PXN relay, naming its
    GPUs; one per GPU that passes over nearer NICs, with their reasons."""
    groups: dict[tuple[bool, str, str], list[str]] = {}
    for gpu, item in items.items():
        if item.decision is not None:
            groups.setdefault((item.decision.gdr, item.decision.why, item.decision.variable), []).append(gpu)
    lines = [f"  GDR {'on' if on else 'off'} for {', '.join(gpus)}: {why}; {variable}"
             for (on, why, variable), gpus in groups.items()]
    relayed: dict[str, list[str]] = {}
    for gpu, item in items.items():
        if item.pxn:
            relayed.setdefault(item.pxn, []).append(gpu)
    lines.extend(f"  {', '.join(gpus)}: {pxn}" for pxn, gpus in relayed.items())
    for item in items.values():
        if item.passed_over:
            shown = "; ".join(f"{name} ({why})" for name, why in item.passed_over[:3])
            more = f" (+{len(item.passed_over) - 3} more)" if len(item.passed_over) > 3 else ""
            lines.append(f"  {item.gpu}: nearer NICs not its NIC: {shown}{more}")
    return lines


def node_summary_text(node: NodeTopology, *, level: str | None = None, pxn: bool = True) -> str:
    """The readable form of :func:`node_to_json`, with the same ``level`` / ``pxn``."""
    g = node.graph
    s = node.summary()
    lines = []
    title = f"host {node.host}"
    if node.sample:
        title += f"  [SAMPLE {node.sample!r}: bundled example, not this machine]"
    lines.append(title)
    gens = sorted({str(g.nodes[n].get("generation") or "") for n in node.gpus} - {""})
    models = ", ".join(s["gpu_models"]) or (f"model not captured; {'/'.join(gens)} class assumed" if gens
                                            else "model not captured")
    lines.append(f"  GPUs: {s['gpus']} ({models});  NICs: {s['nics']};  NUMA nodes: {s['numa_nodes']};  "
                 f"PCIe switches (inferred): {s['pcie_switches']}")
    lines.extend(_nvlink_text(node, s["nvswitch"]))
    if node.gpus:
        rows = []
        nic_of = gpu_nics(node, level=level, pxn=pxn)
        for gpu in node.gpus:
            d = g.nodes[gpu]
            nearest, cls = node.nearest_nics(gpu)
            shown = ",".join(nearest[:3]) + ("..." if len(nearest) > 3 else "") if nearest else "-"
            numa = d.get("numa")
            rows.append([gpu, "" if numa is None else str(numa), str(d.get("cpu_affinity") or ""), shown, cls or "-",
                         _gdr_cell(nic_of[gpu])])
        lines.extend(_table(["GPU", "NUMA", "CPU affinity", "nearest NIC(s)", "path", "GDR"], rows))
        lines.extend(_gdr_lines(nic_of))
        crossing = node_crossing(node, level=level, pxn=pxn)
        if crossing is not None:
            lines.append(f"  across nodes: {crossing.text()}")
        given = ", ".join(t for t in (f"NCCL_NET_GDR_LEVEL={level}" if level is not None else "",
                                      "" if pxn else "NCCL_PXN_DISABLE=1") if t)
        if given:
            lines.append(f"  (GDR and the crossing above as NCCL reads them with {given})")
    if node.nics:
        rows = []
        choices = node.nic_choices()
        for nic in node.nics:
            d = g.nodes[nic]
            for p in d.get("ports") or [{"rate_gbps": d.get("speed_gbps")}]:
                rows.append([nic, str(d.get("label") or ""), str(p.get("state") or "?"), _fmt_bw(p.get("rate_gbps")),
                             str(p.get("link_layer") or "?"), str(p.get("netdev") or d.get("netdev") or ""),
                             _role_text(choices[nic].role)])
        lines.extend(_table(["NIC", "label", "state", "rate(Gb/s)", "layer", "netdev", "role"], rows))
        lines.extend(f"  bonded: {c.bond}" for c in choices.values() if c.bond)
    lines.extend(_extras_text(node))
    warnings = s["warnings"]
    lines.append(f"  warnings: {len(warnings)}")
    lines.extend(f"   - {w}" for w in warnings)
    return "\n".join(lines)
