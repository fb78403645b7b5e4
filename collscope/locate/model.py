"""The values locate passes around: a planned test, what running it gave, a judged test, a suspect, the result.

A *test* is one collective on a set of nodes (one node alone, a pair, a group), optionally restricted to one
rail, measured ``repeats`` times. The planner makes :class:`TestSpec` values, a runner turns each into a
:class:`TestOutcome` (busbw samples, or a failure), and the judge gives every test a status.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from collscope.errors import ConfigError

__all__ = ["TestKind", "TestStatus", "SuspectKind", "TestSpec", "TestOutcome", "TestResult", "Suspect",
           "LocateConfig", "LocateResult", "Runner", "LaunchFailure", "LaunchKind"]

TestKind = Literal["node", "pair", "rail", "group"]
TestStatus = Literal["ok", "slow", "failed", "timeout"]
SuspectKind = Literal["slow", "broken", "unreachable"]
LaunchKind = Literal["allocation", "missing program", "launcher"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TestSpec:
    """One test to run: a collective on ``nodes`` (rail ``rail`` only, or every rail when ``None``)."""

    __test__ = False  # not a pytest test class

    kind: TestKind
    nodes: tuple[str, ...]
    rail: int | None = None

    def __post_init__(self) -> None:
        if not self.nodes or len(set(self.nodes)) != len(self.nodes):
            raise ConfigError(f"a test needs distinct nodes, got {list(self.nodes)}")
        if self.kind == "node" and len(self.nodes) != 1:
            raise ConfigError(f"a node test runs on one node, got {list(self.nodes)}")
        if self.kind != "node" and len(self.nodes) < 2:
            raise ConfigError(f"a {self.kind} test needs at least 2 nodes, got {list(self.nodes)}")

    @property
    def key(self) -> tuple[frozenset[str], int | None, bool]:
        """Identity for "already tested": the node set, the rail, node test or not."""
        return frozenset(self.nodes), self.rail, self.kind == "node"


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchFailure:
    """A step that failed because the launch cannot work (:mod:`collscope.locate.launch`), not a node."""

    kind: LaunchKind
    """``allocation``: the allocation forbids the step; ``missing program``: a task's program is not on the node;
    ``launcher``: srun's MPI plugin (PMIx) could not start the ranks."""
    line: str
    """The launcher's own line that says it."""
    fix: str
    """What to do, with the allocation's shape where it is the cause."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TestOutcome:
    """What running a test gave: busbw per repeat, or why there is none."""

    __test__ = False  # not a pytest test class

    busbw_gbps: tuple[float, ...] = ()
    time_us: tuple[float, ...] = ()
    failure: Literal["failed", "timeout"] | None = None
    """``failed``: a non-zero exit or no records; ``timeout``: the test did not end within its timeout (the
    node may be unreachable)."""
    detail: str = ""
    """One line: the exit code, the launcher's last message, why records are missing."""
    duration_s: float = 0.0
    records: tuple[Any, ...] = ()
    """The Measurement records behind the samples (real runners), written under ``--out``."""
    logs: tuple[str, ...] = ()
    """Paths of the step logs behind this outcome (real runners)."""
    launch: LaunchFailure | None = None
    """A failed test whose launch itself failed (the allocation, a missing program, PMIx): no node's fault."""

    def __post_init__(self) -> None:
        if self.failure is None and not self.busbw_gbps:
            raise ConfigError("a test outcome needs busbw samples or a failure")


