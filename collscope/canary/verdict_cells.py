"""From a canary frame to what the verdict computes on: per side, one median time per (op, nranks, size) and
block, the blocks that measured everything on both sides, and the workload as weights on measured sizes.

* A cell is the median of its block's records for that side, (op, nranks, size): nccl-tests writes an
  out-of-place and an in-place record per size and repeat; the out-of-place ones are used when present (the
  in-place number is a second, correlated reading of the same run), else all.
* A key (op, nranks, size) counts as measured when each side has it in more than half of its blocks; a block
  is complete when both sides (interleaved) or its side (not interleaved) have every measured key.
* A workload entry's time is interpolated linearly in log2(size) between the two nearest measured sizes (as
  :mod:`collscope.analysis.recommend.timing` does), so a workload is a weight per measured key and a side's
  time per step in a block is a dot product. An op or size the measurements do not cover is refused
  (ConfigError naming the entry and the option that would cover it), never extrapolated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from collscope.analysis.recommend.workload import Workload, per_measured_size
from collscope.errors import ConfigError
from collscope.units import format_size

__all__ = ["Key", "Cells", "USED_COLUMNS", "read_cells", "workload_weights"]

Key = tuple[str, int, int]
"""(op, nranks, size_bytes)."""
USED_COLUMNS = ("op", "size_bytes", "time_us", "busbw_gbps", "in_place", "nranks", "side", "block")
_CELL = ["op", "nranks", "size_bytes", "side", "block"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cells:
    keys: tuple[Key, ...]
    """The measured keys, sorted (op, nranks, size)."""
    time_us: Mapping[str, np.ndarray]
    """Side -> median time, one row per complete block of that side (in block order), one column per key."""
    busbw_gbps: Mapping[str, np.ndarray]
    blocks: Mapping[str, tuple[int, ...]]
    """Side -> the complete blocks, in order (paired: the same for both sides)."""
    dropped: tuple[str, ...]
    """One phrase per block left out and why."""
    ops: Mapping[str, frozenset[tuple[str, int]]]
    """Side -> the (op, nranks) it measured at all."""


def _clean(frame: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in USED_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(f"the canary frame lacks the column(s) {', '.join(missing)} "
                          f"(expected at least: {', '.join(USED_COLUMNS)})")
    if frame.empty:
        raise ConfigError("the canary frame has no records: nothing was measured on either side")
    df = pd.DataFrame({
        "op": frame["op"].astype(str).to_numpy(), "nranks": frame["nranks"].astype("int64").to_numpy(),
        "size_bytes": frame["size_bytes"].astype("int64").to_numpy(), "side": frame["side"].astype(str).to_numpy(),
        "block": frame["block"].astype("int64").to_numpy(),
        "time_us": frame["time_us"].astype(float).to_numpy(),
        "busbw_gbps": frame["busbw_gbps"].astype(float).to_numpy(),
        "oop": ~frame["in_place"].astype("boolean").fillna(False).to_numpy(dtype=bool)})
    bad = sorted(set(df["side"]) - {"A", "B"})
    if bad:
        raise ConfigError(f"the canary frame's side column holds {', '.join(map(repr, bad))}; expected 'A' or 'B'")
    for side in ("A", "B"):
        if not (df["side"] == side).any():
            raise ConfigError(f"side {side} has no records: both sides must be measured to judge a change")
    df = df[np.isfinite(df["time_us"]) & (df["time_us"] > 0)]
    has_oop = df.groupby(_CELL, sort=False)["oop"].transform("max")
    return df[df["oop"] | ~has_oop]


def _wide(med: pd.DataFrame, side: str, what: str) -> pd.DataFrame:
    """Block x (op, nranks, size) table of one side's medians."""
    series = med[what].xs(side, level="side")
    return series.unstack(["op", "nranks", "size_bytes"])


