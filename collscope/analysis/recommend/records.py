"""The records of :mod:`collscope.analysis.recommend.core`: options, cell statistics, verdicts, ranges, choices."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from collscope.analysis.noise import relative_spread
from collscope.analysis.recommend.workload import Workload
from collscope.errors import ConfigError
from collscope.vocab.configs import DEFAULT_CONFIG

__all__ = [
    "RecommendOptions", "CellStat", "Candidate", "SizeResult", "SizeRange", "GroupKey", "GroupResult",
    "Excluded", "EnvCandidate", "EnvChoice", "Recommendation", "Verdict", "DEFAULT_CONFIG",
]

Verdict = Literal["wins", "within noise", "too few repeats", "single size", "below min gain", "loses"]
"""``single size``: beats the default beyond noise at this size but not at an adjacent one (noise.py's rule)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RecommendOptions:
    """What to recommend from."""

    min_gain: float = 0.03
    """Relative busbw gain over the default a candidate must exceed (0.03 = 3%), on top of the noise."""
    op: str | None = None
    """Only this collective (``all_reduce``, ...); None for every op in the data."""
    in_place: bool | None = None
    """Only in-place (True) or out-of-place (False) records; None: out-of-place when both exist."""

    def __post_init__(self) -> None:
        if not isinstance(self.min_gain, (int, float)) or not 0 <= self.min_gain < 10 or math.isnan(self.min_gain):
            raise ConfigError(f"min gain {self.min_gain!r} is invalid; valid: a fraction >= 0 and < 10 "
                              "(0.03 means 3%)")


@dataclass(frozen=True, kw_only=True, slots=True)
class CellStat:
    """busbw of one (config, size) cell over its repeats, in decimal GB/s."""

    config: str
    median_gbps: float
    min_gbps: float
    max_gbps: float
    repeats: int
    time_us: float = math.nan
    """Median time per call over the repeats (what a workload's time is computed from)."""

    @property
    def spread(self) -> float:
        """Relative range ``(max - min) / median``; infinite when the median is not positive."""
        return relative_spread(self)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "time_us": _finite(self.time_us), "spread": _finite(self.spread)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """A forced config at one size, against the default of that size."""

    stat: CellStat
    gain: float
    """``median / default median - 1``."""
    noise: float
    """Combined spread of this cell and the default's."""
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {**self.stat.to_dict(), "gain": _finite(self.gain), "noise": _finite(self.noise),
                "verdict": self.verdict}


@dataclass(frozen=True, kw_only=True, slots=True)
class SizeResult:
    size_bytes: int
    baseline: CellStat | None
    """The default's cell; None when the default was not measured (or excluded) at this size."""
    candidates: tuple[Candidate, ...]
    winner: str | None
    """The winning config, ``"default"``, or None without a baseline."""

    def candidate(self, config: str) -> Candidate | None:
        return next((c for c in self.candidates if c.stat.config == config), None)

    def to_dict(self) -> dict[str, Any]:
        return {"size_bytes": self.size_bytes, "baseline": self.baseline.to_dict() if self.baseline else None,
                "winner": self.winner, "candidates": [c.to_dict() for c in self.candidates]}


@dataclass(frozen=True, kw_only=True, slots=True)
class SizeRange:
    """Adjacent measured sizes sharing a verdict; ``min_bytes``/``max_bytes`` are measured sizes (inclusive)."""

    config: str
    min_bytes: int
    max_bytes: int
    sizes: tuple[int, ...]
    gain_min: float
    gain_max: float
    repeats_min: int
    noise_max: float

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sizes": list(self.sizes), "gain_min": _finite(self.gain_min),
                "gain_max": _finite(self.gain_max), "noise_max": _finite(self.noise_max)}


@dataclass(frozen=True, order=True, slots=True)
class GroupKey:
    backend: str
    op: str
    nranks: int
    nnodes: int | None

    @property
    def label(self) -> str:
        nodes = "" if self.nnodes is None else f", {self.nnodes} node{'s' if self.nnodes != 1 else ''}"
        return f"{self.op} ({self.nranks} rank{'s' if self.nranks != 1 else ''}{nodes})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupResult:
    key: GroupKey
    default_measured: bool
    sizes: tuple[SizeResult, ...]
    ranges: tuple[SizeRange, ...]
    """Winner ranges, the default's included (config ``"default"``)."""

    def to_dict(self) -> dict[str, Any]:
        return {**self.key.to_dict(), "default_measured": self.default_measured,
                "sizes": [s.to_dict() for s in self.sizes], "ranges": [r.to_dict() for r in self.ranges]}


