"""Arbitrary or damaged text through detection, the model and the JSON renderer: a result or a ParseError."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collscope.errors import ParseError
from collscope.topo.detect import add_capture
from collscope.topo.node import NodeCaptures, build_node
from collscope.topo.render import node_summary_text, node_to_json
from collscope.topo.samples import sample_path

SAMPLE_TEXTS = [p.read_text() for p in sorted(sample_path().iterdir()) if p.suffix in (".txt", ".csv")]
FIXTURE_TEXTS = [p.read_text() for p in sorted((Path(__file__).parents[1] / "fixtures").rglob("*"))
                 if p.is_file()]


def _pipeline(text: str) -> None:
    captures = NodeCaptures(host="fuzz")
    try:
        add_capture(captures, text, "fuzz.txt")
    except ParseError as exc:
        assert str(exc).startswith("fuzz.txt")
        return
    node = build_node(captures)
    node_to_json(node)
    node_summary_text(node)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_arbitrary_text(text: str) -> None:
    _pipeline(text)


@st.composite
def damaged(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SAMPLE_TEXTS + FIXTURE_TEXTS))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "dup", "cut", "tabs", "junk"]))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif op == "tabs":
            lines[i] = lines[i].replace("\t", "  ")
        else:
            lines[i] = draw(st.text(max_size=30)) + "\n"
    return "".join(lines)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_real_format_text(text: str) -> None:
    _pipeline(text)
