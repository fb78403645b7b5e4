"""Locate's text output: the engine and why, the rounds and tests, the suspects with their evidence, what to run
next; and the steps a ``--dry-run`` would launch (pure)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from collscope.locate.model import LocateResult
from collscope.locate.nodelist import format_nodelist
from collscope.locate.steps import PlannedStep
from collscope.units import format_size

__all__ = ["render_text", "render_steps", "drain_argv", "drain_reason", "shell_line"]


def drain_reason(result: LocateResult) -> str:
    parts = []
    for s in result.suspects:
        where = "" if s.rail is None else f" rail {s.rail}"
        parts.append(f"{s.node}{where} {s.kind}")
    return "collscope locate: " + ", ".join(parts)


def drain_argv(result: LocateResult) -> list[str] | None:
    """``scontrol update nodename=... state=drain reason=...`` for the suspects, or ``None`` without any."""
    if not result.suspects:
        return None
    return ["scontrol", "update", f"nodename={result.exclude}", "state=drain", f"reason={drain_reason(result)}"]


_PLAIN_IN_DOUBLE_QUOTES = re.compile(r'[^"$`\\!]*')


def _shell_word(arg: str) -> str:
    """``arg`` for a shell command line: ``name="value with spaces"`` as people write scontrol's options, where
    double quotes keep the value as it is (no ``"``, ``$``, backquote, backslash or ``!`` in it); otherwise
    :func:`shlex.quote`'s single quotes."""
    name, eq, value = arg.partition("=")
    if eq and name.isidentifier() and shlex.quote(arg) != arg and _PLAIN_IN_DOUBLE_QUOTES.fullmatch(value):
        return f'{name}="{value}"'
    return shlex.quote(arg)


def shell_line(argv: list[str]) -> str:
    """The command line of ``argv`` as a user would type it into a shell (each word quoted as :func:`_shell_word`)."""
    return " ".join(map(_shell_word, argv))


def _busbw(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _rails(rails: int) -> str:
    return "every rail together" if rails == 1 else f"{rails} rails one by one"


def render_text(result: LocateResult, *, engine: str, size_bytes: int, engine_reason: str | None = None) -> str:
    """The result as text; ``engine_reason`` (why this engine) is shown under the title when given."""
    lines = [f"# collscope locate: {len(result.nodes)} nodes ({format_nodelist(result.nodes)}), "
             f"{_rails(result.rails)}, engine {engine}, all_reduce {format_size(size_bytes)}"]
    if engine_reason:
        lines.append(f"# engine {engine_reason}")
    lines.append(f"{'round':>5}  {'kind':<6} {'rail':>4}  {'busbw_GB/s':>10}  {'status':<8} nodes")
    for t in result.tests:
        d = t.to_dict()
        rail = "-" if t.spec.kind == "node" else "all" if t.spec.rail is None else str(t.spec.rail)
        status = t.status if t.judged else "ok?"
        lines.append(f"{t.round:>5}  {t.spec.kind:<6} {rail:>4}  {_busbw(d['busbw_gbps']):>10}  {status:<8} "
                     f"{format_nodelist(t.spec.nodes)}")
    base = "none (no reference)" if result.baseline_busbw_gbps is None else f"{result.baseline_busbw_gbps:.3g} GB/s"
    lines.append(f"# {result.rounds} rounds, {len(result.tests)} tests, {result.elapsed_s:.1f} s; "
                 f"inter-node baseline {base}")
    if result.suspects:
        lines.append("")
        lines.append("suspects:")
        for s in result.suspects:
            where = "" if s.rail is None else f", rail {s.rail}"
            lines.append(f"  {s.node}{where}: {s.kind}. {s.evidence}")
        lines.append("")
        lines.append(f"exclude: --exclude={result.exclude}")
        argv = drain_argv(result)
        assert argv is not None
        lines.append(f"drain:   {shell_line(argv)}")
    else:
        lines.append("")
        lines.append("no suspects: every node and rail tested is within the healthy band"
                     if not result.unresolved else "no node proven at fault")
    if result.unresolved:
        lines.append("")
        lines.append("unresolved:")
        lines.extend(f"  {note}" for note in result.unresolved)
    return "\n".join(lines) + "\n"


def render_steps(steps: Sequence[PlannedStep], *, nodes: Sequence[str], rails: int, engine_reason: str) -> str:
    """What ``locate --dry-run`` prints: the engine and why, then each step of the first rounds as a shell line
    (the variables locate adds to srun's environment, then srun's command line)."""
    lines = [f"# collscope locate --dry-run: {len(nodes)} nodes ({format_nodelist(nodes)}), {_rails(rails)}",
             f"# engine {engine_reason}"]
    for step in steps:
        rail = "" if step.spec.rail is None else f" rail {step.spec.rail}"
        lines.append(f"# round {step.round}: {step.spec.kind} {format_nodelist(step.spec.nodes)}{rail}")
        lines.append(shell_line([*(f"{name}={value}" for name, value in step.env.items()), *step.argv]))
    lines.append("# later rounds (halves, pairs against known-good nodes) run steps of the same form on the nodes "
                 "these results point to")
    return "\n".join(lines) + "\n"
