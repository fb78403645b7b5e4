"""The NCCL variables an nccl-tests run had, as its printed output shows them, for the records' ``settings`` (what
analyze and the models read a configuration from).

Two kinds of line say it:

- NCCL's own ``NCCL_ALGO set by environment to Tree`` lines (``NCCL_DEBUG=INFO``; src/misc/param.cc): what NCCL
  read. They win where the command line says otherwise, and the difference is said.
- The command that launched the run, in the shapes published outputs show:
  ``mpirun ... -x NCCL_ALGO=Tree -x NCCL_DEBUG=INFO -np 2 ./all_reduce_perf ...`` (Open MPI's ``-x``,
  NVIDIA/nccl-tests#232); ``NCCL_ALGO=TREE ./all_reduce_perf -g 8 ...`` (assignments before the binary or the
  launcher, NVIDIA/nccl#1530); ``mpirun -genv NCCL_ALGO Ring`` and ``-env NAME VALUE`` (MPICH and Intel MPI's
  Hydra); ``srun --export=ALL,NCCL_ALGO=Ring`` (Slurm); ``export NCCL_ALGO=Ring`` lines of a pasted script.
  ``-x NCCL_ALGO`` alone passes the launcher's own value and ``NCCL_ALGO=$ALGO`` a shell variable's, which the
  line does not show: said, not read. Words after the test binary are its own arguments.

Only ``NCCL_*`` variables are read (a ``-J`` file's ``env`` gives the same, :mod:`.json`), a secret's value
redacted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from collscope.collectives.nccl_log.lines import split_line
from collscope.collectives.nccl_log.messages import parse_env_message
from collscope.vocab.secrets import redacted

__all__ = ["run_settings"]

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_EXPORT = re.compile(r"^\s*(?:[$#>]\s*)?export\s+(NCCL_[A-Z0-9_]+)=(\S*)\s*$")
_LAUNCHER = re.compile(r"(?:^|[\s/])(?:mpirun|mpiexec|orterun|prterun|srun)\s")
_BINARY = re.compile(r"(?:^|/)[a-z_]+_perf(?:_mpi)?$")
_PROMPT = frozenset({"$", "#", ">", "+", "Running:", "env"})
"""Words before a command: shell prompts, a `set -x` trace's `+`, a README's `Running:`, `env`."""


def run_settings(lines: Sequence[tuple[int, str]]) -> tuple[dict[str, str], list[str]]:
    """(settings, notes) from the output's lines (number, text): NCCL's ``set by environment`` lines over the
    launch command's and ``export`` lines' assignments; each note says where a value came from, or why one was
    not read."""
    nccl: dict[str, tuple[str, int]] = {}
    command: dict[str, tuple[str, int, str]] = {}
    unread: list[str] = []
    for lineno, text in _joined(lines):
        if "NCCL INFO" in text:
            line = split_line(text, lineno)
            found = parse_env_message(line.message) if line is not None else None
            if found is not None:
                nccl.setdefault(found[0], (redacted(*found), lineno))
            continue
        export = _EXPORT.match(text)
        if export is not None:
            _take(command, unread, export[1], export[2], lineno, "an export line")
        elif _LAUNCHER.search(text) or any(_BINARY.search(w) for w in text.split()):
            _command(text, lineno, command, unread)
    settings = {name: value for name, (value, _, _) in command.items()}
    read = [f"{name}={value} (line {lineno}, {how})" for name, (value, lineno, how) in command.items()
            if name not in nccl]
    notes = []
    for name, (value, lineno) in nccl.items():
        if name in command and command[name][0] != value:
            notes.append(f"{name}: the command on line {command[name][1]} sets {command[name][0]!r}, NCCL's line "
                         f"{lineno} says it read {value!r}: {value!r} kept")
        settings[name] = value
        read.append(f"{name}={value} (line {lineno}, NCCL's 'set by environment' line)")
    if read:
        notes.insert(0, f"NCCL settings of the run, from its output: {', '.join(read)}")
    return settings, notes + unread


def _joined(lines: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """The lines, a command continued with ``\\`` at its end joined into its first line (numbered by it)."""
    out: list[tuple[int, str]] = []
    last = -2
    for lineno, text in lines:
        if out and out[-1][1].rstrip().endswith("\\") and lineno == last + 1:
            out[-1] = (out[-1][0], out[-1][1].rstrip()[:-1] + " " + text)
        else:
            out.append((lineno, text))
        last = lineno
    return out


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=False)
    except ValueError:  # an unbalanced quote in a pasted line: its words as printed
        return text.split()


def _command(text: str, lineno: int, out: dict[str, tuple[str, int, str]], unread: list[str]) -> None:
    words = _words(text)
    i = 0
    while i < len(words) and (words[i] in _PROMPT or words[i].endswith(("$", "#"))):
        i += 1
    while i < len(words) and (m := _ASSIGNMENT.match(words[i])) is not None:  # NAME=VALUE before the command
        _take(out, unread, m[1], m[2], lineno, "an assignment before the command")
        i += 1
        while i < len(words) and words[i] == "env":
            i += 1
    while i < len(words):
        word = words[i]
        if _BINARY.search(word):
            return  # the test's own arguments follow
        following = words[i + 1] if i + 1 < len(words) else ""
        if word == "-x" and following:
            name, sep, value = following.partition("=")
            if sep:
                _take(out, unread, name, value, lineno, "the launch command's -x")
            elif name.startswith("NCCL_"):
                unread.append(f"{name}: line {lineno} passes it with -x and no value (the launcher's own, which "
                              "the output does not show): not read")
            i += 2
            continue
        if word in ("-genv", "-env") and following:
            name, sep, value = following.partition("=")
            step = 2 if sep else 3
            if not sep:
                value = words[i + 2] if i + 2 < len(words) else ""
            _take(out, unread, name, value, lineno, f"the launch command's {word}")
            i += step
            continue
        if word.startswith("--export=") or (word == "--export" and following):
            items = word.partition("=")[2] if word.startswith("--export=") else following
            for item in items.split(","):
                name, sep, value = item.partition("=")
                if sep:
                    _take(out, unread, name, value, lineno, "srun --export")
            i += 1 if word.startswith("--export=") else 2
            continue
        i += 1


def _take(out: dict[str, tuple[str, int, str]], unread: list[str], name: str, value: str, lineno: int,
          how: str) -> None:
    if not name.startswith("NCCL_"):
        return
    value = redacted(name, value)  # a secret's value is never written (collscope/vocab/secrets.py)
    if "$" in value or "`" in value:
        unread.append(f"{name}: line {lineno} sets it from a shell expression ({value}), whose value the output "
                      "does not show: not read")
        return
    out.setdefault(name, (value, lineno, how))
