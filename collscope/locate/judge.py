"""The judge: which tests are slow, which nodes are known good, which are suspects and on what evidence (pure).

Band. Tests are compared within a class: node tests (the intra-node path) with node tests; inter-node tests on
every rail together with each other; single-rail tests with each other (rails are alike). Faults only ever
slow a collective down, so the reference is the fastest level seen: the healthy tests are those whose median
busbw is within ``min_gap`` of the best test's, and the band is the median and MAD (scaled to a standard
deviation) of every repeat of those tests. With ``expect_busbw_gbps`` the band's median is that figure instead
(an absolute reference) and its MAD the repeats' spread around their own test's median. A class has a band
once no node is in every one of its tests (so one bad node cannot be the reference), or with an expectation;
until then its tests are *unjudged*.

A test is ``slow`` when its median busbw is below ``median x exp(-k_mad x MAD)`` (MAD of log busbw: noise
is relative) AND below ``(1 - min_gap) x median``;
``failed`` / ``timeout`` when it produced no samples.

Evidence. A node is *cleared* on a rail when it took part in an inter-node test on that rail that was ok.
A node is a suspect only with proof that needs no guessing: its node test failed or was slow (it ran alone),
or two bad inter-node tests of one rail in which every other node is cleared on that rail. Anything else
that is bad stays a *candidate* for the planner, or, when nothing more can be tested, *unresolved* with what
to rerun: locate never names a node that was not proven at fault.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from collscope.locate.model import LocateConfig, Suspect, SuspectKind, TestResult, TestStatus
from collscope.locate.nodelist import format_nodelist

__all__ = ["Band", "Assessment", "band_of", "assess", "test_class", "MAD_TO_SIGMA"]

MAD_TO_SIGMA = 1.4826
"""MAD x this estimates the standard deviation of normal noise."""

Scope = int | None
Class = tuple[str, bool]


def test_class(result: TestResult) -> Class:
    """``("node", True)`` for node tests; ``("net", rail is None)`` for inter-node tests."""
    if result.spec.kind == "node":
        return "node", True
    return "net", result.spec.rail is None


@dataclass(frozen=True, slots=True)
class Band:
    median_gbps: float
    mad_log: float
    """MAD of log(busbw) over the healthy repeats (scaled to a standard deviation): the relative noise."""
    samples: int
    absolute: bool
    """True when the median is the user's expectation, not learned from the tests."""

    def slow(self, median_gbps: float, config: LocateConfig) -> bool:
        # Bandwidth noise is multiplicative: the MAD is of log(busbw), so k MADs is a factor, never below 0.
        floor = self.median_gbps * math.exp(-config.k_mad * self.mad_log)
        return median_gbps < floor and median_gbps < (1 - config.min_gap) * self.median_gbps

    def describe(self) -> str:
        source = "expected" if self.absolute else f"median of {self.samples} healthy repeats"
        return f"{self.median_gbps:.3g} GB/s +- {100 * self.mad_log:.2g}% ({source})"


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def band_of(results: Sequence[TestResult], config: LocateConfig, *, node_class: bool = False) -> Band | None:
    """The healthy band of one class of tests, or ``None`` while there is no reference yet."""
    measured = [r for r in results if r.outcome.busbw_gbps]
    if config.expect_busbw_gbps is not None and not node_class:
        spread = [abs(math.log(s / (r.median_gbps or 1.0))) for r in measured for s in r.outcome.busbw_gbps if s > 0]
        mad = MAD_TO_SIGMA * _median(spread) if spread else 0.0
        return Band(config.expect_busbw_gbps, mad, len(spread), absolute=True)
    common = set.intersection(*(set(r.spec.nodes) for r in measured)) if measured else {""}
    if len(measured) < 2 or common:
        return None  # some node is in every test: its fault would be the reference
    top = max(r.median_gbps or 0.0 for r in measured)
    healthy = [s for r in measured if (r.median_gbps or 0.0) >= (1 - config.min_gap) * top
               for s in r.outcome.busbw_gbps]
    center = _median(healthy)
    mad = MAD_TO_SIGMA * _median([abs(math.log(s / center)) for s in healthy if s > 0])
    return Band(center, mad, len(healthy), absolute=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Assessment:
    """The judge's view of every test so far."""

    results: tuple[TestResult, ...]
    """The tests, re-judged over the current bands."""
    bands: dict[Class, Band]
    node_suspects: dict[str, Suspect]
    """Nodes whose own node test was bad: left out of every inter-node test."""
    cleared: dict[Scope, set[str]]
    suspects: dict[Scope, dict[str, Suspect]]
    candidates: dict[Scope, list[str]]
    """Nodes in bad (or unjudged) inter-node tests, neither cleared nor proven: what to test next."""
    unresolved: list[str] = field(default_factory=list)

    def net_band(self, scope: Scope) -> Band | None:
        return self.bands.get(("net", scope is None))


def _status(result: TestResult, band: Band | None, config: LocateConfig) -> tuple[TestStatus, bool]:
    failure = result.outcome.failure
    if failure is not None:
        return failure, True
    if band is None:
        return "ok", False
    median = result.median_gbps
    assert median is not None  # outcomes without failure carry samples
    return ("slow" if band.slow(median, config) else "ok"), True


def _suspect_kind(tests: Sequence[TestResult]) -> SuspectKind:
    statuses = {t.status for t in tests}
    if "failed" in statuses:
        return "broken"
    if "timeout" in statuses:
        return "unreachable"
    return "slow"


def _show(result: TestResult) -> str:
    what = f"{result.spec.kind} {format_nodelist(result.spec.nodes)}"
    if result.spec.rail is not None:
        what += f" rail {result.spec.rail}"
    if result.outcome.failure is not None:
        detail = f": {result.outcome.detail}" if result.outcome.detail else ""
        return f"{what} {result.outcome.failure}{detail} (round {result.round})"
    return f"{what} {result.median_gbps:.3g} GB/s (round {result.round})"


def _others(result: TestResult, node: str) -> str:
    others = [m for m in result.spec.nodes if m != node]
    return f"{format_nodelist(others)} good" if len(others) <= 3 else f"the other {len(others)} good"


def assess(results: Sequence[TestResult], config: LocateConfig) -> Assessment:
    """Judge every test over the bands of all tests so far; cleared nodes, suspects and candidates per rail."""
    by_class: dict[Class, list[TestResult]] = {}
    for r in results:
        by_class.setdefault(test_class(r), []).append(r)
    bands: dict[Class, Band] = {}
    for cls, members in by_class.items():
        band = band_of(members, config, node_class=cls[0] == "node")
        if band is not None:
            bands[cls] = band
    judged = []
    for r in results:
        status, is_judged = _status(r, bands.get(test_class(r)), config)
        judged.append(replace(r, status=status, judged=is_judged))

    node_suspects: dict[str, Suspect] = {}
    for r in judged:
        if r.spec.kind == "node" and r.bad:
            node = r.spec.nodes[0]
            band = bands.get(("node", True))
            why = f"; node tests' band {band.describe()}" if band is not None and r.status == "slow" else ""
            node_suspects[node] = Suspect(node=node, rail=None, kind=_suspect_kind([r]),
                                          evidence=f"alone on the node: {_show(r)}{why}")

    cleared: dict[Scope, set[str]] = {}
    suspects: dict[Scope, dict[str, Suspect]] = {}
    candidates: dict[Scope, list[str]] = {}
    unresolved: list[str] = []
    scopes = sorted({r.spec.rail for r in judged if r.spec.kind != "node"}, key=lambda s: -1 if s is None else s)
    for scope in scopes:
        net = [r for r in judged if r.spec.kind != "node" and r.spec.rail == scope]
        ok_nodes = {n for r in net if r.judged and not r.bad for n in r.spec.nodes}
        cleared[scope] = ok_nodes
        proven: dict[str, Suspect] = {}
        open_nodes: list[str] = []
        band = bands.get(("net", scope is None))
        for r in net:
            if not (r.bad or not r.judged):
                continue
            uncleared = [n for n in r.spec.nodes if n not in ok_nodes and n not in node_suspects]
            if r.bad and not uncleared:
                unresolved.append(f"{_show(r)} is bad although every node in it passed other tests: a link or "
                                  f"switch between them? rerun: collscope locate --nodes {','.join(r.spec.nodes)}"
                                  + (f" --rails {scope + 1}" if scope is not None else ""))
            open_nodes.extend(n for n in uncleared if n not in open_nodes)
        for node in open_nodes:
            clean = [r for r in net if r.bad and node in r.spec.nodes
                     and all(m in ok_nodes for m in r.spec.nodes if m != node)]
            if len(clean) >= 2:
                rail = "" if scope is None else f" on rail {scope}"
                tightest = sorted(clean, key=lambda t: len(t.spec.nodes))
                shown = "; ".join(f"{_show(r)}, {_others(r, node)}" for r in tightest)
                tail = f"; band {band.describe()}" if band is not None else ""
                proven[node] = Suspect(node=node, rail=scope, kind=_suspect_kind(clean),
                                       evidence=f"bad{rail} in {len(clean)} tests whose other nodes are good: "
                                                f"{shown}{tail}")
        suspects[scope] = proven
        candidates[scope] = [n for n in open_nodes if n not in proven]
    return Assessment(results=tuple(judged), bands=bands, node_suspects=node_suspects, cleared=cleared,
                      suspects=suspects, candidates=candidates, unresolved=unresolved)
