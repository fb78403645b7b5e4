"""Per-size statistics over repeats, and a robust alpha-beta fit per configuration.

A configuration is one (backend, op, config, nranks, nnodes, in_place, input); see :data:`CONFIG_KEYS`.

:func:`aggregate` first reduces the repeats of each size to robust statistics: the median time and busbw,
the spread ``(q75 - q25) / median`` (``spread_iqr``) and ``max / min - 1`` (``spread_range``) of the time,
and the number of usable repeats. Only usable records count: ``ok`` true and ``applied`` not false; the
others are counted (``n_not_ok``, ``n_not_applied``) so that the analysis can report them. Records of size 0
(nccl-tests' rows of a size that rounded to 0 bytes per rank) are left out entirely (:mod:`.size_zero`).

:func:`fit_alpha_beta` fits ``time_us = alpha_us + beta_us_per_byte * size_bytes`` to the medians with a Huber
M-estimator solved by iteratively reweighted least squares (numpy only):

* residuals are relative, ``r = (t - fit) / fit``: collective times span six decades from 8 B to 1 GiB, and
  the noise of a timed loop is multiplicative, so an absolute fit would ignore every small size;
* the scale is the MAD of the relative residuals (x 1.4826, at least 0.1%), Huber's ``c = 1.345``; a size
  that lies far off the line (a dip, a protocol switch) gets weight ``c / |u|`` instead of 1, so a few of
  them barely move the fit;
* no latency floor: every size is used, the relative weighting lets the small sizes fix alpha and the large
  ones beta (a curve with a protocol switch shows it as residuals, see ``residuals`` and ``max_abs_residual``);
* alpha is kept >= 0 and beta > 0: when the free fit leaves that range the offending term is set to zero
  and the other refitted;
* 95% intervals are analytical: the weighted least-squares covariance at the final weights, scaled by the
  residual variance, with Student's t for ``n - 2`` degrees of freedom (NaN with fewer than 3 sizes);
* ``bw_gbps = 1e-3 / beta`` (bytes per microsecond -> decimal GB/s) is the asymptotic algorithm bandwidth,
  ``busbw_gbps`` that times the busbw factor, ``n_half_bytes = alpha / beta`` the size that reaches half of
  it (Hockney's n_1/2).
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import pandas as pd

from collscope.analysis.size_zero import without_size_zero
from collscope.collectives.record import busbw_factor

__all__ = ["CONFIG_KEYS", "aggregate", "fit_alpha_beta", "fit_line", "LineFit"]

CONFIG_KEYS = ("backend", "op", "config", "nranks", "nnodes", "in_place", "input")
"""The columns that identify one configuration. ``input`` is the path the records were loaded from
(:func:`~.load.load_results`): records of one configuration from two inputs (a sweep and a check run) are two
configurations, never repeats of one; frames without the column are one input (None)."""
_HUBER_C = 1.345
_MAD_SCALE = 1.4826
_SCALE_FLOOR = 1e-3
"""Relative residual scale below which data counts as exact (0.1%): noise-free curves still down-weight outliers."""
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
         2.042)


def _t975(dof: int) -> float:
    """Two-sided 95% quantile of Student's t (table to 30 degrees of freedom, then 1.96 + 2.5 / dof)."""
    if dof < 1:
        return math.nan
    return _T975[dof - 1] if dof <= len(_T975) else 1.96 + 2.5 / dof


