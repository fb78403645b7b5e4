"""Figures of a sweep: busbw vs size per configuration (with spread, model curves and the link limit),
and a heatmap of each configuration against the measured default by size, boxing per size the configuration
that beats the default beyond noise (:mod:`collscope.analysis.noise`, the rule recommend uses), else the default.

Pure functions from DataFrames to matplotlib Figures; :mod:`collscope.analysis.report` saves them.
Bandwidths are decimal GB/s (nccl-tests' busbw); sizes are bytes on a log2 axis.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from collscope.analysis.noise import Sample, beyond_noise  # noqa: E402
from collscope.figure_text import plain_text  # noqa: E402
from collscope.units import format_size  # noqa: E402

__all__ = ["busbw_vs_size", "gain_heatmap", "size_ticks"]


def size_ticks(ax: Any, sizes: np.ndarray) -> None:
    """A log2 size axis with a tick every 4x over the positive sizes (size 0 has no place on it: the aggregate
    leaves size-0 records out, :mod:`collscope.analysis.size_zero`)."""
    ax.set_xscale("log", base=2)
    sizes = np.asarray(sizes, dtype=float)
    sizes = sizes[np.isfinite(sizes) & (sizes > 0)]
    if not len(sizes):
        return
    lo, hi = float(np.min(sizes)), float(np.max(sizes))
    ticks = [2.0**k for k in range(int(np.floor(np.log2(lo))), int(np.ceil(np.log2(hi))) + 1, 2)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([format_size(int(t)) for t in ticks], rotation=45, fontsize=7)


@plain_text
def busbw_vs_size(agg: pd.DataFrame, op: str, *, models: Mapping[str, pd.DataFrame] | None = None,
                  link_limit_gbps: float | None = None, title: str | None = None) -> Figure:
    """Median busbw per configuration of ``op`` (``agg`` from fit.aggregate), min-max band over repeats.

    ``models``: label -> DataFrame(size_bytes, busbw_gbps) drawn dashed; ``link_limit_gbps``: a horizontal line.
    """
    part = agg[(agg["op"] == op) & (agg["n"] > 0)]
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    for config, cell in part.groupby("config", observed=True, sort=True):
        cell = cell.sort_values("size_bytes")
        x = cell["size_bytes"].to_numpy(dtype=float)
        label = "default (nothing forced)" if config == "default" else str(config)
        (line,) = ax.plot(x, cell["busbw_gbps"], marker="o", ms=3, lw=2.2 if config == "default" else 1.4,
                          label=_short(label), color="black" if config == "default" else None)
        ax.fill_between(x, cell["busbw_min_gbps"], cell["busbw_max_gbps"], color=line.get_color(), alpha=0.15)
    for label, curve in (models or {}).items():
        ax.plot(curve["size_bytes"], curve["busbw_gbps"], ls="--", lw=1, label=f"model: {label}")
    if link_limit_gbps:
        ax.axhline(link_limit_gbps, color="#b03030", ls=":", lw=1.2, label=f"link limit {link_limit_gbps:g} GB/s")
    if len(part):
        size_ticks(ax, part["size_bytes"].to_numpy(dtype=float))
    if (part["busbw_gbps"] > 0).any():  # busbw 0 everywhere (one rank: factor 0) has no place on a log axis
        ax.set_yscale("log")
        # plain numbers (0.01, 1, 10): the log axis's default labels are math text, which plain_text turns off
        # (they showed as "$\\mathdefault{10^{1}}$")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("message size (bytes, nccl-tests 'size')")
    ax.set_ylabel("bus bandwidth (GB/s, decimal)")
    ax.set_title(title or f"{op}: busbw by size")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def _boxed_rows(part: pd.DataFrame, ratio: pd.DataFrame, min_gain: float) -> list[int]:
    """Per size (column of ``ratio``): the row of the best config beating the default beyond noise, else the default."""
    cells: dict[str, dict[int, Sample]] = {}
    for row in part.to_dict(orient="records"):
        cells.setdefault(str(row["config"]), {})[int(row["size_bytes"])] = Sample(
            median_gbps=float(row["busbw_gbps"]), min_gbps=float(row["busbw_min_gbps"]),
            max_gbps=float(row["busbw_max_gbps"]), repeats=int(row["n"]))
    sizes = [int(s) for s in ratio.columns]
    base = cells.get("default", {})
    beats = {c: beyond_noise([(by_size.get(s), base.get(s)) for s in sizes], min_gain)
             for c, by_size in cells.items() if c != "default"}
    rows = list(ratio.index)
    out = []
    for col, size in enumerate(sizes):
        winners = [c for c, flags in beats.items() if flags[col]]
        best = max(winners, key=lambda c: (cells[c][size].median_gbps, c), default="default")
        out.append(rows.index(best))
    return out


@plain_text
def gain_heatmap(agg: pd.DataFrame, op: str, *, min_gain: float = 0.03) -> Figure:
    """Configurations x sizes: median busbw relative to the default (1.0 = same); boxed per size: the best config
    that beats the default beyond noise (gain > ``min_gain`` and > the combined spread, >= 3 repeats, >= 2
    adjacent sizes), else the default."""
    part = agg[(agg["op"] == op) & (agg["n"] > 0)]
    table = part.pivot_table(index="config", columns="size_bytes", values="busbw_gbps", aggfunc="median",
                             observed=True)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.32 * table.shape[1] + 3), 0.5 * max(len(table), 2) + 1.8), dpi=110)
    if "default" not in table.index or table.empty:
        ax.text(0.5, 0.5, "the default was not measured: no baseline", ha="center", va="center")
        ax.axis("off")
        return fig
    ratio = table / table.loc["default"]
    image = ax.imshow(ratio.to_numpy(dtype=float), cmap="RdYlGn", vmin=0.5, vmax=1.5, aspect="auto")
    ax.set_yticks(range(len(ratio.index)))
    ax.set_yticklabels([_short(str(c)) for c in ratio.index], fontsize=7)
    ax.set_xticks(range(len(ratio.columns)))
    ax.set_xticklabels([format_size(int(s)) for s in ratio.columns], rotation=90, fontsize=6)
    for col, row in enumerate(_boxed_rows(part, ratio, min_gain)):
        ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, lw=1.5, ec="black"))
    fig.colorbar(image, ax=ax, label="busbw / default busbw (median)")
    ax.set_title(f"{op}: each configuration against the default (box: best beyond noise per size)", fontsize=9)
    fig.tight_layout()
    return fig


def _short(config: str) -> str:
    return (config.replace("OMPI_MCA_coll_tuned_", "ompi:").replace("_algorithm", "_alg")
            .replace("NCCL_", ""))[:60]
