"""The search: node tests, a group test per rail, then rounds planned from the judge until nothing is left.

:func:`locate` drives a :data:`~collscope.locate.model.Runner` (the real one launches Slurm job steps, the tests'
one simulates a fabric) and returns a :class:`~collscope.locate.model.LocateResult`. The tests of one round run
at the same time, one thread each (they are on disjoint nodes); a round ends when its slowest test ends. When
every test of a round (two or more) failed to launch the same way (:mod:`collscope.locate.launch`: the allocation
forbids the step, a missing program, PMIx), the search stops with
:class:`~collscope.locate.launch.LaunchFailedEverywhere` and names no node.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from collscope.errors import ConfigError
from collscope.locate.judge import Assessment, assess
from collscope.locate.launch import LaunchFailedEverywhere, same_launch_failure
from collscope.locate.model import LocateConfig, LocateResult, Runner, Suspect, SuspectKind, TestResult, TestSpec
from collscope.locate.plan import first_round, group_round, next_round

__all__ = ["locate", "default_max_rounds"]

log = logging.getLogger(__name__)

RoundHook = Callable[[int, Sequence[TestResult]], None]


def default_max_rounds(nnodes: int, rails: int) -> int:
    """The round budget: the node round, then per rail 2 x ceil(log2 N) + 4 (bisection, pairs, cross pairs)."""
    return 1 + rails * (2 * math.ceil(math.log2(max(nnodes, 2))) + 4)


def _check_nodes(nodes: Sequence[str]) -> tuple[str, ...]:
    out = tuple(nodes)
    if len(set(out)) != len(out):
        raise ConfigError(f"nodes {list(out)} list a node twice")
    if len(out) < 2:
        raise ConfigError(f"locate needs at least 2 nodes, got {list(out)}: one node has no network to test "
                          "(run collscope bench on it)")
    return out


def _run_round(runner: Runner, specs: Sequence[TestSpec], repeats: int, round_no: int,
               start_index: int) -> list[TestResult]:
    with ThreadPoolExecutor(max_workers=max(1, len(specs)), thread_name_prefix=f"locate-r{round_no}") as pool:
        outcomes = list(pool.map(lambda spec: runner(spec, repeats), specs))
    return [TestResult(index=start_index + i, round=round_no, spec=spec, outcome=outcome)
            for i, (spec, outcome) in enumerate(zip(specs, outcomes, strict=True))]


def _merge_rails(a: Assessment, scopes: Sequence[int | None], rails: int) -> list[Suspect]:
    """Node suspects, then per-rail suspects; a node proven bad on every rail becomes one node-level suspect."""
    out = list(a.node_suspects.values())
    per_node: dict[str, list[Suspect]] = {}
    for scope in scopes:
        for s in a.suspects.get(scope, {}).values():
            per_node.setdefault(s.node, []).append(s)
    for node, found in per_node.items():
        if node in a.node_suspects:
            continue
        if rails > 1 and len(found) == rails:
            kinds = {s.kind for s in found}
            kind: SuspectKind = ("broken" if "broken" in kinds else "unreachable" if "unreachable" in kinds
                                 else "slow")
            out.append(Suspect(node=node, rail=None, kind=kind,
                               evidence="bad on every rail: " + " | ".join(s.evidence for s in found)))
        else:
            out.extend(found)
    return out


def _leftovers(a: Assessment, scopes: Sequence[int | None], usable: Sequence[str]) -> list[str]:
    notes = list(a.unresolved)
    for scope in scopes:
        left = [n for n in a.candidates.get(scope, []) if n in usable]
        if left:
            rail = "" if scope is None else f" --rails {scope + 1} (rail {scope})"
            notes.append(f"not proven either way{rail}: {', '.join(left)} (bad tests, too few good nodes to "
                         f"tell which); rerun: collscope locate --nodes {','.join(usable)}{rail} --repeats 5")
        if a.net_band(scope) is None and any(t.spec.kind != "node" and t.spec.rail == scope for t in a.results):
            notes.append("no reference to judge the inter-node tests by (every test alike, or only one): give "
                         "--expect-busbw with the busbw a healthy group reaches")
    return notes


def locate(nodes: Sequence[str], runner: Runner, config: LocateConfig | None = None, *,
           on_round: RoundHook | None = None, clock: Callable[[], float] = time.monotonic) -> LocateResult:
    """Find the slow or broken nodes (and rails) among ``nodes`` with ``runner``; see the package docstring."""
    config = config or LocateConfig()
    all_nodes = _check_nodes(nodes)
    max_rounds = config.max_rounds or default_max_rounds(len(all_nodes), config.rails)
    scopes: list[int | None] = [None] if config.rails == 1 else list(range(config.rails))
    start = clock()
    results: list[TestResult] = []
    round_no = 0

    def run(specs: Sequence[TestSpec]) -> Assessment:
        nonlocal round_no
        round_no += 1
        got = _run_round(runner, specs, config.repeats, round_no, len(results))
        results.extend(got)
        launch = same_launch_failure(got)
        a = assess(results, config)
        if on_round is not None:
            on_round(round_no, a.results[-len(got):])
        log.info("round %d: %s", round_no, ", ".join(f"{r.spec.kind} {'+'.join(r.spec.nodes)} {r.status}"
                                                      for r in a.results[-len(got):]))
        if launch is not None:  # the launch cannot work anywhere: a usage or environment error, no node at fault
            raise LaunchFailedEverywhere(launch, got)
        return a

    a = run(first_round(all_nodes))
    usable = [n for n in all_nodes if n not in a.node_suspects]
    for scope in scopes:
        if len(usable) >= 2 and round_no < max_rounds:
            a = run(group_round(usable, scope))
    progress = True
    while progress and round_no < max_rounds and len(usable) >= 2:
        progress = False
        for scope in scopes:
            while round_no < max_rounds:
                specs = next_round(a, scope, usable=[n for n in usable if n not in a.suspects.get(scope, {})],
                                   leaf_of=config.leaf_of)
                if not specs:
                    break
                a = run(specs)
                progress = True
    notes = _leftovers(a, scopes, usable)
    if len(usable) < 2:
        notes.append(f"fewer than 2 nodes passed their node test ({', '.join(usable) or 'none'}): no inter-node "
                     "test was possible")
    if round_no >= max_rounds and any(a.candidates.get(s) for s in scopes):
        notes.append(f"stopped at the round budget ({max_rounds}); rerun with the nodes still open")
    net_band = next((a.net_band(s) for s in scopes if a.net_band(s) is not None), None)
    return LocateResult(nodes=all_nodes, rails=config.rails, tests=a.results,
                        suspects=tuple(_merge_rails(a, scopes, config.rails)), unresolved=tuple(notes),
                        baseline_busbw_gbps=None if net_band is None else round(net_band.median_gbps, 6),
                        rounds=round_no, elapsed_s=clock() - start)

