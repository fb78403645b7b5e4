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
from collscope.topo.gpus import gpu_generation
from collscope.topo.infiniband.host import port_transport
from collscope.topo.model import NodeTopology
from collscope.topo.naming import natural_key
from collscope.topo.schema import nodes_of_kind

__all__ = ["layout", "draw_figure", "draw_png", "write_graphml", "write_dot"]

_LEVEL = {"numa": 0.0, "host_bridge": 1.0, "pcie_switch": 2.0, "nic": 3.0, "gpu": 4.0, "nvswitch": 5.4}
"""Rows: a PCIe switch's NICs stand in the row below its GPUs, in the same columns, so a node is as wide as its
switches' leaf columns (10 for an HGX H100 with 12 NICs), not its GPUs plus NICs (20)."""
_COLUMN = 1.35
"""Width of one leaf column; a box is :data:`_BOX_W` wide, the rest is the lane a GPU's PCIe line takes past the
NIC below it."""
_BOX_W, _BOX_H = 1.1, 0.5
_LEAVES = ("gpu", "nic")
_FONT_PT = 9.0
_INCH_PER_UNIT = 0.78
"""Figure inches per layout unit: with :data:`_FONT_PT` this keeps labels inside their boxes and, for up to
about 14 columns (an 8-GPU node), at least 9 px high when the PNG is shown 1100 px wide (the report's page)."""
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
    """x by walking the PCIe tree left to right (a switch's GPUs and NICs share columns: GPUs in the upper row,
    NICs below them), y by node kind."""
    g = node.graph
    pos: dict[str, tuple[float, float]] = {}
    next_x = [0.0]

    def columns(leaves: list[str]) -> list[float]:
        """Place GPUs and NICs in shared columns; the columns' x."""
        gpus = [n for n in leaves if g.nodes[n]["kind"] == "gpu"]
        nics = [n for n in leaves if g.nodes[n]["kind"] == "nic"]
        xs = [next_x[0] + _COLUMN * i for i in range(max(len(gpus), len(nics)))]
        for row in (gpus, nics):
            for n, x in zip(row, xs, strict=False):
                pos[n] = (x, _LEVEL[g.nodes[n]["kind"]])
        next_x[0] += _COLUMN * len(xs)
        return xs

    def place(n: str) -> float:
        level = _LEVEL.get(g.nodes[n]["kind"], 3.0)
        kids = [k for k in _children(g, n, level) if k not in pos]
        if not kids:
            x = next_x[0]
            next_x[0] += _COLUMN
        else:
            pos[n] = (0.0, level)  # reserve, so cycles cannot re-enter
            leaves = [k for k in kids
                      if g.nodes[k]["kind"] in _LEAVES and not _children(g, k, _LEVEL[g.nodes[k]["kind"]])]
            xs = columns(leaves) if leaves else []
            xs += [place(k) for k in kids if k not in leaves and k not in pos]
            x = sum(xs) / len(xs) if xs else next_x[0]
        pos[n] = (x, level)
        return x

    for numa in nodes_of_kind(g, "numa"):
        place(numa)
        next_x[0] += 0.6 * _COLUMN
    loose = [n for n in sorted(g.nodes, key=lambda n: (g.nodes[n]["kind"] != "gpu", natural_key(n)))
             if n not in pos and g.nodes[n]["kind"] != "nvswitch"]
    columns([n for n in loose if g.nodes[n]["kind"] in _LEAVES])
    for n in loose:
        if n not in pos:
            pos[n] = (next_x[0], _LEVEL.get(g.nodes[n]["kind"], 3.0))
            next_x[0] += _COLUMN
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
        transport = port_transport(layer, rdma=d.get("rdma", True))
        extra = " ".join(x for x in (f"{rate:g}G" if rate else "",
                                     {"InfiniBand": "IB", "RoCE": "RoCE", "Ethernet": "Eth"}.get(transport or "", ""))
                         if x)
        down = ports and not any(p.get("state") == "Active" for p in ports)
        return f"{n}\n{extra}{' DOWN' if down else ''}".strip()
    if kind == "pcie_switch":
        return "PCIe sw"
    if kind == "host_bridge":
        return "host bridge"
    return n


def _lane(pos: dict[str, tuple[float, float]], u: str, v: str) -> list[tuple[float, float]] | None:
    """The route of a PCIe line from ``u`` up to ``v`` when a box stands between them in ``v``'s column (a GPU
    above its switch's NIC): along the lane left of the column, into the box's side; None for a straight line."""
    yu, (xv, yv) = pos[u][1], pos[v]
    low, high = sorted((yu, yv))
    if not any(abs(x - xv) < 1e-6 and low < y < high for n, (x, y) in pos.items() if n not in (u, v)):
        return None
    top, bottom = (v, u) if yv > yu else (u, v)
    (xt, yt), (xb, yb) = pos[top], pos[bottom]
    lane = xt - _COLUMN / 2
    return [(xb, yb + _BOX_H / 2), (lane, yb + _BOX_H / 2 + 0.3), (lane, yt), (xt - _BOX_W / 2, yt)]


