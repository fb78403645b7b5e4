"""locate over a simulated fabric: rounds, suspects, never a healthy node named."""

from __future__ import annotations

import math
import random

import pytest

from collscope.errors import ConfigError
from collscope.locate.model import LocateConfig, TestOutcome
from collscope.locate.search import locate
from collscope.locate.simulate import SimFabric


def _nodes(n: int) -> list[str]:
    return [f"node{i}" for i in range(1, n + 1)]


def _named(result):
    return {(s.node, s.rail, s.kind) for s in result.suspects}


def test_no_fault_stops_after_the_group_and_its_halves():
    fabric = SimFabric(nodes=_nodes(8))
    result = locate(fabric.nodes, fabric)
    assert result.suspects == () and result.exclude == ""
    assert [t.spec.kind for t in result.tests if t.round == 2] == ["group"]
    assert result.rounds == 3  # node round, group, halves (the reference the group is judged by)
    assert all(t.status == "ok" for t in result.tests)
    assert result.unresolved == ()


def test_no_fault_with_an_expectation_stops_after_the_group():
    fabric = SimFabric(nodes=_nodes(8))
    result = locate(fabric.nodes, fabric, LocateConfig(expect_busbw_gbps=40.0))
    assert result.suspects == () and result.rounds == 2
    assert result.tests[-1].spec.kind == "group" and result.tests[-1].status == "ok"


@pytest.mark.parametrize("n", [3, 4, 5, 8, 13, 16, 32, 64])
@pytest.mark.parametrize("expect", [None, 40.0])
def test_one_slow_node_in_log2_rounds(n, expect):
    rng = random.Random(n)
    # 3 nodes: pairs always share a node, so one pair per round; all pairs (5 rounds) in the worst case.
    budget = 5 if n == 3 else math.ceil(math.log2(n)) + 2
    for trial in range(3):
        bad = rng.choice(_nodes(n))
        fabric = SimFabric(nodes=_nodes(n), slow={(bad, None): 0.05}, seed=trial)
        result = locate(fabric.nodes, fabric, LocateConfig(expect_busbw_gbps=expect))
        assert _named(result) == {(bad, None, "slow")}, result.unresolved
        assert result.exclude == bad
        assert result.rounds <= budget
        suspect = result.suspects[0]
        assert "good" in suspect.evidence and "GB/s" in suspect.evidence


def test_a_mildly_slow_node_is_found_and_noise_alone_names_nobody():
    fabric = SimFabric(nodes=_nodes(16), slow={("node11", None): 0.6}, noise=0.05, seed=3)
    assert _named(locate(fabric.nodes, fabric)) == {("node11", None, "slow")}
    for seed in range(20):
        quiet = SimFabric(nodes=_nodes(16), noise=0.08, seed=seed)
        assert locate(quiet.nodes, quiet).suspects == ()


def test_two_slow_nodes_both_named():
    for n, pair in [(4, ("node1", "node2")), (4, ("node1", "node3")), (8, ("node2", "node7")),
                    (16, ("node5", "node6")), (64, ("node9", "node40"))]:
        fabric = SimFabric(nodes=_nodes(n), slow={(pair[0], None): 0.05, (pair[1], None): 0.1})
        result = locate(fabric.nodes, fabric, LocateConfig(expect_busbw_gbps=40.0))
        assert _named(result) == {(pair[0], None, "slow"), (pair[1], None, "slow")}, (n, pair, result.unresolved)
        assert result.exclude.count(",") == 1 or "[" in result.exclude


def test_two_slow_nodes_in_both_halves_without_expectation_is_said_not_guessed():
    # Every group and half holds a slow node, all equally slow: nothing to compare with. Nobody is named
    # wrongly; a learned reference is found only where some test is clean.
    fabric = SimFabric(nodes=_nodes(4), slow={("node1", None): 0.05, ("node3", None): 0.05})
    result = locate(fabric.nodes, fabric)
    assert {s.node for s in result.suspects} <= {"node1", "node3"}


def test_a_dead_node_is_unreachable_and_the_others_are_still_tested():
    fabric = SimFabric(nodes=_nodes(4), dead={"node4"})
    result = locate(fabric.nodes, fabric)
    assert _named(result) == {("node4", None, "unreachable")}
    later = [t for t in result.tests if t.round > 1]
    assert later and all("node4" not in t.spec.nodes for t in later)
    assert result.tests[3].status == "timeout"


def test_a_broken_node_is_broken():
    fabric = SimFabric(nodes=_nodes(6), broken={"node2"})
    result = locate(fabric.nodes, fabric)
    assert _named(result) == {("node2", None, "broken")}
    assert "exit code 1" in result.suspects[0].evidence


