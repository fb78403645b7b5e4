"""Analysis: cost models (alpha-beta and NCCL's own), fits, comparisons, recommendations and reports.

``load_results`` reads results directories into a DataFrame; ``aggregate``, ``fit_alpha_beta`` and
``analyze`` work on it; recommendations are in ``collscope.analysis.recommend``, NCCL's cost model in
``collscope.analysis.nccl_model``. Names load on first use (pandas, matplotlib only when needed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.analysis.compare import Analysis, AnalyzeOptions, Anomaly, Crossover, analyze
    from collscope.analysis.fit import CONFIG_KEYS, LineFit, aggregate, fit_alpha_beta, fit_line
    from collscope.analysis.load import RECORD_COLUMNS, config_of, load_results
    from collscope.analysis.model_types import LinkParams, Prediction, make_prediction
    from collscope.analysis.models import (
        ALPHA_BETA_MODELS,
        alpha_beta_predictions,
        alpha_beta_time_us,
        ring_bound_busbw_gbps,
    )
    from collscope.analysis.params import link_params
    from collscope.analysis.plots import busbw_vs_size, gain_heatmap
    from collscope.analysis.predict import load_topology, render_predict_text
    from collscope.analysis.report import write_report

__all__ = [
    "ALPHA_BETA_MODELS",
    "Analysis",
    "AnalyzeOptions",
    "Anomaly",
    "CONFIG_KEYS",
    "Crossover",
    "LineFit",
    "LinkParams",
    "Prediction",
    "RECORD_COLUMNS",
    "aggregate",
    "alpha_beta_predictions",
    "alpha_beta_time_us",
    "analyze",
    "busbw_vs_size",
    "config_of",
    "fit_alpha_beta",
    "fit_line",
    "gain_heatmap",
    "link_params",
    "load_results",
    "load_topology",
    "make_prediction",
    "render_predict_text",
    "ring_bound_busbw_gbps",
    "write_report",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.analysis.compare": ["Analysis", "AnalyzeOptions", "Anomaly", "Crossover", "analyze"],
        "collscope.analysis.fit": ["CONFIG_KEYS", "LineFit", "aggregate", "fit_alpha_beta", "fit_line"],
        "collscope.analysis.load": ["RECORD_COLUMNS", "config_of", "load_results"],
        "collscope.analysis.model_types": ["LinkParams", "Prediction", "make_prediction"],
        "collscope.analysis.models": [
            "ALPHA_BETA_MODELS",
            "alpha_beta_predictions",
            "alpha_beta_time_us",
            "ring_bound_busbw_gbps",
        ],
        "collscope.analysis.params": ["link_params"],
        "collscope.analysis.plots": ["busbw_vs_size", "gain_heatmap"],
        "collscope.analysis.predict": ["load_topology", "render_predict_text"],
        "collscope.analysis.report": ["write_report"],
    })
