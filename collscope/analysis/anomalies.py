"""The anomalies :func:`.compare.analyze` reports, one check per kind (the module doc of :mod:`.compare` lists them
with their rules): along each configuration's curve (``dip``, ``non_monotone``, ``excess_time``), per configuration x
size cell (``spread``, ``wrong_values``, ``above_link_limit``, ``not_applied``, ``failure``) and for points that failed
without records."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any, Literal, cast

import pandas as pd

from collscope.analysis.analyze_options import AnalyzeOptions
from collscope.analysis.bounds import excess_time_us
from collscope.analysis.crossovers import sample
from collscope.analysis.fit import CONFIG_KEYS
from collscope.analysis.formats import num_text, size_text
from collscope.analysis.noise import MIN_REPEATS, cell_verdict, relative_spread
from collscope.vocab.ops import busbw_factor

__all__ = ["AnomalyKind", "Anomaly", "EXCESS_TIME_MIN_BOUND_SHARE", "curve_anomalies", "excess_time_anomalies",
           "cell_anomalies", "lost_points"]

AnomalyKind = Literal["dip", "non_monotone", "excess_time", "spread", "wrong_values", "not_applied", "failure",
                      "above_link_limit"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Anomaly:
    kind: AnomalyKind
    op: str
    config: str
    size_bytes: int | None
    detail: str
    backend: str | None = None
    nranks: int | None = None
    nnodes: int | None = None
    in_place: bool | None = None
    input: str | None = None
    """The input (results directory or file) the configuration's records were read from."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], frame.to_dict(orient="records"))


def curve_anomalies(key: dict[str, Any], cell: pd.DataFrame, opts: AnalyzeOptions) -> list[Anomaly]:
    """Dips and non-monotone curves, each claimed only beyond noise: the higher cell must beat the lower one by
    more than the threshold and than their combined spread, with >= 3 repeats each (the noise rule at one size;
    a dip is one size by definition)."""
    out: list[Anomaly] = []
    rows = [r for r in _rows(cell) if math.isfinite(float(r["busbw_gbps"]))]
    s = [int(r["size_bytes"]) for r in rows]
    b = [float(r["busbw_gbps"]) for r in rows]
    cells = [sample(r) for r in rows]

    def above(hi: int, lo: int, threshold: float) -> bool:
        # "hi beats lo by more than threshold", as a busbw ratio: b[lo] < (1 - threshold) * b[hi]
        return cell_verdict(cells[hi], cells[lo], 1 / (1 - threshold) - 1) == "beats"

    dips = set()
    for i in range(1, len(b) - 1):
        lower = min(b[i - 1], b[i + 1])
        if above(i - 1, i, opts.dip_threshold) and above(i + 1, i, opts.dip_threshold):
            dips.add(i)
            out.append(_anomaly("dip", key, s[i], f"busbw {num_text(b[i])} GB/s, neighbours {num_text(b[i - 1])} and "
                                f"{num_text(b[i + 1])} GB/s ({b[i] / lower - 1:+.0%})"))
    best = -math.inf
    best_i = -1
    for i in range(len(b)):
        if i in dips:
            continue
        if best_i >= 0 and best > 0 and above(best_i, i, opts.drop_threshold):
            below = sum(1 for j in range(i, len(b)) if j not in dips and b[j] < (1 - opts.drop_threshold) * best)
            out.append(_anomaly("non_monotone", key, s[i],
                                f"busbw falls from {num_text(best)} GB/s at {size_text(s[best_i])} to "
                                f"{num_text(b[i])} GB/s "
                                f"({b[i] / best - 1:+.0%}); {below} size(s) from here stay below"))
            break
        if b[i] > best:
            best, best_i = b[i], i
    return out


EXCESS_TIME_MIN_BOUND_SHARE = 0.5
"""``excess_time`` is claimed only where the larger size reaches this share of the bound: there it moves data for
most of its time and its timer is steady; below, the latency side's jitter of a few microseconds (a shared node's
5%) against a small extra transfer would read as excess."""