@plain_text
def draw_figure(node: NodeTopology, *, title: str | None = None) -> Any:
    """A matplotlib Figure of the node (layered layout, :func:`layout`); :func:`draw_png` saves it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyBboxPatch

    g = node.graph
    pos = layout(node)
    xs = [p[0] for p in pos.values()] or [0.0]
    span = max(xs) - min(xs) + 2 * _COLUMN
    fig, ax = plt.subplots(figsize=(min(max(span, 9.0) * _INCH_PER_UNIT, 30.0), 7.4 * _INCH_PER_UNIT), dpi=110)
    multi_nvswitch = bool(nodes_of_kind(g, "nvswitch"))

    for u, v, d in g.edges(data=True):
        (x1, y1), (x2, y2) = pos[u], pos[v]
        kind = d["kind"]
        if kind == "nvlink":
            if multi_nvswitch:
                ax.plot([x1, x2], [y1, y2], color="#76b900", lw=2.2, zorder=1, alpha=0.85)
            else:
                rad = 0.25 + 0.05 * abs(x2 - x1) / _COLUMN
                ax.annotate("", xy=(x2, y2 + 0.18), xytext=(x1, y1 + 0.18),
                            arrowprops={"arrowstyle": "-", "color": "#76b900", "lw": 1.0 + 0.2 * (d.get("nlinks") or 1),
                                        "connectionstyle": f"arc3,rad=-{min(rad, 0.6):.2f}", "alpha": 0.8}, zorder=1)
        elif kind == "smp":
            ax.plot([x1, x2], [y1, y2], color="#b03030", lw=2.0, ls="--", zorder=1)
            ax.text((x1 + x2) / 2, y1 + 0.12, "SMP interconnect (SYS)", ha="center", fontsize=_FONT_PT,
                    color="#b03030")
        else:
            route = _lane(pos, u, v)
            if route:
                ax.plot([p[0] for p in route], [p[1] for p in route], color="#888888", lw=1.2, zorder=1)
            else:
                ax.plot([x1, x2], [y1, y2], color="#888888", lw=1.2, zorder=1)

    for n, (x, y) in pos.items():
        kind = g.nodes[n]["kind"]
        face, edge = _STYLE.get(kind, ("#ffffff", "#000000"))
        label = _label(g, n)
        w = _BOX_W if kind in (*_LEAVES, "pcie_switch", "host_bridge") else max(1.2, 0.12 * len(n) + 0.6)
        if kind == "nvswitch":
            gpu_xs = [pos[gg][0] for gg in node.gpus]
            w = max(w, max(gpu_xs) - min(gpu_xs) + _BOX_W) if gpu_xs else w
        ax.add_patch(FancyBboxPatch((x - w / 2, y - _BOX_H / 2), w, _BOX_H,
                                    boxstyle="round,pad=0.02,rounding_size=0.08",
                                    facecolor=face, edgecolor=edge, lw=1.2, zorder=2))
        ax.text(x, y, label, ha="center", va="center", fontsize=_FONT_PT, zorder=3, gid=f"label:{n}",
                color="white" if kind in _LEAVES else "black", fontweight="bold" if kind == "gpu" else None)

    for sw in nodes_of_kind(g, "nvswitch"):
        nl = {g.edges[gpu, sw].get("nlinks") for gpu in node.gpus if g.has_edge(gpu, sw)}
        bw = {g.edges[gpu, sw].get("bw_gbps") for gpu in node.gpus if g.has_edge(gpu, sw)}
        x, y = pos[sw]
        ax.text(x, y + 0.45, f"NVSwitch fabric: NV{'/'.join(str(v) for v in sorted(nl, key=str))} per GPU, "
                f"{'/'.join(f'{b:g}' if b else '?' for b in bw)} GB/s per direction",
                ha="center", fontsize=_FONT_PT, color="#3d6000")

    handles = [Line2D([], [], color="#76b900", lw=2.5, label="NVLink"),
               Line2D([], [], color="#888888", lw=1.2, label="PCIe (inferred)"),
               Line2D([], [], color="#b03030", lw=2, ls="--", label="SMP interconnect (SYS)")]
    ax.legend(handles=handles, loc="upper left", fontsize=_FONT_PT, frameon=False, bbox_to_anchor=(0.0, 1.02))
    heading = title or f"{node.host}: {len(node.gpus)} GPUs, {len(node.nics)} NICs"
    if node.sample:
        heading += f"  (bundled sample {node.sample!r}, not this machine)"
    ax.set_title(heading, fontsize=11)
    ax.set_xlim(min(xs) - _COLUMN, max(xs) + _COLUMN)
    ax.set_ylim(-0.7, 6.4)
    ax.axis("off")
    fig.tight_layout()
    return fig


@plain_text
def draw_png(node: NodeTopology, path: Path | str | io.BytesIO, *, title: str | None = None) -> None:
    """Write a PNG drawing of the node (:func:`draw_figure`)."""
    import matplotlib.pyplot as plt

    fig = draw_figure(node, title=title)
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