@dataclass(frozen=True, kw_only=True, slots=True)
class Excluded:
    """Rows of one cell that may not win, and why."""

    key: GroupKey
    config: str
    size_bytes: int
    rows: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.key.to_dict(), "config": self.config, "size_bytes": self.size_bytes, "rows": self.rows,
                "reason": self.reason}


@dataclass(frozen=True, kw_only=True, slots=True)
class EnvCandidate:
    """A config considered as the single environment setting of one op."""

    backend: str
    op: str
    config: str
    total_gain: float
    """Sum of gains over every size where the default was measured (NaN when not eligible); shown, never
    used to choose (a mean of per-size percentages lets many small sizes outvote the large ones)."""
    sizes: int
    reason: str
    """``"chosen"`` or why not."""
    time_saved_us: float = math.nan
    """Workload time per step saved against the default (negative: it costs time); NaN when not eligible."""
    workload_time_us: float = math.nan
    """The default's time per step on the same workload entries."""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_gain": _finite(self.total_gain), "time_saved_us": _finite(self.time_saved_us),
                "workload_time_us": _finite(self.workload_time_us)}


@dataclass(frozen=True, kw_only=True, slots=True)
class EnvChoice:
    """The config to export for one op, with where it wins and what it costs."""

    backend: str
    op: str
    config: str
    settings: dict[str, str]
    total_gain: float
    sizes: int
    wins: tuple[tuple[GroupKey, SizeRange], ...]
    losses: tuple[tuple[GroupKey, SizeRange], ...]
    time_saved_us: float = math.nan
    """Workload time per step saved against the default."""
    workload_time_us: float = math.nan
    """The default's time per step on the workload."""

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "op": self.op, "config": self.config, "settings": self.settings,
                "total_gain": self.total_gain, "mean_gain": self.total_gain / self.sizes if self.sizes else None,
                "time_saved_us": _finite(self.time_saved_us), "workload_time_us": _finite(self.workload_time_us),
                "sizes": self.sizes,
                "wins": [{**k.to_dict(), **r.to_dict()} for k, r in self.wins],
                "losses": [{**k.to_dict(), **r.to_dict()} for k, r in self.losses]}


@dataclass(frozen=True, kw_only=True, slots=True)
class Recommendation:
    options: RecommendOptions
    groups: tuple[GroupResult, ...]
    env: tuple[EnvChoice, ...]
    env_candidates: tuple[EnvCandidate, ...]
    excluded: tuple[Excluded, ...]
    settings: dict[str, dict[str, str]]
    """Config string -> its knob settings (env var -> value)."""
    notes: tuple[str, ...] = ()
    sweep_ids: tuple[str, ...] = ()
    nccl_versions: tuple[str, ...] = ()
    ops: tuple[str, ...] = field(default=())
    """Every op in the data after filtering (used to decide NCCL's per-collective syntax)."""
    failed_points: tuple[dict[str, Any], ...] = ()
    """Points that failed without records (``frame.attrs["failures"]`` of load_results): never candidates."""
    workload: Workload | None = None
    """The workload the time figures are computed on (``--workload``, else one call per measured size)."""
    algorithms: dict[str, dict[str, str]] = field(default_factory=dict)
    """Config -> op -> the one algorithm NCCL logged for it (sweep check data), for protocol-only tuner rules."""

    @property
    def any_winner(self) -> bool:
        return any(r.config != DEFAULT_CONFIG for g in self.groups for r in g.ranges)

    def to_dict(self) -> dict[str, Any]:
        return {"min_gain": self.options.min_gain, "op": self.options.op, "in_place": self.options.in_place,
                "noise": "spread = (max - min) / median busbw over repeats; a win needs >= 3 repeats on both "
                         "sides, gain > min_gain and gain > spread(candidate) + spread(default), at >= 2 "
                         "adjacent measured sizes",
                "workload": None if self.workload is None else self.workload.to_dict(),
                "algorithms": self.algorithms,
                "range_edges": "measured sizes, inclusive",
                "sweep_ids": list(self.sweep_ids), "nccl_versions": list(self.nccl_versions),
                "notes": list(self.notes), "groups": [g.to_dict() for g in self.groups],
                "env": [e.to_dict() for e in self.env],
                "env_candidates": [c.to_dict() for c in self.env_candidates],
                "excluded": [x.to_dict() for x in self.excluded], "failed_points": list(self.failed_points),
                "settings": self.settings}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