# ---- repeats -> per size statistics -------------------------------------------------------------------------
def aggregate(df: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and size: ``n`` usable repeats (``n_total`` all), median ``time_us``,
    ``time_min_us``, ``time_max_us``, ``spread_iqr``, ``spread_range``, median ``busbw_gbps`` and
    ``algbw_gbps``, ``busbw_min_gbps``, ``busbw_max_gbps``, ``n_not_ok``, ``n_not_applied`` and ``failure``
    (the first failure reason seen in the cell, else NA). Sorted by configuration and size. Size-0 records
    have no row (:mod:`.size_zero`: their busbw is 0, no spread or log2 size exists for them)."""
    if "input" not in df:
        df = df.assign(input=None)
    missing = [c for c in (*CONFIG_KEYS, "size_bytes", "time_us", "busbw_gbps", "algbw_gbps", "ok") if c not in df]
    if missing:
        raise ValueError(f"the records lack column(s) {', '.join(missing)}; expected load_results' DataFrame")
    df = without_size_zero(df)
    ok = df["ok"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    if "applied" in df:
        not_applied = (df["applied"].astype("boolean") == False).fillna(False).to_numpy(dtype=bool)  # noqa: E712
    else:
        not_applied = np.zeros(len(df), dtype=bool)
    usable = ok & ~not_applied
    work = pd.DataFrame({k: df[k] for k in (*CONFIG_KEYS, "size_bytes")})
    for col in ("time_us", "busbw_gbps", "algbw_gbps"):
        work[col] = np.where(usable, pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float), np.nan)
    work["usable"] = usable
    work["not_ok"] = ~ok
    work["not_applied"] = not_applied
    if "failure" in df:
        work["failure"] = df["failure"].astype(object)
    keys = [*CONFIG_KEYS, "size_bytes"]
    grouped = work.groupby(keys, observed=True, dropna=False, sort=True)
    time = grouped["time_us"]
    out = pd.DataFrame({
        "n": grouped["usable"].sum().astype(np.int64),
        "n_total": grouped.size(),
        "time_us": time.median(),
        "time_min_us": time.min(),
        "time_max_us": time.max(),
        "q25": time.quantile(0.25),
        "q75": time.quantile(0.75),
        "busbw_gbps": grouped["busbw_gbps"].median(),
        "busbw_min_gbps": grouped["busbw_gbps"].min(),
        "busbw_max_gbps": grouped["busbw_gbps"].max(),
        "algbw_gbps": grouped["algbw_gbps"].median(),
        "n_not_ok": grouped["not_ok"].sum().astype(np.int64),
        "n_not_applied": grouped["not_applied"].sum().astype(np.int64),
    })
    if "failure" in work:
        out["failure"] = grouped["failure"].first()
    else:
        out["failure"] = None
    out["spread_iqr"] = (out["q75"] - out["q25"]) / out["time_us"]
    out["spread_range"] = out["time_max_us"] / out["time_min_us"] - 1.0
    out = out.drop(columns=["q25", "q75"]).reset_index()
    for key in ("backend", "op", "config"):
        out[key] = out[key].astype(str)
    return out.sort_values([*CONFIG_KEYS, "size_bytes"], kind="stable").reset_index(drop=True)


_PRED_FLOOR_US = 1e-12
"""The smallest time the line fit weighs a size by (its weights are 1 / time^2): a damaged file's 1e-300 us would
square to zero and the weight to infinity."""


# ---- the line fit ----------------------------------------------------------------------------------------------
class LineFit(dict[str, Any]):
    """The result of :func:`fit_line` (a dict: alpha_us, beta_us_per_byte, their 95% bounds, r2, mad_rel,
    residuals (relative, per size), weights, n_sizes)."""


def _solve(x: np.ndarray, y: np.ndarray, w: np.ndarray, fixed: str | None) -> tuple[float, float, np.ndarray]:
    """Weighted least squares for (alpha, beta) in microseconds and microseconds per byte; ``fixed`` names a
    term held at zero. Returns the solution and the inverse of the scaled normal matrix (for the covariance)."""
    xs = float(x.max()) or 1.0
    cols = [np.ones_like(x), x / xs]
    if fixed == "alpha":
        cols = [cols[1]]
    elif fixed == "beta":
        cols = [cols[0]]
    a = np.column_stack(cols)
    sw = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(a * sw[:, None], y * sw, rcond=None)
    normal = (a * w[:, None]).T @ a
    inv = np.linalg.pinv(normal)
    if fixed == "alpha":
        return 0.0, float(coef[0]) / xs, _embed(inv, 1, xs)
    if fixed == "beta":
        return float(coef[0]), 0.0, _embed(inv, 0, xs)
    scale = np.array([1.0, 1.0 / xs])
    return float(coef[0]), float(coef[1]) / xs, inv * np.outer(scale, scale)


def _embed(inv: np.ndarray, index: int, xs: float) -> np.ndarray:
    full = np.zeros((2, 2))
    full[index, index] = float(inv[0, 0]) * (1.0 if index == 0 else 1.0 / xs**2)
    return full


def _no_fit(n: int) -> LineFit:
    """The fit of sizes that give none: every figure NaN."""
    nan = math.nan
    return LineFit(alpha_us=nan, beta_us_per_byte=nan, alpha_lo_us=nan, alpha_hi_us=nan, beta_lo=nan, beta_hi=nan,
                   r2=nan, mad_rel=nan, residuals=np.full(n, nan), weights=np.ones(n), n_sizes=n)


def fit_line(size_bytes: np.ndarray | list[float], time_us: np.ndarray | list[float], *,
             max_iter: int = 50) -> LineFit:
    """Huber IRLS fit of ``time_us = alpha + beta * size_bytes`` on relative residuals (module docstring)."""
    x = np.asarray(size_bytes, dtype=float)
    y = np.asarray(time_us, dtype=float)
    good = np.isfinite(x) & np.isfinite(y) & (y > 0)
    x, y = x[good], y[good]
    n = len(x)
    nan = math.nan
    if n < 2 or len(np.unique(x)) < 2:
        return _no_fit(n)
    huber = np.ones(n)
    pred = np.maximum(y, _PRED_FLOOR_US)
    fixed: str | None = None
    alpha = beta = nan
    inv = np.zeros((2, 2))
    for _ in range(max_iter):
        w = huber / pred**2
        try:
            alpha, beta, inv = _solve(x, y, w, fixed)
            if fixed is None and alpha < 0:
                fixed = "alpha"
                alpha, beta, inv = _solve(x, y, w, fixed)
            if beta <= 0:
                fixed = "beta"
                alpha, beta, inv = _solve(x, y, w, fixed)
        except np.linalg.LinAlgError:  # weights no solver can take (times of 1e-300 us in a damaged file): no fit
            return _no_fit(n)
        new_pred = np.maximum(alpha + beta * x, _PRED_FLOOR_US)
        r = (y - new_pred) / new_pred
        scale = max(_MAD_SCALE * float(np.median(np.abs(r - np.median(r)))), _SCALE_FLOOR)
        u = np.abs(r) / scale
        new_huber = np.where(u <= _HUBER_C, 1.0, _HUBER_C / np.maximum(u, 1e-300))
        done = np.allclose(new_pred, pred, rtol=1e-9, atol=0) and np.allclose(new_huber, huber, rtol=1e-6, atol=1e-9)
        pred, huber = new_pred, new_huber
        if done:
            break
    w = huber / pred**2
    resid = y - pred
    rel = resid / pred
    params = 2 - (fixed is not None)
    dof = n - params
    wmean = float(np.sum(w * y) / np.sum(w))
    ss_tot = float(np.sum(w * (y - wmean) ** 2))
    ss_res = float(np.sum(w * resid**2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else nan
    if dof >= 1:
        sigma2 = ss_res / dof
        half = _t975(dof) * np.sqrt(np.maximum(np.diag(inv) * sigma2, 0.0))
    else:
        half = np.array([nan, nan])
    a_half = 0.0 if fixed == "alpha" else float(half[0])
    b_half = 0.0 if fixed == "beta" else float(half[1])
    return LineFit(alpha_us=alpha, beta_us_per_byte=beta, alpha_lo_us=max(alpha - a_half, 0.0),
                   alpha_hi_us=alpha + a_half, beta_lo=max(beta - b_half, 0.0), beta_hi=beta + b_half, r2=r2,
                   mad_rel=float(np.median(np.abs(rel))), residuals=rel, weights=huber, n_sizes=n)


def _bw(beta: float) -> float:
    return 1e-3 / beta if beta > 0 and math.isfinite(beta) else math.nan


def fit_alpha_beta(data: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (:data:`CONFIG_KEYS`): ``n_sizes``, ``min_bytes``, ``max_bytes``,
    ``alpha_us`` and ``beta_us_per_byte`` with 95% bounds (``alpha_lo_us``, ``alpha_hi_us``, ``beta_lo``,
    ``beta_hi``), ``bw_gbps`` (+ ``bw_lo_gbps``/``bw_hi_gbps``), ``busbw_gbps``, ``n_half_bytes``, ``r2``,
    ``mad_rel`` (median |relative residual|), ``max_abs_residual``, ``outliers`` (sizes the Huber weights cut)
    and ``residuals`` (dict size -> relative residual).

    ``data`` is the records (load_results) or their :func:`aggregate`; sizes without a usable repeat are left out.
    """
    agg = data if "time_min_us" in data.columns else aggregate(data)
    rows: list[dict[str, Any]] = []
    for key, cell in agg.groupby(list(CONFIG_KEYS), observed=True, dropna=False, sort=True):
        cell = cell[cell["n"] > 0]
        fit = fit_line(cell["size_bytes"].to_numpy(dtype=float), cell["time_us"].to_numpy(dtype=float))
        row: dict[str, Any] = dict(zip(CONFIG_KEYS, cast(tuple[Any, ...], key), strict=True))
        sizes = cell["size_bytes"].to_numpy()[np.isfinite(cell["time_us"].to_numpy(dtype=float))]
        beta = fit["beta_us_per_byte"]
        try:
            factor = busbw_factor(str(row["op"]), int(row["nranks"]))
        except (ValueError, TypeError):
            factor = math.nan
        rel = fit["residuals"]
        row.update(
            n_sizes=fit["n_sizes"], min_bytes=int(sizes.min()) if len(sizes) else None,
            max_bytes=int(sizes.max()) if len(sizes) else None,
            alpha_us=fit["alpha_us"], alpha_lo_us=fit["alpha_lo_us"], alpha_hi_us=fit["alpha_hi_us"],
            beta_us_per_byte=beta, beta_lo=fit["beta_lo"], beta_hi=fit["beta_hi"],
            bw_gbps=_bw(beta), bw_lo_gbps=_bw(fit["beta_hi"]), bw_hi_gbps=_bw(fit["beta_lo"]),
            busbw_gbps=_bw(beta) * factor,
            n_half_bytes=fit["alpha_us"] / beta if beta > 0 else math.nan,
            r2=fit["r2"], mad_rel=fit["mad_rel"],
            max_abs_residual=float(np.max(np.abs(rel))) if len(rel) else math.nan,
            outliers=int(np.sum(fit["weights"] < 1.0)),
            residuals={int(s): float(r) for s, r in zip(sizes, rel, strict=True)})
        rows.append(row)
    columns = [*CONFIG_KEYS, "n_sizes", "min_bytes", "max_bytes", "alpha_us", "alpha_lo_us", "alpha_hi_us",
               "beta_us_per_byte", "beta_lo", "beta_hi", "bw_gbps", "bw_lo_gbps", "bw_hi_gbps", "busbw_gbps",
               "n_half_bytes", "r2", "mad_rel", "max_abs_residual", "outliers", "residuals"]
    return pd.DataFrame(rows, columns=columns)
