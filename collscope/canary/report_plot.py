"""The canary report's figure of one op: both sides' busbw against size with their bands over blocks, the ranges
that lose or gain shaded, and below it B's busbw change per size against ``max_loss``.

What is drawn per side and size: the run of each block reduced to one busbw (the median of its records: nccl-tests'
out-of-place records when the run has them, else all, as the verdict reads times), then the median over blocks
(the line) and the spread over blocks (the band): min-max up to 9 blocks, the 10-90th percentile from 10 on (a
min-max band of many blocks shows the one odd run, not the spread). The legend names which.

busbw is worked out from each record's time (size / time x the op's busbw factor, :func:`collscope.vocab.ops.
busbw_factor`), not read from its ``busbw_gbps``: nccl-tests prints busbw rounded to 0.01 GB/s, so every size
below a few KiB reads 0.00 and a small-message regression (the very one of NCCL 2.28 -> 2.29) would not show.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from collscope.analysis.plots import size_ticks  # noqa: E402
from collscope.figure_text import plain_text  # noqa: E402
from collscope.vocab.ops import busbw_factor  # noqa: E402

if TYPE_CHECKING:
    from collscope.canary.verdict import RangeChange

__all__ = ["SideCurve", "side_curves", "band_name", "op_figure", "time_busbw_gbps", "PERCENTILE_FROM_BLOCKS"]

PERCENTILE_FROM_BLOCKS = 10
"""From this many blocks on, the band is the 10-90th percentile over blocks; below, min-max."""
_COLOURS = {"A": "#1f5fa8", "B": "#d0641c"}
_SHADE = {"loses": ("#d62728", 0.13), "gains": ("#2ca02c", 0.13)}


@dataclass(frozen=True)
class SideCurve:
    """One side's busbw per size of one op: median over blocks and the band's edges (decimal GB/s)."""

    size_bytes: np.ndarray
    busbw_gbps: np.ndarray
    low_gbps: np.ndarray
    high_gbps: np.ndarray
    blocks: int


def band_name(blocks: int) -> str:
    """What the band spans, as the legend says it."""
    return "10-90th percentile over blocks" if blocks >= PERCENTILE_FROM_BLOCKS else "min-max over blocks"


def time_busbw_gbps(part: pd.DataFrame) -> np.ndarray:
    """Each record's busbw from its time (decimal GB/s = bytes per microsecond / 1e3, times the op's factor)."""
    pairs = part[["op", "nranks"]].astype(str).agg("|".join, axis=1)
    factors = {key: busbw_factor(key.split("|")[0], int(key.split("|")[1])) for key in pairs.unique().tolist()}
    factor = pairs.map(factors).to_numpy(dtype=float)
    return part["size_bytes"].to_numpy(dtype=float) / part["time_us"].to_numpy(dtype=float) / 1e3 * factor


def _per_block(part: pd.DataFrame) -> pd.DataFrame:
    """One busbw per (block, size): the median of the run's out-of-place records when it has them, else of all."""
    out_of_place = part[~part["in_place"].astype(bool)]
    has_oop = out_of_place.groupby(["block", "size_bytes"]).size()
    keep = part.set_index(["block", "size_bytes"]).index.isin(has_oop.index)
    chosen = pd.concat([out_of_place, part[~keep]], ignore_index=True)
    chosen = chosen.assign(busbw_gbps=time_busbw_gbps(chosen))
    return chosen.groupby(["block", "size_bytes"], as_index=False)["busbw_gbps"].median()


def side_curves(frame: pd.DataFrame, op: str) -> dict[str, SideCurve]:
    """Per side ("A", "B") that measured ``op``: its curve (module docstring)."""
    curves = {}
    part = frame[frame["op"].astype(str) == op]
    for side, rows in part.groupby(part["side"].astype(str)):
        blocks = _per_block(rows)
        n = int(blocks["block"].nunique())
        q = (0.1, 0.9) if n >= PERCENTILE_FROM_BLOCKS else (0.0, 1.0)
        by_size = blocks.groupby("size_bytes")["busbw_gbps"]
        stats = pd.DataFrame({"median": by_size.median(), "low": by_size.quantile(q[0]),
                              "high": by_size.quantile(q[1])}).sort_index()
        curves[str(side)] = SideCurve(stats.index.to_numpy(dtype=float), stats["median"].to_numpy(dtype=float),
                                      stats["low"].to_numpy(dtype=float), stats["high"].to_numpy(dtype=float), n)
    return curves


