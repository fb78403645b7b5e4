"""Write docs/cli.md: the ``--help`` text of every collscope command, one section each.

    python scripts/gen_cli_reference.py            # rewrite docs/cli.md
    python scripts/gen_cli_reference.py --check    # exit 1 when docs/cli.md is out of date

Run it after any change to a command, an option or a help string; ``tests/test_docs.py`` regenerates the text
in memory and fails when the committed file differs. The output is deterministic: commands in sorted order,
help rendered by click at a fixed width of 100 columns whatever the terminal, program name ``collscope``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "cli.md"
WIDTH = 100

HEADER = """\
# collscope command reference

Generated from each command's `--help` by `python scripts/gen_cli_reference.py`; do not edit by hand.
After changing a command, an option or a help string, run that script and commit docs/cli.md with the change
(`tests/test_docs.py` fails while this file is out of date). The README has a tour with real outputs; the
guides are [slurm.md](slurm.md), [reading-results.md](reading-results.md) and
[troubleshooting.md](troubleshooting.md).
"""


def walk(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group``, depth first, subcommands in sorted order (the group itself first)."""
    yield path, group
    for name in sorted(group.commands):
        command = group.commands[name]
        if isinstance(command, click.Group):
            yield from walk(command, (*path, name))
        else:
            yield (*path, name), command


def help_text(main: click.Group, path: tuple[str, ...]) -> str:
    """``collscope PATH --help`` as click renders it at WIDTH columns."""
    result = CliRunner().invoke(main, [*path, "--help"], prog_name="collscope", terminal_width=WIDTH)
    if result.exit_code != 0:
        raise RuntimeError(f"collscope {' '.join(path)} --help exited {result.exit_code}: {result.output}")
    return result.output.rstrip() + "\n"


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading made of words and spaces."""
    return title.lower().replace(" ", "-")


def render() -> str:
    """The whole of docs/cli.md."""
    from collscope.cli import main

    commands = list(walk(main))
    titles = [" ".join(("collscope", *path)) for path, _ in commands]
    parts = [HEADER, "\n## Contents\n\n"]
    parts += [f"- [{title}](#{anchor(title)})\n" for title in titles]
    for title, (path, _) in zip(titles, commands, strict=True):
        parts.append(f"\n## {title}\n\n```\n{help_text(main, path)}```\n")
    return "".join(parts)


def main(argv: list[str]) -> int:
    text = render()
    if argv == ["--check"]:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python scripts/gen_cli_reference.py", file=sys.stderr)
            return 1
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