def excess_time_anomalies(key: dict[str, Any], cell: pd.DataFrame, opts: AnalyzeOptions) -> list[Anomaly]:
    """Sizes that took longer than the next measured size allows at the link bound (:func:`.bounds.excess_time_us`)
    by more than ``excess_time_threshold`` of their own time: the smaller size's fastest repeat against the larger
    size's slowest, at the larger of the two sizes' bounds, where the larger size reaches
    :data:`EXCESS_TIME_MIN_BOUND_SHARE` of that bound. Needs the bounds (link parameters) and the rank count."""
    nranks = key.get("nranks")
    if nranks is None or pd.isna(nranks):
        return []
    factor = busbw_factor(str(key["op"]), int(nranks))
    rows = sorted((r for r in _rows(cell) if int(r["size_bytes"]) > 0
                   and all(math.isfinite(float(r[c])) for c in ("time_min_us", "time_max_us", "bound_busbw_gbps"))),
                  key=lambda r: int(r["size_bytes"]))
    out: list[Anomaly] = []
    for small, large in pairwise(rows):
        s, s_next = int(small["size_bytes"]), int(large["size_bytes"])
        t, t_next = float(small["time_min_us"]), float(large["time_max_us"])
        bound = max(float(small["bound_busbw_gbps"]), float(large["bound_busbw_gbps"]))
        if float(large["busbw_gbps"]) < EXCESS_TIME_MIN_BOUND_SHARE * bound:
            continue
        excess = excess_time_us(s, t, s_next, t_next, busbw_factor=factor, bound_busbw_gbps=bound)
        if excess <= opts.excess_time_threshold * t:
            continue
        binding = max((small, large), key=lambda r: float(r["bound_busbw_gbps"]))
        margin = (f"took no longer ({num_text(t_next - t)} us)" if t_next <= t else
                  f"took only {num_text(t_next - t)} us more for {size_text(s_next - s)} more: "
                  f"{num_text(factor * (s_next - s) / ((t_next - t) * 1e3))} GB/s busbw on the margin, above the "
                  f"{num_text(bound)} GB/s bound of the {binding['bound_limited_by']}")
        repeats = ("one measurement per size" if int(small["n"]) < MIN_REPEATS or int(large["n"]) < MIN_REPEATS
                   else "its fastest repeat against the slowest of the larger size")
        out.append(_anomaly("excess_time", key, s,
                            f"{num_text(t)} us holds at least {num_text(excess)} us ({excess / t:.0%}) that is not "
                            f"data movement: {size_text(s_next)} {margin} ({repeats}); a stall, a warm-up, or a "
                            f"slower algorithm chosen at {size_text(s)}"))
    return out


def _anomaly(kind: AnomalyKind, key: Mapping[str, Any], size: int | None, detail: str) -> Anomaly:
    nnodes = key.get("nnodes")
    return Anomaly(kind=kind, op=str(key["op"]), config=str(key["config"]), size_bytes=size, detail=detail,
                   backend=None if key.get("backend") is None else str(key["backend"]),
                   nranks=None if key.get("nranks") is None else int(key["nranks"]),
                   nnodes=None if nnodes is None or pd.isna(nnodes) else int(nnodes),
                   in_place=None if key.get("in_place") is None else bool(key["in_place"]),
                   input=None if key.get("input") is None or pd.isna(key["input"]) else str(key["input"]))


def cell_anomalies(sizes: pd.DataFrame, opts: AnalyzeOptions) -> list[Anomaly]:
    out: list[Anomaly] = []
    not_applied: dict[tuple[Any, ...], int] = {}
    failures: dict[tuple[Any, ...], set[str]] = {}
    for row in _rows(sizes):
        size = int(row["size_bytes"])
        n = int(row["n"])
        spread = relative_spread(sample(row))
        if n >= MIN_REPEATS and spread > opts.spread_threshold:
            out.append(_anomaly("spread", row, size, f"run-to-run spread {spread:.0%} ((max-min)/median busbw) over "
                                f"{n} repeats, time {num_text(row['time_min_us'])}..{num_text(row['time_max_us'])} us"))
        if row["n_not_ok"]:
            out.append(_anomaly("wrong_values", row, size, f"{row['n_not_ok']} of {row['n_total']} record(s) with "
                                "ok=false (wrong values or out-of-bounds)"))
        limit = float(row["bound_busbw_gbps"])
        if math.isfinite(limit) and row["busbw_gbps"] > limit * (1 + opts.link_tolerance):
            out.append(_anomaly("above_link_limit", row, size, f"busbw {num_text(row['busbw_gbps'])} GB/s above "
                                f"{num_text(limit)} GB/s, the bound of {row['bound_algo']} (set by its "
                                f"{row['bound_limited_by']}; algorithm: {row['algo_source']}), by more than the "
                                f"{opts.link_tolerance:.0%} link tolerance"))
        key = tuple(row[k] for k in CONFIG_KEYS)
        if row["n_not_applied"]:
            not_applied[key] = not_applied.get(key, 0) + int(row["n_not_applied"])
        failure = row.get("failure")
        if failure is not None and not pd.isna(failure) and failure not in ("wrong values", "setting not applied"):
            failures.setdefault(key, set()).add(str(failure))
    for key, count in not_applied.items():
        out.append(_anomaly("not_applied", dict(zip(CONFIG_KEYS, key, strict=True)), None,
                            f"a forced setting did not take effect in {count} record(s) "
                            "(points/<id>.check.json); they are left out of fits and comparisons"))
    for key, reasons in failures.items():
        out.append(_anomaly("failure", dict(zip(CONFIG_KEYS, key, strict=True)), None,
                            f"point(s) of this configuration failed: {', '.join(sorted(reasons))}"))
    return out


def lost_points(df: pd.DataFrame) -> list[Anomaly]:
    out = []
    for entry in df.attrs.get("failures", []) or []:
        key = {"op": entry.get("op") or "?", "config": entry.get("config") or "?"}
        out.append(_anomaly("failure", key, None, f"point {entry.get('point_id')} failed without records: "
                            f"{entry.get('reason')}: {entry.get('detail')}"))
    return out