def _edges(sizes: Sequence[float], low: int, high: int) -> tuple[float, float]:
    """The x span of sizes ``low..high`` (bytes) on a log axis: halfway (geometrically) to the neighbours."""
    s = [float(v) for v in sizes]
    i, j = s.index(float(low)) if float(low) in s else 0, s.index(float(high)) if float(high) in s else len(s) - 1
    step_lo = s[i] / s[i - 1] if i > 0 else (s[1] / s[0] if len(s) > 1 else 2.0)
    step_hi = s[j + 1] / s[j] if j + 1 < len(s) else (s[-1] / s[-2] if len(s) > 1 else 2.0)
    return s[i] / math.sqrt(step_lo), s[j] * math.sqrt(step_hi)


def _busbw_axis(ax: Any, values: Sequence[np.ndarray]) -> None:
    """Log busbw axis when the positive values span a decade or more (ticks at 1, 2, 5 x 10^k, plain numbers:
    the default labels are math text, which plain_text turns off); linear otherwise, where a log axis would
    show no tick at all."""
    positive = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in values]) if values else np.empty(0)
    if not len(positive) or positive.max() / positive.min() < 10:
        return
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


@plain_text
def op_figure(op: str, curves: Mapping[str, SideCurve], ranges: Sequence[RangeChange], labels: Mapping[str, str],
              max_loss: float) -> Figure:
    """The figure of one op (module docstring); ``labels``: each side's name in the legend."""
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8.5, 6.4), dpi=110, sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1.3]})
    sizes = sorted({float(s) for c in curves.values() for s in c.size_bytes})
    for side in ("A", "B"):
        c = curves.get(side)
        if c is None:
            continue
        name = labels.get(side, side)
        (line,) = ax.plot(c.size_bytes, c.busbw_gbps, marker="o", ms=3, lw=1.8, color=_COLOURS[side],
                          label=f"{side}: {name} (median of {c.blocks} block{'s' if c.blocks != 1 else ''})")
        ax.fill_between(c.size_bytes, c.low_gbps, c.high_gbps, color=line.get_color(), alpha=0.2, lw=0,
                        label=f"{side}: {band_name(c.blocks)}")
    shaded: set[str] = set()
    for r in ranges:
        if r.op != op or r.verdict not in _SHADE or not sizes:
            continue
        colour, alpha = _SHADE[r.verdict]
        left, right = _edges(sizes, r.min_bytes, r.max_bytes)
        label = f"B {r.verdict} beyond noise" if r.verdict not in shaded else None
        shaded.add(r.verdict)
        for axis in (ax, ax2):
            axis.axvspan(left, right, color=colour, alpha=alpha, lw=0, label=label if axis is ax else None)
    if "A" in curves and "B" in curves:
        a, b = curves["A"], curves["B"]
        common, ia, ib = np.intersect1d(a.size_bytes, b.size_bytes, return_indices=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            change = 100.0 * (b.busbw_gbps[ib] / a.busbw_gbps[ia] - 1.0)
        ax2.plot(common, change, marker="o", ms=3, color="#444", lw=1.2, label="B vs A busbw (medians)")
        ax2.axhline(0.0, color="#888", lw=0.8)
        ax2.axhline(-100.0 * max_loss, color="#d62728", ls=":", lw=1.0, label=f"-max loss ({max_loss:.1%})")
        ax2.legend(fontsize=7, loc="best")
    ax2.set_ylabel("B vs A busbw (%)", fontsize=8)
    if sizes:
        size_ticks(ax2, np.asarray(sizes))
    _busbw_axis(ax, [c.busbw_gbps for c in curves.values()])
    ax.set_ylabel("bus bandwidth (GB/s, decimal)")
    ax2.set_xlabel("message size (bytes, nccl-tests 'size')")
    ax.set_title(f"{op}: busbw of A and B")
    ax.grid(True, which="major", alpha=0.3)
    ax2.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig

