"""Configurations that hung: after one repeat of a configuration timed out, its other repeats of this run are
written down as skipped (:data:`HUNG_REASON`, naming the repeat that hung) instead of costing one timeout each.
Shared by one launch per point (:mod:`collscope.sweeps.runner`) and persistent workers
(:mod:`collscope.sweeps.worker_jobs`); ``--retry-failed`` runs such repeats and skips nothing."""

from __future__ import annotations

from collections.abc import Callable

from collscope.results.store import ResultsDir
from collscope.sweeps.attempt import PointOutcome, resumed_failure
from collscope.sweeps.spec import Point

__all__ = ["HUNG_REASON", "HungConfigurations"]

HUNG_REASON = "configuration hung"
"""The failure reason of a repeat not run because another repeat of its configuration timed out."""

_Configuration = tuple[str, tuple[tuple[str, str], ...], tuple[int, ...] | None]


def _configuration(point: Point) -> _Configuration:
    """What the repeats of one configuration share: the op, the forced settings, the sizes."""
    return point.op, tuple(sorted(point.settings.items())), point.sizes


class HungConfigurations:
    """The configurations of one run that timed out (none is kept with ``retry_failed``)."""

    def __init__(self, results: ResultsDir, *, retry_failed: bool) -> None:
        self.results = results
        self.retry_failed = retry_failed
        self._hung: dict[_Configuration, Point] = {}

    def saw(self, point: Point, result: PointOutcome) -> None:
        """Note how ``point`` ended: a timeout (no node lost under it) marks its configuration as hung."""
        if result.reason == "timeout" and not self.retry_failed and not resumed_failure(result.reason,
                                                                                        result.detail):
            self._hung.setdefault(_configuration(point), point)

    def skip(self, point: Point) -> PointOutcome | None:
        """When ``point``'s configuration hung: write it down as skipped and return that outcome; else None."""
        first = self._hung.get(_configuration(point))
        if first is None:
            return None
        detail = (f"repeat {first.repeat} of this configuration ({first.point_id}) timed out: the configuration "
                  "hangs; --retry-failed runs this repeat")
        self.results.record_failure(point.point_id, HUNG_REASON, detail)
        return PointOutcome(point.point_id, "skipped", HUNG_REASON, detail)

    def unhung(self, points: list[Point], report: Callable[[Point, PointOutcome, float], None]) -> list[Point]:
        """``points`` but those of a configuration that hung (each written down as skipped and reported)."""
        left = []
        for point in points:
            skipped = self.skip(point)
            if skipped is None:
                left.append(point)
            else:
                report(point, skipped, 0.0)
        return left
