"""A simulated fabric and its runner, for tests and the bench: slow nodes, slow rails, dead and broken nodes.

Every node has a bandwidth factor per rail (1.0 healthy); an inter-node test runs at the slowest member's factor
on its rail (every rail: the mean over rails of that), an intra-node test at the node's own factor. Repeats
get multiplicative noise. A dead node's tests time out; a broken node's tests exit non-zero.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from collscope.locate.model import TestOutcome, TestSpec

__all__ = ["SimFabric"]


@dataclass(kw_only=True)
class SimFabric:
    """A fabric of ``nodes`` with ``rails`` rails; the runner is the instance itself (``fabric(spec, repeats)``)."""

    nodes: list[str]
    rails: int = 1
    net_gbps: float = 40.0
    intra_gbps: float = 200.0
    noise: float = 0.03
    """Relative standard deviation of one repeat."""
    slow: dict[tuple[str, int | None], float] = field(default_factory=dict)
    """(node, rail) -> bandwidth factor; rail ``None``: every rail."""
    slow_intra: dict[str, float] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)
    broken: set[str] = field(default_factory=set)
    seed: int = 0
    size_bytes: int = 64 << 20
    timeout_s: float = 30.0
    calls: list[TestSpec] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def factor(self, node: str, rail: int) -> float:
        return min(self.slow.get((node, rail), 1.0), self.slow.get((node, None), 1.0))

    def _test_gbps(self, spec: TestSpec) -> float:
        if spec.kind == "node":
            return self.intra_gbps * self.slow_intra.get(spec.nodes[0], 1.0)
        rails = range(self.rails) if spec.rail is None else [spec.rail]
        per_rail = [min(self.factor(n, r) for n in spec.nodes) for r in rails]
        return self.net_gbps * sum(per_rail) / len(per_rail)

    def __call__(self, spec: TestSpec, repeats: int) -> TestOutcome:
        with self._lock:
            self.calls.append(spec)
            jitter = [max(0.01, self._rng.gauss(1.0, self.noise)) for _ in range(repeats)]
        if self.dead & set(spec.nodes):
            return TestOutcome(failure="timeout", detail=f"no answer within {self.timeout_s:g} s",
                               duration_s=self.timeout_s)
        if self.broken & set(spec.nodes):
            return TestOutcome(failure="failed", detail="exit code 1", duration_s=1.0)
        gbps = self._test_gbps(spec)
        samples = tuple(gbps * j for j in jitter)
        # all_reduce busbw = S/t x 2(n-1)/n; time from the samples, plus 1 s of launch per repeat.
        n = max(2, len(spec.nodes))
        times = tuple(self.size_bytes / (b * 1e3) * 2 * (n - 1) / n for b in samples)
        return TestOutcome(busbw_gbps=samples, time_us=times, duration_s=sum(1.0 + t / 1e6 for t in times))
