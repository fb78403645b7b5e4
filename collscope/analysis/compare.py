"""``analyze``: measured curves next to the models, half-peak sizes, crossovers between configurations, anomalies.

Per configuration (:data:`~.fit.CONFIG_KEYS`) and size, from :func:`~.fit.aggregate`:

* **efficiency** = measured median busbw / the busbw of the model of the algorithm that ran, with a ``verdict``
  per size (normal / low / suspicious) and that algorithm's own bound (:mod:`.efficiency`, :mod:`.bounds`).
  For NCCL: NCCL's cost model of the (algorithm, protocol) NCCL's log names for that size, else the forced
  one, else collscope's model of NCCL's choice (``algo_source`` says which). For Open MPI (and NCCL without a GPU
  generation) the alpha-beta model (:mod:`.models`) of the forced algorithm, for an Open MPI default the fastest
  at that size. The models need :class:`~.model_types.LinkParams` (``params``); without them efficiency is NA and a
  note says so.
* **n_1/2**: the size where the busbw curve first reaches half of its peak, interpolated linearly in busbw
  against log2(size) (None when the smallest size already reaches it). The fit's ``n_half_bytes`` is the
  model's alpha / beta.
* **crossovers**: per (backend, op, nranks, nnodes, in_place), the sizes where the leading configuration
  changes **beyond noise** (:mod:`.noise`, the rule recommend uses): at the first size measured by two or more
  configurations the leader is the default (else the highest median), unless some configuration beats it there
  beyond noise; another configuration takes over at a size only where it beats the leader beyond noise
  (>= 3 repeats on both sides, gain > ``min_gain`` and > the combined spread, over >= 2 adjacent measured
  sizes). A best median that changes within noise is no crossover.
* **anomalies** ``{kind, op, config, size_bytes, detail}`` (plus backend, nranks, nnodes, in_place):
  ``dip`` (busbw below both neighbours by more than ``dip_threshold``), ``non_monotone`` (busbw falls more than
  ``drop_threshold`` below the best of the smaller sizes, dips aside; once per configuration), both only beyond
  noise (the noise rule at one size: >= 3 repeats each side, the fall larger than the combined spread),
  ``excess_time`` (a size slower than the next measured size allows at the link bound, by more than
  ``excess_time_threshold`` of its time, fastest repeat against slowest: physically impossible as data movement,
  so claimed from one measurement per size too, like ``above_link_limit``), ``spread``
  (run-to-run spread above ``spread_threshold``, measured as the noise rule measures it: (max - min) / median
  busbw, for cells with the rule's >= 3 repeats; fewer repeats: a note, no claim),
  ``wrong_values`` (records with ok false), ``not_applied`` (a forced setting that did not take effect),
  ``failure`` (failed points, with or without records), ``above_link_limit`` (busbw above the bound of the
  algorithm that ran by more than ``link_tolerance``; the ring's NIC bound is no limit for Tree/NVLS/NVLSTree/
  CollNet, which move less across the NICs).
* **host_differences**: configurations measured on other hosts than the ones they are compared with
  (:mod:`.placement`): their differences are node differences, and each crossover between two of them says so.
* **sources**: a configuration read from two inputs (``input``, part of :data:`~.fit.CONFIG_KEYS`: a sweep and a
  check run are never pooled) held side by side with the noise rule (:mod:`.sources`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from typing import Any, Literal, cast

import numpy as np
import pandas as pd

from collscope.analysis.bounds import excess_time_us
from collscope.analysis.crossovers import Crossover, find_crossovers, sample
from collscope.analysis.efficiency import Logged, Margins, ParamsSource, add_expected, model_name
from collscope.analysis.fit import CONFIG_KEYS, aggregate, fit_alpha_beta
from collscope.analysis.formats import num_text, size_text
from collscope.analysis.job_geometry import GroupGeometry, host_backends
from collscope.analysis.load import RECORD_COLUMNS
from collscope.analysis.noise import MIN_REPEATS, cell_verdict, relative_spread
from collscope.analysis.placement import (
    COMPARED_KEYS,
    ConfigHosts,
    HostMismatch,
    config_hosts,
    host_mismatches,
    mismatch_for,
)
from collscope.analysis.size_zero import size_zero_note
from collscope.analysis.sources import SourceComparison, compare_sources
from collscope.errors import ConfigError
from collscope.vocab.ops import busbw_factor

__all__ = ["analyze", "Analysis", "AnalyzeOptions", "Anomaly", "Crossover", "AnomalyKind", "ParamsSource",
           "model_name"]

AnomalyKind = Literal["dip", "non_monotone", "excess_time", "spread", "wrong_values", "not_applied", "failure",
                      "above_link_limit"]
_NOT_KNOBS = frozenset({*RECORD_COLUMNS, "settings", "config", "applied", "failure", "input"})


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyzeOptions:
    """Thresholds of the anomaly checks (fractions, 0.1 = 10%)."""

    dip_threshold: float = 0.2
    """A size whose busbw is below both neighbours by more than this is a dip."""
    drop_threshold: float = 0.2
    """A curve that falls more than this below the best busbw of smaller sizes is non-monotone."""
    excess_time_threshold: float = 0.10
    """A size whose time holds more than this fraction of time that the next larger size shows is not data movement
    (:func:`.bounds.excess_time_us`, at the link bound of the algorithms that ran) is ``excess_time``. Its fastest
    repeat is held against the larger size's slowest, so run-to-run spread only weakens the claim; 10% is the
    run-to-run spread that is itself reported, so a single measurement per size is not flagged for less."""
    spread_threshold: float = 0.10
    """Run-to-run spread above this is reported."""
    link_tolerance: float = 0.05
    """busbw above the bound of the algorithm that ran (:mod:`.bounds`) by more than this is ``above_link_limit``
    (and ``suspicious``). The bound is bytes on the busiest link over its data rate: 5% covers the rates' rounding
    (NVLink 25 GB/s per link, NIC 400 Gb/s = 50 GB/s) and the timer."""
    nccl_model_error: float = 0.15
    """The error margin of NCCL's cost model as collscope computes it: a busbw more than this above (below) the
    model is ``suspicious`` (``low``). 15% is one step of the per-channel speed list NCCL's topology search walks
    (sm90: 40 -> 45 -> 48 GB/s across nodes is 6-12%, 50 -> 60 inside a node 20%): which step NCCL lands on is
    what collscope's approximation of that search (:mod:`.nccl_model.search`) can get wrong, and the model's
    tables are NCCL's tuning heuristic, not a calibrated predictor."""
    published_margins: bool = True
    """Widen ``nccl_model_error``, per size band and scope, to how far published healthy systems fall from NCCL's
    model there (:mod:`.model_accuracy`, from bench/scorecard: the 10th and 90th percentile of published / model,
    in bands of at least 20 published figures); never narrower than ``nccl_model_error``. False: the flat margin."""
    alpha_beta_error: float = 0.10
    """The margin of the alpha-beta models: their bandwidth term is the links' data rate, which a collective
    cannot beat; 10% covers the latency constants (NCCL's hwLatencies, not measured here) and timer noise."""
    min_gain: float = 0.03
    """A crossover needs the new leader to beat the old one by more than this (and than the noise)."""

    def __post_init__(self) -> None:
        for name in ("dip_threshold", "drop_threshold", "excess_time_threshold", "spread_threshold", "link_tolerance",
                     "min_gain", "nccl_model_error", "alpha_beta_error"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value < 10:
                raise ConfigError(f"{name} must be a fraction >= 0 (0.1 = 10%), got {value!r}")


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


@dataclass(frozen=True, kw_only=True)
class Analysis:
    """What :func:`analyze` found; ``sizes`` and ``configs`` are DataFrames, the rest plain values."""

    sizes: pd.DataFrame
    """Per configuration and size: aggregate columns + model (``"NVLSTree/Simple"`` or an alpha-beta name),
    model_kind (nccl | alpha-beta), algo_source, model_busbw_gbps, efficiency, bound_algo, bound_busbw_gbps,
    bound_limited_by, margin, verdict (normal | low | suspicious), fit_time_us, residual (:mod:`.efficiency`)."""
    configs: pd.DataFrame
    """Per configuration: the fit (fit_alpha_beta columns) + peak_busbw_gbps, peak_size_bytes, n_half_measured_bytes,
    model."""
    crossovers: tuple[Crossover, ...]
    anomalies: tuple[Anomaly, ...]
    notes: tuple[str, ...]
    n_records: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    """``"<nranks>x<nnodes>"`` -> LinkParams as a dict, for the groups that had parameters."""
    options: AnalyzeOptions = field(default_factory=AnalyzeOptions)
    geometry: tuple[GroupGeometry, ...] = ()
    """The geometry of each (nranks, nnodes) group, with its evidence (:mod:`.job_geometry`)."""
    host_differences: tuple[HostMismatch, ...] = ()
    """Configurations measured on other hosts than the one they are compared with (:mod:`.placement`): their
    differences are node differences, not setting differences."""
    sources: tuple[SourceComparison, ...] = ()
    """The same configuration read from two inputs, side by side (:mod:`.sources`)."""
    inputs: tuple[str, ...] = ()
    """The inputs the records came from, in the order they were named."""

    def to_frame(self) -> pd.DataFrame:
        """The per configuration x size rows (with efficiency): what ``analyze --csv`` writes."""
        return self.sizes.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"n_records": self.n_records, "configs": _records(self.configs), "sizes": _records(self.sizes),
                "crossovers": [c.to_dict() for c in self.crossovers],
                "anomalies": [a.to_dict() for a in self.anomalies], "notes": list(self.notes),
                "params": self.params, "options": asdict(self.options),
                "geometry": self.geometry[0].geometry.to_json() if len(self.geometry) == 1 else None,
                "geometries": [g.to_json() for g in self.geometry],
                "host_differences": [h.to_dict() for h in self.host_differences],
                "inputs": list(self.inputs), "sources": [c.to_dict() for c in self.sources]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    return str(value)


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], frame.to_dict(orient="records"))


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in _rows(frame)]


