"""Every hint a command can print names an option that command has (issue 23 item 3).

What the static test scans, per command of ``collscope.cli.COMMANDS``:

* the command's module and the ``collscope`` modules it imports (``import``/``from ... import`` anywhere in the
  module, function-level lazy imports included; ``from package import name`` that names a submodule counts):
  the library the command calls;
* in those modules, every string literal that is not a docstring (f-strings: their literal parts, ``{}`` for
  the values; strings Python joins, like ``"pass " "--x"``, as one), for a hint: ``pass``, ``use``, ``add``,
  ``give``, ``try``, ``run with``, ``rerun with`` or ``with`` followed by ``--option`` (a backtick allowed), and
  every ``--option`` after it in the same clause (``pass --topo PATH, --gpu NAME or --alpha-us A``).

Each option found must be an option of the command (``ctx.command.params``; for a group such as ``sweep`` or
``topo``, of any of its subcommands).

Known limits, on purpose or not:

* One level of imports: the modules the command imports itself. The modules those import are shared by many
  commands and hold hints for the commands that reach them on some inputs; following every import reports hints
  a command imports but never prints (``topo/capture.py``'s ``--from`` is for live captures, which ``analyze
  --topo`` never makes). Hints deeper down are covered where a test runs the command (the dynamic test below).
* ``--x=value`` after a hint verb is another program's flag (srun's ``--gpu-bind=none``): collscope's hints write
  ``--x VALUE``, so those are skipped. A hint that names its command (```collscope sweep run --repeats 3```)
  has no hint verb before the option and is not checked against that command.
* A hint whose option is built at run time (``Geometry.lines``: ``pass {option} N`` from
  :data:`collscope.geometry.OVERRIDE_OPTIONS`) is not a literal: the dynamic test runs ``analyze`` on an input
  whose nodes and NVLink domain are unknown and checks every hint it prints.
* A group's hint is checked against the union of its subcommands' options.
"""

from __future__ import annotations

import ast
import importlib
import re
from functools import cache
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from collscope.cli import COMMANDS, main
from collscope.topo.samples import sample_path

ROOT = Path(__file__).resolve().parents[1] / "collscope"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

_VERB = r"(?:pass|use|add|give|try|(?:re)?run with|with)"
_OPTION = r"--[a-z][a-z0-9-]*"
_HINT = re.compile(rf"\b{_VERB}\s+`?({_OPTION})(?![=\w-])")
_CLAUSE_END = re.compile(r"[.;:()\n]|\bthen\b")
"""Where the options of one hint end: ``pass --topo PATH, --gpu NAME or --alpha-us A (...)``."""


def hint_options(text: str) -> set[str]:
    """The options a text's hints name: each ``<verb> --x`` and the ``--y`` that follow it in the same clause."""
    found: set[str] = set()
    for m in _HINT.finditer(text):
        found.add(m.group(1))
        rest = text[m.end():]
        end = _CLAUSE_END.search(rest)
        found.update(re.findall(rf"(?<![\w-]){_OPTION}(?![=\w-])", rest[: end.start() if end else len(rest)]))
    return found


def test_hint_options_reads_hints_as_people_write_them() -> None:
    assert hint_options("no link parameters: pass --topo PATH (captures), --gpu NAME") == {"--topo"}
    assert hint_options("pass --topo PATH, --gpu NAME (e.g. H100), or --alpha-us A --bw-gbps B") == {
        "--topo", "--gpu"}
    assert hint_options("or --alpha-us A --bw-gbps B; use --alpha-us A --bw-gbps B") == {"--alpha-us", "--bw-gbps"}
    assert hint_options("the records do not say (pass --nnodes N)") == {"--nnodes"}
    assert hint_options("rerun with `--repeats 3`") == {"--repeats"}
    assert hint_options("as ingest --op/--nranks") == set()  # no hint verb: a reference, not advice
    assert hint_options("GPU binding is turned off with --gpu-bind=none") == set()  # srun's flag
    assert hint_options("measure again with 3 repeats (`collscope sweep run --repeats 3`)") == set()


def _module_file(name: str) -> Path | None:
    """The source file of a collscope module, found on disk (nothing is imported)."""
    if name != "collscope" and not name.startswith("collscope."):
        return None
    base = ROOT.parent.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of the module, its classes and functions (and attribute docstrings)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:  # the first statement's string, and any bare string statement (attribute docs)
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value,
                                                                                                  str):
                out.add(id(stmt.value))
    return out


@cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _imports(name: str, path: Path) -> set[str]:
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("collscope"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if not base.startswith("collscope"):
                continue
            out.add(base)
            for alias in node.names:
                if _module_file(f"{base}.{alias.name}") is not None:
                    out.add(f"{base}.{alias.name}")
    return out


def _submodule(name: str) -> bool:
    return _module_file(name) is not None


@cache
def reachable(module: str) -> frozenset[str]:
    """``module`` and the collscope modules it imports itself (one level: see the module doc)."""
    path = _module_file(module)
    assert path is not None, module
    return frozenset({module} | {name for name in _imports(module, path) if _submodule(name)})


def _strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal of a module but its docstrings; f-strings by their literal parts."""
    tree = _parsed(path)
    docs = _docstrings(tree)
    inner: set[int] = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                inner.add(id(value))
                parts.append(value.value if isinstance(value, ast.Constant) and isinstance(value.value, str)
                             else "{}")
            out.append((node.lineno, "".join(parts)))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
              and id(node) not in inner):
            out.append((node.lineno, node.value))
    return out


def command_options(command: click.Command) -> set[str]:
    """Every option string of ``command`` (a group: of its subcommands too)."""
    out = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                out |= command_options(sub)
    return out | {"--help"}


def _command(target: str) -> click.Command:
    module, _, attr = target.partition(":")
    command = getattr(importlib.import_module(module), attr)
    assert isinstance(command, click.Command)
    return command


def hints_of(module: str) -> dict[str, list[str]]:
    """option -> ``file:line`` of each hint naming it in the modules ``module`` reaches."""
    found: dict[str, list[str]] = {}
    for name in sorted(reachable(module)):
        path = _module_file(name)
        assert path is not None
        for line, text in _strings(path):
            for option in hint_options(text):
                found.setdefault(option, []).append(f"{path.relative_to(ROOT.parent)}:{line}")
    return found


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_hint_names_an_option_of_its_command(name: str) -> None:
    command = _command(COMMANDS[name])
    options = command_options(command)
    module = COMMANDS[name].partition(":")[0]
    assert module in reachable(module) and len(reachable(module)) > 1  # the scan follows the imports
    wrong = {option: where for option, where in hints_of(module).items() if option not in options}
    assert not wrong, f"collscope {name} can print hints naming options it does not have: {wrong}"


def test_the_scan_sees_library_hints() -> None:
    """The scan reaches the library (analyze -> analysis.params_source's "pass --alpha-us ..." hint; trace ->
    traces.geometry's "pass --nnodes") and its hints. analysis.params' hints are two imports below analyze and
    report: the dynamic tests below check them."""
    hints = hints_of("collscope.cli.analyze")
    assert any(w.startswith("collscope/analysis/params_source.py:") for w in hints["--alpha-us"])
    assert any(w.startswith("collscope/traces/geometry.py:") for w in hints_of("collscope.cli.trace")["--nnodes"])


def _unknown_nodes_output(tmp_path: Path) -> Path:
    """An nccl-tests output whose author removed the device list (as people paste tables into issues): 16 ranks
    by busbw/algbw, nodes unknown."""
    text = (FIXTURES / "analysis" / "all_reduce_perf-device-list-removed-16r-nodes-unknown.txt").read_text()
    out = tmp_path / "elided.txt"
    out.write_text(text)
    return out


def test_analyze_prints_only_hints_it_can_take(tmp_path: Path) -> None:
    """Dynamic: every hint analyze prints on an input with unknown nodes and NVLink domain is one of its options."""
    path = _unknown_nodes_output(tmp_path)
    options = command_options(_command(COMMANDS["analyze"]))
    for args in ([], ["--gpu", "H100"], ["--gpu", "H100", "--json"]):
        result = CliRunner().invoke(main, ["analyze", str(path), *args])
        assert result.exit_code in (0, 1), result.output
        printed = hint_options(result.output)
        assert "--nnodes" in printed, result.output  # the geometry's line, or the efficiency note
        if "--json" not in args:
            assert "--nvl-domain" in printed, result.output
        assert printed <= options, printed - options


def test_report_prints_only_hints_it_can_take(tmp_path: Path) -> None:
    """Dynamic: report prints analyze's geometry and notes ("Against the model"); on an input with unknown nodes,
    two nodes without NIC rates, and host results against a GPU topology, every hint it writes is one of its
    options."""
    options = command_options(_command(COMMANDS["report"]))
    two_nodes = FIXTURES.parent / "analysis" / "fixtures" / "all_reduce_perf-h200-2x8-1G-9G-nccl-tests-256-numbers.txt"
    host = FIXTURES.parent.parent / "examples" / "results" / "mpi-algos-2rank"
    cases = [([str(_unknown_nodes_output(tmp_path)), "--gpu", "H100"], "--nnodes"), ([str(two_nodes)], "--nic-gbit"),
             ([str(host), "--topo", str(sample_path())], "--alpha-us")]
    for i, (args, expect) in enumerate(cases):
        out = tmp_path / f"rep{i}"
        result = CliRunner().invoke(main, ["report", *args, "--out", str(out)])
        assert result.exit_code == 0, result.output
        printed = hint_options((out / "report.md").read_text().replace("\\", ""))
        assert expect in printed, (out / "report.md").read_text()
        assert printed <= options, printed - options


def _assert_hints_are_options(command: str, args: list[str], expect: str) -> None:
    options = command_options(_command(COMMANDS[command]))
    result = CliRunner().invoke(main, [command, *args])
    printed = hint_options(result.output)
    assert expect in printed, result.output
    assert printed <= options, (printed - options, result.output)


def test_nccl_log_prints_only_hints_it_can_take_and_takes_nnodes() -> None:
    """Dynamic: a log of NCCL 2.3.7 says no node count; the model asks for --nnodes, which nccl-log has, and with it
    the model runs. (analysis/log_model is two imports below nccl-log: the static scan does not reach it.)"""
    log = str(FIXTURES / "nccl-debug" / "nccl2.3.7-4gpu-ring-order-old-transports.log")
    _assert_hints_are_options("nccl-log", [log, "--gpu", "H100"], "--nnodes")
    result = CliRunner().invoke(main, ["nccl-log", log, "--gpu", "H100", "--nnodes", "1"])
    assert result.exit_code == 0, result.output
    assert "for 4 ranks on 1 node(s), H100" in result.output


def test_trace_prints_only_hints_it_can_take() -> None:
    """Dynamic: a 128-rank trace whose nodes are unknown; every hint trace prints (the geometry's, the model's
    refusals, which come from analysis.params two imports down) is one of its options."""
    trace = str(FIXTURES / "traces" / "kineto-128rank-rank0-tp64-metadata.json")
    _assert_hints_are_options("trace", [trace, "--gpu", "H100"], "--nnodes")
    _assert_hints_are_options("trace", [trace, "--nnodes", "16", "--alpha-us", "2", "--bw-gbps", "50"], "--nvl-domain")
