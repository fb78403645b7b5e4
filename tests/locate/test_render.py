"""The text output: the table of rounds, suspects, exclude and drain lines, unresolved notes."""

from __future__ import annotations

from collscope.locate.model import LocateConfig
from collscope.locate.render import drain_argv, render_text
from collscope.locate.search import locate
from collscope.locate.simulate import SimFabric


def test_text_names_the_suspects_and_what_to_run():
    fabric = SimFabric(nodes=[f"n{i}" for i in range(1, 9)], slow={("n7", None): 0.05}, broken={"n2"})
    result = locate(fabric.nodes, fabric)
    text = render_text(result, engine="mpi", size_bytes=1 << 24)
    lines = text.splitlines()
    assert lines[0].startswith("# collscope locate: 8 nodes (n[1-8]), every rail together, engine mpi")
    assert any(line.split()[:2] == ["1", "node"] and line.endswith(" n2") and "failed" in line for line in lines)
    assert "  n2: broken. alone on the node: node n2 failed: exit code 1 (round 1)" in lines
    assert "exclude: --exclude=n2,n7" in lines
    assert drain_argv(result) == ["scontrol", "update", "nodename=n2,n7", "state=drain",
                                  "reason=collscope locate: n2 broken, n7 slow"]


def test_unresolved_is_said_with_a_rerun():
    class LinkFault(SimFabric):
        def _test_gbps(self, spec):
            gbps = super()._test_gbps(spec)
            return gbps * 0.05 if {"n1", "n2"} <= set(spec.nodes) else gbps

    fabric = LinkFault(nodes=[f"n{i}" for i in range(1, 5)])
    result = locate(fabric.nodes, fabric, LocateConfig(expect_busbw_gbps=40))
    text = render_text(result, engine="mpi", size_bytes=1 << 24)
    assert "no node proven at fault" in text
    assert "rerun: collscope locate --nodes n1,n2" in text
    assert drain_argv(result) is None


def test_shell_lines_quote_as_people_type_them_and_survive_a_shell():
    import shlex

    from collscope.locate.render import shell_line

    argv = ["scontrol", "update", "nodename=n2,n7", "state=drain", "reason=collscope locate: n2 broken, n7 slow"]
    line = shell_line(argv)
    assert line == 'scontrol update nodename=n2,n7 state=drain reason="collscope locate: n2 broken, n7 slow"'
    assert shlex.split(line) == argv
    odd = ["x", "reason=it's $HOME", "two words", 'a="b"']  # what double quotes would change: single quotes
    assert shlex.split(shell_line(odd)) == odd
    assert shell_line(odd).startswith("x 'reason=it'")
