"""The command group: commands imported only when used, one error mapping, the shared size type."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from collscope.cli import COMMANDS, main
from collscope.cli._group import CollscopeGroup, LazyCommands
from collscope.cli.options import SIZE, SIZE_LIST
from collscope.errors import ConfigError, ParseError

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "networkx", "matplotlib")


def _modules_after(argv: list[str]) -> set[str]:
    """Every module loaded by ``collscope ARGV`` run in a fresh interpreter (click exits are swallowed)."""
    code = ("import json, sys\nfrom collscope.cli import main\n"
            f"try:\n    main({argv!r}, standalone_mode=False)\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    return set(json.loads(run.stdout.strip().splitlines()[-1]))


def test_bench_loads_no_other_command_and_no_analysis():
    loaded = _modules_after(["bench", "--help"])
    assert "collscope.cli.bench" in loaded
    others = {m for m in loaded if m.startswith("collscope.cli.") and m.split(".")[2] not in
              ("bench", "options", "_errors", "_group", "_terminal")}
    assert not others, f"bench imported other commands: {sorted(others)}"
    assert not {m for m in loaded if m.startswith(("collscope.analysis", "collscope.sweeps"))}


def test_bench_rank_path_imports_no_pandas_networkx_matplotlib():
    loaded = _modules_after(["bench", "--help"])
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == []


def test_help_lists_every_command_with_its_short_help():
    result = CliRunner().invoke(main, ["--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    listed = result.output.split("Commands:", 1)[1]
    for name in COMMANDS:
        command = main.get_command(click.Context(main), name)
        assert command is not None
        short = command.get_short_help_str(limit=45).rstrip(".")
        assert any(line.split() and line.split()[0] == name and short[:30] in line for line in listed.splitlines()), \
            f"{name} ({short!r}) not listed in:\n{listed}"


def test_names_resolve_without_importing_and_suggestions_work():
    commands = LazyCommands({"alpha": "no.such.module:command"})
    assert list(commands) == ["alpha"] and "alpha" in commands and len(commands) == 1
    group = CollscopeGroup(name="g", lazy_commands={"alpha": "no.such.module:command"})
    assert group.list_commands(click.Context(group)) == ["alpha"]
    result = CliRunner().invoke(group, ["alpah"])
    assert result.exit_code == 2 and "No such command 'alpah'" in result.output and "alpha" in result.output
    with pytest.raises(ModuleNotFoundError):
        commands["alpha"]


def test_a_lazy_target_that_is_not_a_command_is_refused():
    commands = LazyCommands({"x": "collscope.units:parse_size"})
    with pytest.raises(TypeError, match="not a click command"):
        commands["x"]


@pytest.mark.parametrize("error", [ConfigError("bad value 'x'; valid: a, b"),
                                   ParseError("f.txt", 3, "a size", found="zz")])
def test_collscope_errors_exit_2_with_one_line(error):
    group = CollscopeGroup(name="g")

    @group.group("outer")
    def outer() -> None:
        """A nested group: errors of its commands are mapped too."""

    @outer.command("fail")
    def fail() -> None:
        raise error

    result = CliRunner().invoke(group, ["outer", "fail"])
    assert result.exit_code == 2
    assert result.output == f"error: {error}\n"
    assert "Traceback" not in result.output


def test_other_exceptions_are_not_swallowed():
    group = CollscopeGroup(name="g")

    @group.command("boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    result = CliRunner().invoke(group, ["boom"])
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)


@pytest.mark.parametrize(("text", "value"), [("8", 8), ("1K", 1024), ("16M", 16 << 20), (" 2g ", 2 << 30),
                                             ("1MiB", 1 << 20), (4096, 4096)])
def test_size_type_parses_binary_suffixes(text, value):
    assert SIZE.convert(text, None, None) == value


@pytest.mark.parametrize("text", ["8x", "-1", "1.5", "K", "", "1e3"])
def test_size_type_rejects_with_the_bad_text(text):
    with pytest.raises(click.BadParameter, match="not a"):
        SIZE.convert(text, None, None)


def test_size_list_type():
    assert SIZE_LIST.convert("8, 1K,64K", None, None) == (8, 1024, 65536)
    with pytest.raises(click.BadParameter, match="not a size: 'x'"):
        SIZE_LIST.convert("8,x", None, None)
    with pytest.raises(click.BadParameter, match="no sizes"):
        SIZE_LIST.convert(" , ", None, None)


@pytest.mark.parametrize("argv", [
    ["bench", "--engine", "mpi", "--op", "all_reduce", "-b", "8x", "-e", "8"],
    ["bench", "--engine", "mpi", "--op", "all_reduce", "--sizes", "8,4Q"],
    ["predict", "--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--min-bytes", "1Q"],
    ["predict", "--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--sizes", "1K,1Q"],
    ["sweep", "run", "--preset", "demo", "--out", "x", "--max-bytes", "1Q", "--dry-run"],
])
def test_every_size_option_fails_the_same_way(argv):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '" in result.output and "not a size" in result.output
