"""The thresholds and margins of :func:`.compare.analyze`: its anomaly checks (:mod:`.anomalies`) and its verdicts
against the models (:mod:`.efficiency`)."""

from __future__ import annotations

from dataclasses import dataclass

from collscope.errors import ConfigError

__all__ = ["AnalyzeOptions"]


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
