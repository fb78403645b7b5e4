"""Change points in a fleet's history: what got slower or faster, when, at which sizes, and what changed with it.

The records (:class:`Change`, :class:`Outlier`) come first; the detector (pure functions on arrays, no DuckDB)
follows. :mod:`collscope.observe.series` reads the series from the store. The method: docs/observe.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

__all__ = ["Change", "Outlier", "SeriesKey", "SERIES_COLUMNS", "COINCIDE_COLUMNS"]

SERIES_COLUMNS: tuple[str, ...] = ("cluster", "op", "nranks", "nnodes", "settings_text", "dtype")
"""The store's columns that name one series: runs of the same series are comparable night after night."""

COINCIDE_COLUMNS: tuple[str, ...] = ("nccl_version", "nccl_git", "net_plugin", "net_plugin_version", "tuner_plugin",
                                     "tuner_plugin_version", "profiler_plugin", "profiler_plugin_version",
                                     "engine_version", "hosts", "fabric_fingerprint", "gpu")
"""Provenance columns compared between the runs just before and just after a change (``coincides_with``)."""

SeriesKey = tuple[str, str, "int | None", "int | None", str, "str | None"]
"""(cluster, op, nranks, nnodes, settings, dtype): one series."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """A sustained shift of busbw in one series over a range of adjacent sizes."""

    cluster: str
    op: str
    nranks: int | None
    nnodes: int | None
    settings: str
    """The settings as canonical text (``settings_text``: sorted K=V joined by ';', or 'default')."""
    dtype: str | None
    size_min_bytes: int
    size_max_bytes: int
    """The range of adjacent sizes that changed together (both ends included)."""
    at: datetime
    """Run time (UTC) of the first run after the change."""
    before_busbw_gbps: float
    """Median busbw of the segment before, at the range's median size (the size ``sizes_bytes`` lists)."""
    after_busbw_gbps: float
    """Median busbw of the segment after, at the same size."""
    change_pct: float
    """after/before - 1 in percent, the median over the range's sizes of each size's ratio of medians."""
    ci_low_pct: float
    ci_high_pct: float
    """95 % bootstrap confidence interval of change_pct (runs resampled within each segment)."""
    coincides_with: dict[str, tuple[Any, Any]]
    """Provenance column -> (value in the last run before, value in the first run after), for the columns whose
    values differ (nccl_version, plugins, hosts, fabric_fingerprint, gpu, ...); empty when nothing logged changed."""
    kind: Literal["regression", "improvement"]
    before_at: datetime | None = None
    """Run time of the last run before the change."""
    runs_before: int = 0
    runs_after: int = 0
    """Runs in the segments either side (each at least :data:`MIN_RUNS`)."""
    sizes_bytes: tuple[int, ...] = field(default=())
    """The sizes of the range that changed, ascending."""
    representative_size_bytes: int = 0
    """The size whose medians before_busbw_gbps and after_busbw_gbps are."""

    @property
    def series(self) -> SeriesKey:
        return (self.cluster, self.op, self.nranks, self.nnodes, self.settings, self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "op": self.op, "nranks": self.nranks, "nnodes": self.nnodes,
                "settings": self.settings, "dtype": self.dtype, "size_min_bytes": self.size_min_bytes,
                "size_max_bytes": self.size_max_bytes, "at": self.at.isoformat(),
                "before_at": self.before_at.isoformat() if self.before_at else None,
                "before_busbw_gbps": self.before_busbw_gbps, "after_busbw_gbps": self.after_busbw_gbps,
                "change_pct": self.change_pct, "ci_low_pct": self.ci_low_pct, "ci_high_pct": self.ci_high_pct,
                "coincides_with": {k: [_plain(b), _plain(a)] for k, (b, a) in self.coincides_with.items()},
                "kind": self.kind, "runs_before": self.runs_before, "runs_after": self.runs_after,
                "sizes_bytes": list(self.sizes_bytes), "representative_size_bytes": self.representative_size_bytes}


@dataclass(frozen=True, slots=True, kw_only=True)
class Outlier:
    """One run far from its neighbours at a range of sizes, with the runs either side back to normal: not a
    change (listed apart)."""

    cluster: str
    op: str
    nranks: int | None
    nnodes: int | None
    settings: str
    dtype: str | None
    size_min_bytes: int
    size_max_bytes: int
    at: datetime
    """Run time (UTC) of the outlying run."""
    run_id: str
    busbw_gbps: float
    """Its busbw at the size where it deviates most (worst_size_bytes)."""
    expected_busbw_gbps: float
    """The series' local median (its neighbours' runs) at that size."""
    deviation_pct: float
    """busbw / expected - 1 in percent, the median over the outlying sizes."""
    worst_size_bytes: int = 0
    source: str | None = None
    """The input file the run came from."""

    @property
    def series(self) -> SeriesKey:
        return (self.cluster, self.op, self.nranks, self.nnodes, self.settings, self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "op": self.op, "nranks": self.nranks, "nnodes": self.nnodes,
                "settings": self.settings, "dtype": self.dtype, "size_min_bytes": self.size_min_bytes,
                "size_max_bytes": self.size_max_bytes, "at": self.at.isoformat(), "run_id": self.run_id,
                "busbw_gbps": self.busbw_gbps, "expected_busbw_gbps": self.expected_busbw_gbps,
                "deviation_pct": self.deviation_pct, "worst_size_bytes": self.worst_size_bytes,
                "source": self.source}


def _plain(value: Any) -> Any:
    """A provenance value as JSON has it (hosts as a list)."""
    if isinstance(value, tuple):
        return list(value)
    return value