def _settings_by_config(df: pd.DataFrame) -> dict[str, dict[str, str]]:
    knobs = [c for c in df.columns if c not in _NOT_KNOBS]
    if not knobs or df.empty:
        return {}
    firsts = df[["config", *knobs]].astype({k: object for k in knobs}).groupby("config", observed=True).first()
    return {str(cfg): {k: str(v) for k, v in row.items() if v is not None and not pd.isna(v)}
            for cfg, row in firsts.iterrows()}


# ---- per configuration measures ---------------------------------------------------------------------------------
def _half_peak(sizes: np.ndarray, bw: np.ndarray) -> tuple[float, float, float | None]:
    """(peak busbw, its size, the interpolated size of half the peak or None when below the range)."""
    good = np.isfinite(bw)
    s, b = sizes[good].astype(float), bw[good]
    if not len(b):
        return math.nan, math.nan, None
    peak_i = int(np.argmax(b))
    half = b[peak_i] / 2
    i = int(np.argmax(b >= half))
    if i == 0:
        return float(b[peak_i]), float(s[peak_i]), None
    x0, x1 = math.log2(s[i - 1]), math.log2(s[i])
    frac = (half - b[i - 1]) / (b[i] - b[i - 1]) if b[i] != b[i - 1] else 1.0
    return float(b[peak_i]), float(s[peak_i]), float(2 ** (x0 + frac * (x1 - x0)))


