"""Figures of a sweep: busbw vs size per configuration (with spread, model curves and the link limit),
and a heatmap of each configuration against the measured default by size, boxing per size the configuration
that beats the default beyond noise (:mod:`collscope.analysis.noise`, the rule recommend uses), else the default.

Pure functions from DataFrames to matplotlib Figures; :mod:`collscope.analysis.report` saves them.
Bandwidths are decimal GB/s (nccl-tests' busbw); sizes are bytes on a log2 axis.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from collscope.analysis.fit import CONFIG_KEYS  # noqa: E402
from collscope.analysis.noise import Sample, beyond_noise  # noqa: E402
from collscope.figure_text import plain_text  # noqa: E402
from collscope.units import format_size  # noqa: E402
from collscope.vocab.configs import DEFAULT_CONFIG  # noqa: E402

__all__ = ["busbw_vs_size", "gain_heatmap", "size_ticks", "line_labels"]


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
    part = line_labels(agg[(agg["op"] == op) & (agg["n"] > 0)])
    one_group = part["group"].nunique() <= 1
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    for series, cell in part.groupby("series", observed=True, sort=True):
        cell = cell.sort_values("size_bytes")
        x = cell["size_bytes"].to_numpy(dtype=float)
        is_default = cell["config"].iloc[0] == DEFAULT_CONFIG
        label = str(series).replace(DEFAULT_CONFIG, "default (nothing forced)", 1) if is_default else str(series)
        (line,) = ax.plot(x, cell["busbw_gbps"], marker="o", ms=3, lw=2.2 if is_default else 1.4,
                          label=_short(label), color="black" if is_default and one_group else None)
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


_GROUP_KEYS = tuple(k for k in CONFIG_KEYS if k not in ("op", "config"))
"""What else names a configuration (:data:`~.fit.CONFIG_KEYS`): rows that differ in one of these are separate
lines, each compared with the default of its own group (a sweep and a check run, 8 and 16 ranks)."""


def _group_text(row: Mapping[str, Any], keys: list[str]) -> str:
    words = {"nranks": lambda v: f"{int(v)}r", "nnodes": lambda v: "?n" if pd.isna(v) else f"{int(v)}n",
             "in_place": lambda v: "in-place" if v else "out-of-place",
             "input": lambda v: "?" if v is None or pd.isna(v) else Path(str(v)).name}
    return " ".join(words.get(k, str)(row[k]) for k in keys)


def line_labels(part: pd.DataFrame) -> pd.DataFrame:
    """``part`` with ``group`` (the keys of :data:`_GROUP_KEYS` that vary in ``part``, as text; "" when none
    does) and ``series`` (the configuration, with its group in brackets when there are several groups)."""
    varying = [k for k in _GROUP_KEYS if k in part and part[k].astype(str).nunique() > 1]
    if not varying or part.empty:
        return part.assign(group="", series=part["config"].astype(str))
    group = pd.Series([_group_text(r, varying) for r in part[varying].to_dict(orient="records")], index=part.index)
    return part.assign(group=group, series=part["config"].astype(str) + " [" + group + "]")


def _boxed_cells(part: pd.DataFrame, ratio: pd.DataFrame, min_gain: float) -> list[tuple[int, int]]:
    """(column, row) of ``ratio`` per size and group: the best series beating its group's default beyond noise,
    else that default."""
    out: list[tuple[int, int]] = []
    rows = list(ratio.index)
    sizes = [int(s) for s in ratio.columns]
    for _group, members in part.groupby("group", sort=True):
        cells: dict[str, dict[int, Sample]] = {}
        defaults = [str(s) for s in members.loc[members["config"] == DEFAULT_CONFIG, "series"].unique()]
        if not defaults:
            continue
        for row in members.to_dict(orient="records"):
            cells.setdefault(str(row["series"]), {})[int(row["size_bytes"])] = Sample(
                median_gbps=float(row["busbw_gbps"]), min_gbps=float(row["busbw_min_gbps"]),
                max_gbps=float(row["busbw_max_gbps"]), repeats=int(row["n"]))
        base_name = defaults[0]
        base = cells[base_name]
        beats = {c: beyond_noise([(by_size.get(s), base.get(s)) for s in sizes], min_gain)
                 for c, by_size in cells.items() if c != base_name}
        for col, size in enumerate(sizes):
            winners = [c for c, flags in beats.items() if flags[col]]
            best = max(winners, key=lambda c: (cells[c][size].median_gbps, c), default=base_name)
            if size in cells[best]:
                out.append((col, rows.index(best)))
    return out


@plain_text
def gain_heatmap(agg: pd.DataFrame, op: str, *, min_gain: float = 0.03) -> Figure:
    """Configurations x sizes: median busbw relative to the default (1.0 = same); boxed per size: the best config
    that beats the default beyond noise (gain > ``min_gain`` and > the combined spread, >= 3 repeats, >= 2
    adjacent sizes), else the default."""
    part = line_labels(agg[(agg["op"] == op) & (agg["n"] > 0)])
    table = part.pivot_table(index="series", columns="size_bytes", values="busbw_gbps", aggfunc="median",
                             observed=True)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.32 * table.shape[1] + 3), 0.5 * max(len(table), 2) + 1.8), dpi=110)
    baseline = {str(r["series"]): r["group"] for r in part[["series", "group"]].drop_duplicates().to_dict("records")}
    default_of = {g: str(s) for s, g in baseline.items() if s in set(part.loc[part["config"] == DEFAULT_CONFIG,
                                                                               "series"].astype(str))}
    if table.empty or not default_of:
        ax.text(0.5, 0.5, "the default was not measured: no baseline", ha="center", va="center")
        ax.axis("off")
        return fig
    ratio = pd.DataFrame([table.loc[s] / table.loc[default_of[g]] if g in default_of else table.loc[s] * np.nan
                          for s, g in ((str(s), baseline[str(s)]) for s in table.index)], index=table.index)
    image = ax.imshow(ratio.to_numpy(dtype=float), cmap="RdYlGn", vmin=0.5, vmax=1.5, aspect="auto")
    ax.set_yticks(range(len(ratio.index)))
    ax.set_yticklabels([_short(str(c)) for c in ratio.index], fontsize=7)
    ax.set_xticks(range(len(ratio.columns)))
    ax.set_xticklabels([format_size(int(s)) for s in ratio.columns], rotation=90, fontsize=6)
    for col, row in _boxed_cells(part, ratio, min_gain):
        ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, lw=1.5, ec="black"))
    fig.colorbar(image, ax=ax, label="busbw / default busbw (median)")
    ax.set_title(f"{op}: each configuration against the default (box: best beyond noise per size)", fontsize=9)
    fig.tight_layout()
    return fig


def _short(config: str) -> str:
    return (config.replace("OMPI_MCA_coll_tuned_", "ompi:").replace("_algorithm", "_alg")
            .replace("NCCL_", ""))[:60]
