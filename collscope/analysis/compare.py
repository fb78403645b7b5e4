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
from dataclasses import asdict, dataclass, field, replace
from typing import Any, cast

import numpy as np
import pandas as pd

from collscope.analysis.analyze_options import AnalyzeOptions
from collscope.analysis.anomalies import (
    Anomaly,
    AnomalyKind,
    cell_anomalies,
    curve_anomalies,
    excess_time_anomalies,
    lost_points,
)
from collscope.analysis.crossovers import Crossover, find_crossovers
from collscope.analysis.efficiency import Logged, Margins, ParamsSource, add_expected, model_name
from collscope.analysis.expected import SOURCE_MODELLED
from collscope.analysis.fit import CONFIG_KEYS, aggregate, fit_alpha_beta
from collscope.analysis.job_geometry import GroupGeometry, host_backends
from collscope.analysis.load import RECORD_COLUMNS
from collscope.analysis.nccl_model.constants import judged_release_notes
from collscope.analysis.noise import MIN_REPEATS
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

__all__ = ["analyze", "Analysis", "AnalyzeOptions", "Anomaly", "Crossover", "AnomalyKind", "ParamsSource",
           "model_name"]

_NOT_KNOBS = frozenset({*RECORD_COLUMNS, "settings", "config", "applied", "failure", "input"})


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


def _release_by_config(df: pd.DataFrame) -> dict[str, str]:
    """The NCCL release of each configuration whose records name exactly one."""
    if "nccl_version" not in df or df.empty:
        return {}
    found = df[["config", "nccl_version"]].dropna().astype(str).groupby("config", observed=True)["nccl_version"]
    return {str(cfg): next(iter(versions)) for cfg, versions in found.unique().items() if len(versions) == 1}


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


def _few_repeats_note(sizes: pd.DataFrame) -> str | None:
    few = int(((sizes["n"] > 0) & (sizes["n"] < MIN_REPEATS)).sum())
    if not few:
        return None
    return (f"{few} configuration x size cell(s) have fewer than {MIN_REPEATS} usable repeats: their noise is unknown, "
            "so no crossover, win or spread is claimed from them (measure again with 3 repeats: "
            "`collscope sweep run --repeats 3`)")


def _release_notes(df: pd.DataFrame, sizes: pd.DataFrame) -> list[str]:
    """The releases of the records whose choices collscope's model of NCCL's choice does not reproduce."""
    if "nccl_version" not in df or "algo_source" not in sizes or not (sizes["algo_source"] == SOURCE_MODELLED).any():
        return []
    releases = sorted({str(v) for v in df["nccl_version"].dropna()})
    return list(dict.fromkeys(note for v in releases for note in judged_release_notes(v)))


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
    add_expected(sizes, _settings_by_config(df), params, margins, notes, used, logged, _release_by_config(df))
    notes.extend(_release_notes(df, sizes))
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
        config_key = dict(zip(CONFIG_KEYS, key, strict=True))
        anomalies.extend(curve_anomalies(config_key, cell, opts))
        anomalies.extend(excess_time_anomalies(config_key, cell, opts))
    sizes["fit_time_us"] = fit_time
    sizes["residual"] = sizes["time_us"] / sizes["fit_time_us"] - 1.0
    configs["peak_busbw_gbps"] = [p[0] for p in peaks]
    configs["peak_size_bytes"] = [p[1] for p in peaks]
    configs["n_half_measured_bytes"] = [math.nan if p[2] is None else p[2] for p in peaks]
    configs["peak_efficiency"] = peak_eff
    anomalies.extend(cell_anomalies(sizes, opts))
    anomalies.extend(lost_points(df))
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
