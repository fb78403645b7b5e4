"""A side's command prefix (``--b-cmd-prefix "apptainer exec img.sif"``), without a shell and without changing the
sweep's launchers.

The sweep's launchers start ``<python> -m collscope bench ...`` on every rank. When a side has a prefix, the
canary writes a small executable into its results directory (:func:`write_wrapper`) and gives its path as the
launch's ``python``: on every rank it reads the point's :data:`~collscope.canary.layout.PREFIX_VAR` (a JSON list of
words, set by the side's points only) and replaces itself (``exec``, no child process, no shell) with
``prefix... <python> -m collscope bench ...``. A point without the variable (the other side) runs the plain
interpreter. The prefix words reach the program exactly as given: quotes, spaces and ``;`` are never interpreted.

The wrapper is found by its path on every node: the results directory must be on a file system every node sees
(as it already must for the records).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from collscope.atomic import write_text_atomic
from collscope.canary.layout import PREFIX_VAR
from collscope.errors import ConfigError

__all__ = ["WRAPPER_NAME", "wrapper_text", "write_wrapper", "prefixed_argv", "main"]

WRAPPER_NAME = "canary-exec"
"""The wrapper's file name in the results directory."""
_SHEBANG_MAX = 255


def wrapper_text(python: str) -> str:
    """The wrapper's text: a script run by ``python`` that calls :func:`main`. ConfigError when ``python`` cannot
    stand in a ``#!`` line (a space, or too long)."""
    if any(c.isspace() for c in python) or len(python) + 2 > _SHEBANG_MAX:
        raise ConfigError(f"the interpreter path {python!r} cannot start a script (#! line: no spaces, at most "
                          f"{_SHEBANG_MAX} characters); --a-cmd-prefix/--b-cmd-prefix need one")
    return (f"#!{python}\n# collscope canary: runs the per-rank program under this point's command prefix\n"
            "from collscope.canary.run_prefix import main\n\nmain()\n")


def write_wrapper(directory: Path, python: str) -> Path:
    """Write the wrapper into ``directory`` (atomically, mode 0755) and return its path."""
    path = Path(directory) / WRAPPER_NAME
    write_text_atomic(path, wrapper_text(python))
    os.chmod(path, 0o755)
    return path


def prefixed_argv(args: Sequence[str], env: Mapping[str, str], python: str) -> list[str]:
    """``prefix + [python] + args``: the prefix from ``env``'s :data:`PREFIX_VAR` (none when absent).
    ConfigError when the variable is not a JSON list of strings."""
    raw = env.get(PREFIX_VAR)
    words: list[str] = []
    if raw:
        try:
            words = json.loads(raw)
        except json.JSONDecodeError:
            words = None  # type: ignore[assignment]
        if not isinstance(words, list) or not all(isinstance(w, str) and w for w in words):
            raise ConfigError(f"{PREFIX_VAR}={raw!r}: expected a JSON list of words")
    return [*words, python, *args]


def main() -> None:
    """The wrapper's body: exec the prefixed program (never returns); exit 127 with one line when it cannot."""
    try:
        argv = prefixed_argv(sys.argv[1:], os.environ, sys.executable)
    except ConfigError as exc:
        sys.stderr.write(f"collscope canary: {exc}\n")
        raise SystemExit(2) from None
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"collscope canary: cannot run the command prefix {argv[0]!r}: {exc.strerror or exc}\n")
        raise SystemExit(127) from None