def read_cells(frame: pd.DataFrame, *, paired: bool) -> Cells:
    """The medians per cell, restricted to measured keys and complete blocks (module docstring)."""
    df = _clean(frame)
    med = df.groupby(_CELL, sort=True)[["time_us", "busbw_gbps"]].median()
    ops = {str(s): frozenset(zip(g["op"], g["nranks"], strict=True)) for s, g in df.groupby("side")}
    time = {s: _wide(med, s, "time_us") for s in ("A", "B")}
    keys: list[Any] = [k for k in sorted(set(time["A"].columns) & set(time["B"].columns))
            if all(time[s][k].notna().sum() * 2 > len(time[s]) for s in ("A", "B"))]
    columns = pd.MultiIndex.from_tuples(keys, names=["op", "nranks", "size_bytes"]) if keys else None
    blocks: dict[str, list[int]] = {}
    for s in ("A", "B"):
        present = time[s].reindex(columns=columns).notna().all(axis=1) if keys else time[s].index.isna()
        blocks[s] = [int(b) for b, ok in zip(time[s].index, present, strict=True) if ok]
    dropped: list[str] = []
    if paired:
        both = sorted(set(blocks["A"]) & set(blocks["B"]))
        for b in sorted({int(x) for s in ("A", "B") for x in time[s].index}):
            if b not in both:
                lacks = [s for s in ("A", "B") if b not in blocks[s]]
                dropped.append(f"block {b} (side {' and '.join(lacks)} did not measure every size)")
        blocks = {"A": both, "B": both}
    else:
        dropped += [f"run {int(b)} of side {s} (did not measure every size)"
                    for s in ("A", "B") for b in time[s].index if int(b) not in blocks[s]]

    def pick(side: str, what: str) -> np.ndarray:
        if not keys:
            return np.empty((len(blocks[side]), 0))
        table = _wide(med, side, what).reindex(columns=columns)
        return table.loc[blocks[side]].to_numpy(dtype=float)

    return Cells(keys=tuple((str(o), int(n), int(z)) for o, n, z in keys),
                 time_us={s: pick(s, "time_us") for s in ("A", "B")},
                 busbw_gbps={s: pick(s, "busbw_gbps") for s in ("A", "B")},
                 blocks={s: tuple(blocks[s]) for s in ("A", "B")}, dropped=tuple(dropped),
                 ops={s: ops.get(s, frozenset()) for s in ("A", "B")})


def _sizes_of(keys: tuple[Key, ...]) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for op, nranks, size in keys:
        out.setdefault((op, nranks), []).append(size)
    return out


def workload_weights(cells: Cells, workload: Workload | None) -> tuple[np.ndarray, Workload]:
    """Calls per step attributed to each measured key (one weight per column of ``cells``), and the workload
    used (``per_measured_size`` without one). ConfigError when an entry is not covered by both sides."""
    sizes = _sizes_of(cells.keys)
    if workload is None:
        workload = per_measured_size([(op, n, s) for (op, n), s in sizes.items()])
    index = {k: i for i, k in enumerate(cells.keys)}
    weights = np.zeros(len(cells.keys))
    for e in workload.entries:
        label = f"workload entry {e.op} {format_size(e.size_bytes)} x {e.calls} (nranks {e.nranks})"
        group = sizes.get((e.op, e.nranks))
        if group is None:
            lacking = [s for s in ("A", "B") if (e.op, e.nranks) not in cells.ops[s]]
            who = (f"side {' and '.join(lacking)} did not measure {e.op} with {e.nranks} ranks" if lacking
                   else f"{e.op} with {e.nranks} ranks has no size that both sides measured in most blocks")
            raise ConfigError(f"{label}: {who}; measure it on both sides (--op {e.op} --nranks {e.nranks})")
        if not group[0] <= e.size_bytes <= group[-1]:
            raise ConfigError(
                f"{label} lies outside the sizes both sides measured ({format_size(group[0])}-"
                f"{format_size(group[-1])}); rerun with --min-bytes/--max-bytes covering it (for example "
                f"--{'min' if e.size_bytes < group[0] else 'max'}-bytes {format_size(e.size_bytes)})")
        for lo, hi in zip(group, group[1:] + [group[-1]], strict=True):
            if e.size_bytes == lo:
                weights[index[(e.op, e.nranks, lo)]] += e.calls
                break
            if lo < e.size_bytes < hi:
                frac = (math.log2(e.size_bytes) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
                weights[index[(e.op, e.nranks, lo)]] += e.calls * (1.0 - frac)
                weights[index[(e.op, e.nranks, hi)]] += e.calls * frac
                break
    return weights, workload
