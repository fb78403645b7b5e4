"""The planner: the next round of tests on one rail, from the judge's view (pure).

One round is a set of tests on disjoint nodes, run at the same time. Given the candidates (nodes in bad or
unjudged tests, neither cleared nor proven) and the cleared nodes of a rail:

- enough cleared nodes for every candidate: each candidate is paired with its own cleared node (a fresh pair
  where one exists). One slow node is then proven in that round: its bad group (whose other nodes the pairs
  clear) and its bad pair are two tests against known-good nodes.
- otherwise bisection: the candidates of each bad test are split in halves (nodes under one leaf switch kept
  together when the topology tells the leaves), each half tested as a group; halves too small to split are
  paired with cleared nodes, else with candidates of other bad tests (a pairing not tried before).

A test already run (same nodes, same rail) is never planned again; an empty plan means nothing more can be
learned on this rail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collscope.locate.judge import Assessment
from collscope.locate.model import TestResult, TestSpec

__all__ = ["first_round", "group_round", "next_round", "split_halves"]


def first_round(nodes: Sequence[str]) -> list[TestSpec]:
    """Every node alone (its intra-node path), all at once: broken nodes are caught before they poison pairs."""
    return [TestSpec(kind="node", nodes=(n,)) for n in nodes]


def group_round(nodes: Sequence[str], rail: int | None) -> list[TestSpec]:
    """One test of all (healthy) nodes on ``rail``."""
    return [TestSpec(kind="group", nodes=tuple(nodes), rail=rail)] if len(nodes) >= 2 else []


def split_halves(nodes: Sequence[str], leaf_of: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Two halves of ``nodes`` (sizes differ by at most one), cutting between leaf switches where possible."""
    ordered = sorted(nodes, key=lambda n: (leaf_of.get(n, ""), nodes.index(n))) if leaf_of else list(nodes)
    half = len(ordered) // 2
    if leaf_of:
        # Move the cut to the nearest leaf boundary when that keeps both halves within a quarter of the size.
        boundaries = [i for i in range(1, len(ordered)) if leaf_of.get(ordered[i]) != leaf_of.get(ordered[i - 1])]
        near = [b for b in boundaries if abs(b - half) <= max(1, len(ordered) // 4)]
        if near:
            half = min(near, key=lambda b: abs(b - half))
    return ordered[:half], ordered[half:]


def _tightest(node: str, tests: Sequence[TestResult], uncleared: set[str]) -> int:
    """The bad or unjudged test holding ``node`` with the fewest uncleared nodes (the latest on a tie)."""
    holding = [t for t in tests if node in t.spec.nodes and (t.bad or not t.judged)]
    best = min(holding, key=lambda t: (sum(n in uncleared for n in t.spec.nodes), -t.index))
    return best.index


def next_round(assessment: Assessment, rail: int | None, *, usable: Sequence[str],
               leaf_of: Mapping[str, str] | None = None) -> list[TestSpec]:
    """The tests of the next round on ``rail``; ``usable`` are the nodes that may take part (in order)."""
    leaf_of = leaf_of or {}
    candidates = [n for n in usable if n in assessment.candidates.get(rail, [])]
    if not candidates:
        return []
    good = [n for n in usable if n in assessment.cleared.get(rail, set())]
    tests = [t for t in assessment.results if t.spec.kind != "node" and t.spec.rail == rail]
    done = {t.spec.key for t in tests}
    used: set[str] = set()
    plan: list[TestSpec] = []

    def add(nodes: Sequence[str]) -> bool:
        spec = TestSpec(kind="pair" if len(nodes) == 2 else "group", nodes=tuple(nodes), rail=rail)
        if spec.key in done or used & set(nodes):
            return False
        plan.append(spec)
        used.update(nodes)
        done.add(spec.key)
        return True

    def partner(node: str) -> str | None:
        free = [g for g in good if g not in used]
        fresh = [g for g in free if frozenset((node, g)) not in {k[0] for k in done}]
        pick = fresh or free
        return pick[0] if pick else None

    if len(good) >= len(candidates):
        for node in candidates:
            g = partner(node)
            if g is not None:
                add((node, g))
        return plan

    uncleared = set(candidates)
    sets: dict[int, list[str]] = {}
    for node in candidates:
        sets.setdefault(_tightest(node, tests, uncleared), []).append(node)
    loose: list[str] = []
    for members in sets.values():
        if len(members) >= 4:
            for half in split_halves(members, leaf_of):
                if not add(half):
                    loose.extend(half)
            continue
        rest = []
        for node in members:
            g = partner(node)
            if g is None or not add((node, g)):
                rest.append(node)
        if len(rest) >= 2 and add(rest):
            continue
        loose.extend(rest)
    # Candidates that could not be tested within their own set: pair them across sets, a pairing not tried yet.
    loose = [n for n in loose if n not in used]
    while loose:
        node = loose.pop(0)
        for other in loose:
            if add((node, other)):
                loose.remove(other)
                break
    return plan