def _curve_anomalies(key: dict[str, Any], cell: pd.DataFrame, opts: AnalyzeOptions) -> list[Anomaly]:
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


def _excess_time_anomalies(key: dict[str, Any], cell: pd.DataFrame, opts: AnalyzeOptions) -> list[Anomaly]:
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


def _cell_anomalies(sizes: pd.DataFrame, opts: AnalyzeOptions) -> list[Anomaly]:
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


def _few_repeats_note(sizes: pd.DataFrame) -> str | None:
    few = int(((sizes["n"] > 0) & (sizes["n"] < MIN_REPEATS)).sum())
    if not few:
        return None
    return (f"{few} configuration x size cell(s) have fewer than {MIN_REPEATS} usable repeats: their noise is unknown, "
            "so no crossover, win or spread is claimed from them (measure again with 3 repeats: "
            "`collscope sweep run --repeats 3`)")


def _lost_points(df: pd.DataFrame) -> list[Anomaly]:
    out = []
    for entry in df.attrs.get("failures", []) or []:
        key = {"op": entry.get("op") or "?", "config": entry.get("config") or "?"}
        out.append(_anomaly("failure", key, None, f"point {entry.get('point_id')} failed without records: "
                            f"{entry.get('reason')}: {entry.get('detail')}"))
    return out


