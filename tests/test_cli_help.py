"""Every CLI command has --help with an example, and the README names it."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from collscope.cli import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _commands(group: click.Group, prefix: list[str]) -> list[list[str]]:
    out = []
    for name, cmd in group.commands.items():
        path = prefix + [name]
        out.append(path)
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, path))
    return out


def test_every_command_has_help_with_example_and_is_in_readme():
    commands = _commands(main, [])
    assert len(commands) >= 7
    for path in commands:
        result = CliRunner().invoke(main, [*path, "--help"])
        assert result.exit_code == 0, path
        assert "Example" in result.output, f"{' '.join(path)} --help has no example"
        if not isinstance(main.get_command(click.Context(main), path[0]), click.Group) or len(path) > 1:
            assert f"collscope {' '.join(path)}" in README, f"README does not mention collscope {' '.join(path)}"
