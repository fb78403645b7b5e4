"""Drawings of a node: a layered layout (NUMA -> host bridges -> PCIe switches -> GPUs/NICs -> NVSwitch).

Positions come from the PCIe tree, not from a force layout, so 8 GPUs + 12 NICs stay legible.
Also GraphML and Graphviz DOT exports of the same graph.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import networkx as nx

from collscope.figure_text import plain_text
from collscope.topo.model import NodeTopology
from collscope.topo.naming import natural_key
from collscope.topo.rates import gpu_generation
from collscope.topo.schema import nodes_of_kind

__all__ = ["layout", "draw_png", "write_graphml", "write_dot"]

_LEVEL = {"numa": 0.0, "host_bridge": 1.0, "pcie_switch": 2.0, "gpu": 3.2, "nic": 3.2, "nvswitch": 4.6}
_STYLE = {  # face colour, edge colour
    "gpu": ("#76b900", "#3d6000"),
    "nic": ("#4a90d9", "#1d4f86"),
    "numa": ("#d9d9d9", "#555555"),
    "host_bridge": ("#f2f2f2", "#777777"),
    "pcie_switch": ("#fbe3b5", "#a87b22"),
    "nvswitch": ("#c6e48b", "#3d6000"),
    "cpu": ("#d9d9d9", "#555555"),
}


def _children(g: nx.Graph, parent: str, level: float) -> list[str]:
    out = [n for n in g.neighbors(parent)
           if g.edges[parent, n]["kind"] in ("pcie", "host") and _LEVEL.get(g.nodes[n]["kind"], 9) > level]
    return sorted(out, key=lambda n: (g.nodes[n]["kind"] != "gpu", natural_key(n)))


def layout(node: NodeTopology) -> dict[str, tuple[float, float]]:
    """x by walking the PCIe tree left to right, y by node kind."""
    g = node.graph
    pos: dict[str, tuple[float, float]] = {}
    next_x = [0.0]

    def place(n: str) -> float:
        level = _LEVEL.get(g.nodes[n]["kind"], 3.2)
        kids = [k for k in _children(g, n, level) if k not in pos]
        if not kids:
            x = next_x[0]
            next_x[0] += 1.0
        else:
            pos[n] = (0.0, level)  # reserve, so cycles cannot re-enter
            xs = [place(k) for k in kids]
            x = sum(xs) / len(xs)
        pos[n] = (x, level)
        return x

    for numa in nodes_of_kind(g, "numa"):
        place(numa)
        next_x[0] += 0.6
    for n in sorted(g.nodes, key=lambda n: (g.nodes[n]["kind"] != "gpu", natural_key(n))):
        kind = g.nodes[n]["kind"]
        if n not in pos and kind not in ("nvswitch",):
            pos[n] = (next_x[0], _LEVEL.get(kind, 3.2))
            next_x[0] += 1.0
    gpu_xs = [pos[n][0] for n in node.gpus if n in pos]
    for sw in nodes_of_kind(g, "nvswitch"):
        pos[sw] = ((min(gpu_xs) + max(gpu_xs)) / 2 if gpu_xs else 0.0, _LEVEL["nvswitch"])
    return pos


def _label(g: nx.Graph, n: str) -> str:
    d = g.nodes[n]
    kind = d["kind"]
    if kind == "gpu":
        gen = gpu_generation(d.get("model")) if d.get("model") else None
        short = gen.name if gen else str(d.get("model") or d.get("generation") or "")
        short = short.replace("NVIDIA ", "").replace("Tesla ", "").replace("GeForce ", "")
        return f"{n}\n{short[:11]}" if short else n
    if kind == "nic":
        ports = d.get("ports") or []
        layer = next((p.get("link_layer") for p in ports if p.get("link_layer")), None)
        rate = d.get("speed_gbps")
        extra = " ".join(x for x in (f"{rate:g}G" if rate else "", "RoCE" if layer == "Ethernet" else
                                     ("IB" if layer == "InfiniBand" else "")) if x)
        down = ports and not any(p.get("state") == "Active" for p in ports)
        return f"{n}\n{extra}{' DOWN' if down else ''}".strip()
    if kind == "pcie_switch":
        return "PCIe sw"
    if kind == "host_bridge":
        return "host bridge"
    return n


@plain_text
def draw_png(node: NodeTopology, path: Path | str | io.BytesIO, *, title: str | None = None) -> None:
    """Write a PNG drawing of the node."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyBboxPatch

    g = node.graph
    pos = layout(node)
    xs = [p[0] for p in pos.values()] or [0.0]
    width = max(8.0, (max(xs) - min(xs) + 2) * 0.95)
    fig, ax = plt.subplots(figsize=(min(width, 30.0), 7.5), dpi=110)
    multi_nvswitch = bool(nodes_of_kind(g, "nvswitch"))

    for u, v, d in g.edges(data=True):
        (x1, y1), (x2, y2) = pos[u], pos[v]
        kind = d["kind"]
        if kind == "nvlink":
            if multi_nvswitch:
                ax.plot([x1, x2], [y1, y2], color="#76b900", lw=2.2, zorder=1, alpha=0.85)
            else:
                rad = 0.25 + 0.05 * abs(x2 - x1)
                ax.annotate("", xy=(x2, y2 + 0.18), xytext=(x1, y1 + 0.18),
                            arrowprops={"arrowstyle": "-", "color": "#76b900", "lw": 1.0 + 0.2 * (d.get("nlinks") or 1),
                                        "connectionstyle": f"arc3,rad=-{min(rad, 0.6):.2f}", "alpha": 0.8}, zorder=1)
        elif kind == "smp":
            ax.plot([x1, x2], [y1, y2], color="#b03030", lw=2.0, ls="--", zorder=1)
            ax.text((x1 + x2) / 2, y1 + 0.12, "SMP interconnect (SYS)", ha="center", fontsize=7, color="#b03030")
        else:
            ax.plot([x1, x2], [y1, y2], color="#888888", lw=1.2, zorder=1)

    for n, (x, y) in pos.items():
        kind = g.nodes[n]["kind"]
        face, edge = _STYLE.get(kind, ("#ffffff", "#000000"))
        label = _label(g, n)
        w = 0.86 if kind in ("gpu", "nic", "pcie_switch", "host_bridge") else max(1.2, 0.12 * len(n) + 0.6)
        if kind == "nvswitch":
            gpu_xs = [pos[gg][0] for gg in node.gpus]
            w = max(w, max(gpu_xs) - min(gpu_xs) + 0.9) if gpu_xs else w
        h = 0.5
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                    facecolor=face, edgecolor=edge, lw=1.2, zorder=2))
        ax.text(x, y, label, ha="center", va="center", fontsize=7.5, zorder=3,
                color="white" if kind in ("gpu", "nic") else "black", fontweight="bold" if kind == "gpu" else None)

    for sw in nodes_of_kind(g, "nvswitch"):
        nl = {g.edges[gpu, sw].get("nlinks") for gpu in node.gpus if g.has_edge(gpu, sw)}
        bw = {g.edges[gpu, sw].get("bw_gbps") for gpu in node.gpus if g.has_edge(gpu, sw)}
        x, y = pos[sw]
        ax.text(x, y + 0.42, f"NVSwitch fabric: NV{'/'.join(str(v) for v in sorted(nl, key=str))} per GPU, "
                f"{'/'.join(f'{b:g}' if b else '?' for b in bw)} GB/s per direction",
                ha="center", fontsize=8, color="#3d6000")

    handles = [Line2D([], [], color="#76b900", lw=2.5, label="NVLink"),
               Line2D([], [], color="#888888", lw=1.2, label="PCIe (inferred)"),
               Line2D([], [], color="#b03030", lw=2, ls="--", label="SMP interconnect (SYS)")]
    ax.legend(handles=handles, loc="upper left", fontsize=8, frameon=False, bbox_to_anchor=(0.0, 1.02))
    heading = title or f"{node.host}: {len(node.gpus)} GPUs, {len(node.nics)} NICs"
    if node.sample:
        heading += f"  (bundled sample {node.sample!r}, not this machine)"
    ax.set_title(heading, fontsize=11)
    ax.set_xlim(min(xs) - 1.0, max(xs) + 1.0)
    ax.set_ylim(-0.7, 5.4)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def _flat(g: nx.Graph) -> nx.Graph:
    """GraphML/DOT carry scalars only: lists and dicts become JSON strings, None is dropped."""
    out = nx.Graph()

    def conv(attrs: dict[str, Any]) -> dict[str, Any]:
        res = {}
        for k, v in attrs.items():
            if v is None:
                continue
            res[k] = json.dumps(v) if isinstance(v, (list, dict, tuple)) else v
        return res

    for n, d in g.nodes(data=True):
        out.add_node(n, **conv(d))
    for u, v, d in g.edges(data=True):
        out.add_edge(u, v, **conv(d))
    return out


def write_graphml(node: NodeTopology, path: Path | str) -> None:
    nx.write_graphml(_flat(node.graph), str(path))


def write_dot(node: NodeTopology, path: Path | str) -> None:
    """Graphviz DOT, written directly (no pygraphviz needed)."""
    g = _flat(node.graph)

    def q(s: Any) -> str:
        return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"graph {q(node.host)} {{", "  node [shape=box, style=filled, fontname=Helvetica];"]
    for n, d in g.nodes(data=True):
        face = _STYLE.get(str(d.get("kind")), ("#ffffff", "#000000"))[0]
        attrs = ", ".join(f"{'nic_label' if k == 'label' else k}={q(v)}" for k, v in d.items())
        lines.append(f"  {q(n)} [fillcolor={q(face)}, {attrs}];")
    for u, v, d in g.edges(data=True):
        label = d.get("kind", "")
        if d.get("bw_gbps") is not None:
            label += f" {d['bw_gbps']:g} GB/s"
        attrs = ", ".join(f"{k}={q(val)}" for k, val in d.items())
        lines.append(f"  {q(u)} -- {q(v)} [label={q(label)}, {attrs}];")
    lines.append("}")
    Path(path).write_text("\n".join(lines) + "\n")