def test_a_node_slow_inside_itself_is_caught_by_its_node_test():
    fabric = SimFabric(nodes=_nodes(8), slow_intra={"node5": 0.2})
    result = locate(fabric.nodes, fabric)
    assert _named(result) == {("node5", None, "slow")}
    assert "alone on the node" in result.suspects[0].evidence


@pytest.mark.parametrize(("n", "node", "rail"), [(4, "node2", 1), (4, "node3", 0), (16, "node9", 2)])
def test_one_slow_rail(n, node, rail):
    fabric = SimFabric(nodes=_nodes(n), rails=3, slow={(node, rail): 0.05})
    result = locate(fabric.nodes, fabric, LocateConfig(rails=3))
    assert _named(result) == {(node, rail, "slow")}, result.unresolved
    others = [t for t in result.tests if t.spec.rail is not None and t.spec.rail != rail]
    assert others and all(t.status == "ok" for t in others)


def test_a_node_slow_on_every_rail_is_one_node_suspect():
    fabric = SimFabric(nodes=_nodes(8), rails=2, slow={("node6", None): 0.05})
    result = locate(fabric.nodes, fabric, LocateConfig(rails=2))
    assert _named(result) == {("node6", None, "slow")}
    assert "every rail" in result.suspects[0].evidence


def test_a_bad_link_between_two_good_nodes_is_unresolved_not_blamed():
    class LinkFault(SimFabric):
        def _test_gbps(self, spec):
            gbps = super()._test_gbps(spec)
            return gbps * 0.05 if {"node1", "node2"} <= set(spec.nodes) else gbps

    fabric = LinkFault(nodes=_nodes(8))
    result = locate(fabric.nodes, fabric)
    assert result.suspects == ()
    assert any("link or switch" in note for note in result.unresolved)


@pytest.mark.parametrize("seed", range(30))
def test_never_a_healthy_node_named(seed):
    rng = random.Random(seed)
    n = rng.choice([3, 4, 6, 8, 12, 16, 33, 64])
    nodes = _nodes(n)
    rails = rng.choice([1, 2])
    bad = rng.sample(nodes, rng.choice([0, 1, 1, 2, 3]))
    slow = {(b, rng.choice([None] + list(range(rails)))): rng.choice([0.02, 0.2, 0.5]) for b in bad}
    fabric = SimFabric(nodes=nodes, rails=rails, slow=slow, noise=rng.choice([0.01, 0.05, 0.1]), seed=seed,
                       dead=set(rng.sample([x for x in nodes if x not in bad], rng.choice([0, 0, 1]))))
    result = locate(nodes, fabric, LocateConfig(rails=rails, expect_busbw_gbps=rng.choice([None, 40.0])))
    faulty = set(bad) | fabric.dead
    assert {s.node for s in result.suspects} <= faulty, (slow, result.suspects)


def test_one_node_or_repeated_nodes_are_errors():
    fabric = SimFabric(nodes=["a"])
    with pytest.raises(ConfigError, match="at least 2 nodes"):
        locate(["a"], fabric)
    with pytest.raises(ConfigError, match="twice"):
        locate(["a", "a"], fabric)
    with pytest.raises(ConfigError, match="repeats"):
        LocateConfig(repeats=2)


def test_leaves_keep_bisection_halves_together():
    leaf = {f"node{i}": ("leafA" if i in (1, 3, 5, 7) else "leafB") for i in range(1, 9)}
    fabric = SimFabric(nodes=_nodes(8), slow={("node3", None): 0.05})
    result = locate(fabric.nodes, fabric, LocateConfig(expect_busbw_gbps=40.0, leaf_of=leaf))
    halves = [set(t.spec.nodes) for t in result.tests if t.round == 3]
    assert {"node1", "node3", "node5", "node7"} in halves
    assert _named(result) == {("node3", None, "slow")}


def test_a_node_whose_network_hangs_after_its_node_test_is_unreachable():
    class NetDead(SimFabric):
        def __call__(self, spec, repeats):
            if spec.kind != "node" and "node6" in spec.nodes:
                return TestOutcome(failure="timeout", detail="no end within 30 s", duration_s=30.0)
            return super().__call__(spec, repeats)

    fabric = NetDead(nodes=_nodes(8))
    result = locate(fabric.nodes, fabric)
    assert _named(result) == {("node6", None, "unreachable")}
    assert result.rounds <= math.ceil(math.log2(8)) + 2