Runner = Callable[[TestSpec, int], TestOutcome]
"""``runner(spec, repeats) -> outcome``; called from several threads at once for the tests of one round."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TestResult:
    """A test that ran, with the status the judge gave it (over the band of every test so far)."""

    __test__ = False  # not a pytest test class

    index: int
    round: int
    spec: TestSpec
    outcome: TestOutcome
    status: TestStatus = "ok"
    judged: bool = True
    """False while no reference exists to compare this test with (the first group test without an expectation)."""

    @property
    def median_gbps(self) -> float | None:
        samples = sorted(self.outcome.busbw_gbps)
        if not samples:
            return None
        mid = len(samples) // 2
        return samples[mid] if len(samples) % 2 else (samples[mid - 1] + samples[mid]) / 2

    @property
    def bad(self) -> bool:
        return self.status != "ok"

    @property
    def point_id(self) -> str:
        rail = "all" if self.spec.rail is None else f"r{self.spec.rail}"
        return f"t{self.index:03d}-{self.spec.kind}-{rail}"

    def to_dict(self) -> dict[str, Any]:
        times = sorted(self.outcome.time_us)
        return {"round": self.round, "kind": self.spec.kind, "nodes": list(self.spec.nodes), "rail": self.spec.rail,
                "status": self.status, "busbw_gbps": self.median_gbps,
                "time_us": times[len(times) // 2] if times else None, "repeats": len(self.outcome.busbw_gbps),
                "point_id": self.point_id, "samples_gbps": list(self.outcome.busbw_gbps),
                "detail": self.outcome.detail or None}


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspect:
    node: str
    rail: int | None
    """The rail at fault, or ``None``: the node itself (every rail, or the intra-node path)."""
    kind: SuspectKind
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "rail": self.rail, "kind": self.kind, "evidence": self.evidence}


@dataclass(frozen=True, slots=True, kw_only=True)
class LocateConfig:
    """How locate judges and how far it searches."""

    repeats: int = 3
    """Measurements per test (at least 3: the band's MAD needs them)."""
    k_mad: float = 3.0
    """A test is slow below ``median x exp(-k_mad x MAD)`` of the healthy band (MAD of log busbw) ..."""
    min_gap: float = 0.3
    """... and below ``(1 - min_gap) x median``: noise alone never makes a test slow."""
    expect_busbw_gbps: float | None = None
    """The busbw a healthy inter-node test reaches (the user's or the fabric's figure); without it the
    reference is learned from the tests themselves, which costs one round when nothing is wrong."""
    rails: int = 1
    """1: tests use every rail together; R > 1: each rail is searched alone (rail 0 .. R-1)."""
    max_rounds: int | None = None
    """Stop after this many rounds (default: 2 x ceil(log2 N) + 6 per rail); what is left is listed as unresolved."""
    leaf_of: dict[str, str] = field(default_factory=dict)
    """Node -> leaf switch, when the topology tells it: bisection keeps nodes of one leaf together."""

    def __post_init__(self) -> None:
        if not isinstance(self.repeats, int) or self.repeats < 3:
            raise ConfigError(f"repeats={self.repeats!r} is invalid; valid: an integer >= 3 (the noise band needs 3)")
        if not self.k_mad > 0:
            raise ConfigError(f"k_mad={self.k_mad!r} is invalid; valid: a number > 0")
        if not 0 < self.min_gap < 1:
            raise ConfigError(f"min_gap={self.min_gap!r} is invalid; valid: 0 < min_gap < 1")
        if self.expect_busbw_gbps is not None and not self.expect_busbw_gbps > 0:
            raise ConfigError(f"expect_busbw_gbps={self.expect_busbw_gbps!r} is invalid; valid: GB/s > 0")
        if not isinstance(self.rails, int) or not 1 <= self.rails <= 64:
            raise ConfigError(f"rails={self.rails!r} is invalid; valid: 1..64")
        if self.max_rounds is not None and self.max_rounds < 2:
            raise ConfigError(f"max_rounds={self.max_rounds!r} is invalid; valid: >= 2 or None")


@dataclass(frozen=True, slots=True, kw_only=True)
class LocateResult:
    nodes: tuple[str, ...]
    rails: int
    tests: tuple[TestResult, ...]
    suspects: tuple[Suspect, ...]
    unresolved: tuple[str, ...]
    """What could not be decided, each with what to rerun (never a node named without evidence)."""
    baseline_busbw_gbps: float | None
    rounds: int
    elapsed_s: float

    @property
    def exclude(self) -> str:
        """The suspects as ``srun``/``sbatch --exclude=`` takes them: ``node3,node7`` (in allocation order)."""
        return ",".join(sorted({s.node for s in self.suspects}, key=self.nodes.index))

    def to_dict(self, *, engine: str, size_bytes: int) -> dict[str, Any]:
        """The ``locate --json`` document (DESIGN.md), plus ``unresolved``."""
        return {"nodes": list(self.nodes), "rails": self.rails, "engine": engine, "size_bytes": size_bytes,
                "tests": [t.to_dict() for t in self.tests], "baseline_busbw_gbps": self.baseline_busbw_gbps,
                "suspects": [s.to_dict() for s in self.suspects], "exclude": self.exclude,
                "unresolved": list(self.unresolved), "rounds": self.rounds, "elapsed_s": round(self.elapsed_s, 3)}