def analyze(df: pd.DataFrame, *, params: ParamsSource = None, options: AnalyzeOptions | None = None,
            logged: Logged | None = None) -> Analysis:
    """Fits, efficiency against the models, half-peak sizes, crossovers and anomalies of ``df``
    (:func:`~.load.load_results`). ``params`` is one LinkParams (used for the ranks and nodes it describes) or
    a function (nranks, nnodes) -> LinkParams | None; None leaves efficiency NA. ``logged``: what NCCL's logs say
    ran per (config, op, size) (:func:`~.logged_choices.logged_choices`)."""
    opts = options or AnalyzeOptions()
    if df.empty and not df.attrs.get("failures"):
        raise ConfigError("no records to analyze")
    notes: list[str] = list(df.attrs.get("notes", ()))
    zero = size_zero_note(df)
    if zero:
        notes.append(zero)
    sizes = aggregate(df)
    configs = fit_alpha_beta(sizes)
    used: dict[str, Any] = {}
    margins = Margins(nccl=opts.nccl_model_error, alpha_beta=opts.alpha_beta_error, link=opts.link_tolerance,
                      published=opts.published_margins)
    add_expected(sizes, _settings_by_config(df), params, margins, notes, used, logged)
    first_model = sizes.groupby(list(CONFIG_KEYS), observed=True, dropna=False, sort=True)["model"].first()
    configs["model"] = first_model.to_numpy() if len(first_model) == len(configs) else None
    fit_time = np.full(len(sizes), np.nan)
    peaks: list[tuple[float, float, float | None]] = []
    peak_eff: list[float] = []
    anomalies: list[Anomaly] = []
    groups = sizes.groupby(list(CONFIG_KEYS), observed=True, dropna=False, sort=True)
    for (key, cell), alpha, beta in zip(groups, configs["alpha_us"], configs["beta_us_per_byte"], strict=True):
        s = cell["size_bytes"].to_numpy()
        b = cell["busbw_gbps"].to_numpy(dtype=float)
        peaks.append(_half_peak(s, b))
        eff = cell["efficiency"].to_numpy(dtype=float)
        peak_eff.append(float(eff[np.nanargmax(b)]) if np.isfinite(b).any() else math.nan)
        fit_time[cell.index.to_numpy()] = alpha + beta * s
        anomalies.extend(_curve_anomalies(dict(zip(CONFIG_KEYS, key, strict=True)), cell, opts))
        anomalies.extend(_excess_time_anomalies(dict(zip(CONFIG_KEYS, key, strict=True)), cell, opts))
    sizes["fit_time_us"] = fit_time
    sizes["residual"] = sizes["time_us"] / sizes["fit_time_us"] - 1.0
    configs["peak_busbw_gbps"] = [p[0] for p in peaks]
    configs["peak_size_bytes"] = [p[1] for p in peaks]
    configs["n_half_measured_bytes"] = [math.nan if p[2] is None else p[2] for p in peaks]
    configs["peak_efficiency"] = peak_eff
    anomalies.extend(_cell_anomalies(sizes, opts))
    anomalies.extend(_lost_points(df))
    few = _few_repeats_note(sizes)
    if few:
        notes.append(few)
    if any(p[2] is None and math.isfinite(p[0]) for p in peaks):
        notes.append("n_half_measured_bytes is NaN where the smallest size measured already reaches half the peak")
    order = {k: i for i, k in enumerate(AnomalyKind.__args__)}  # type: ignore[attr-defined]
    anomalies.sort(key=lambda a: (order[a.kind], a.op, a.config, a.size_bytes or 0))
    hosts = config_hosts(df)
    crossovers = tuple(_hosts_said(c, hosts) for c in find_crossovers(sizes, opts.min_gain))
    geometry = tuple(replace(g, host_backends=host_backends(df, g.nranks, g.nnodes)) if g.nnodes is not None else g
                     for g in df.attrs.get("geometry", ()) or () if isinstance(g, GroupGeometry))
    inputs = _inputs(df)
    return Analysis(sizes=sizes, configs=configs, crossovers=crossovers, anomalies=tuple(anomalies),
                    notes=tuple(dict.fromkeys(notes)), n_records=len(df), params=used, options=opts,
                    geometry=geometry, host_differences=tuple(host_mismatches(df, found=hosts)),
                    sources=tuple(compare_sources(sizes, inputs, opts.min_gain)), inputs=inputs)


def _inputs(df: pd.DataFrame) -> tuple[str, ...]:
    """The inputs of ``df`` in the order they were named (the categories of load_results' ``input`` column)."""
    if "input" not in df:
        return ()
    column = df["input"]
    values = column.cat.categories if isinstance(column.dtype, pd.CategoricalDtype) else column.dropna().unique()
    return tuple(str(v) for v in values)


def _hosts_said(crossover: Crossover, hosts: ConfigHosts) -> Crossover:
    """The crossover, with the sentence that says so when its two configurations ran on different hosts."""
    group = (crossover.backend, crossover.op, crossover.nranks, crossover.nnodes, crossover.in_place,
             crossover.input)
    here = hosts.hosts.get(group, {})
    to, frm = here.get(crossover.to_config), here.get(crossover.from_config)
    if to is None or frm is None or to == frm:
        return crossover
    where = dict(zip(COMPARED_KEYS, group, strict=True))
    return dataclasses.replace(crossover, hosts_differ=mismatch_for(where, crossover.to_config, to,
                                                                    crossover.from_config, frm).sentence())
