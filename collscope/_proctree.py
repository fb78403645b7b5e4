"""Processes below a pid or in a session, read from Linux's /proc, and ended by pid: SIGTERM, a grace, SIGKILL.

Used by :mod:`collscope.proc` and :mod:`collscope._reaper`. A process group is not enough to end a launch:
Open MPI 5 puts each rank in a process group of its own (same session), and a program may call ``setsid()``.
Elsewhere than Linux (no /proc) every function here sees no process, and callers fall back to their group kill.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable

__all__ = ["process_table", "live", "descendants", "session_members", "end_processes"]

_POLL_S = 0.05
_KILL_ROUNDS_S = 30.0
"""How long SIGKILL rounds go on for processes that do not die (uninterruptible sleep) before giving up."""


def process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, session id, state letter) of every process visible in /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    table: dict[int, tuple[int, int, str]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                text = fh.read().decode("ascii", "replace")
        except OSError:
            continue  # it ended meanwhile
        fields = text[text.rfind(")") + 2:].split()  # state ppid pgrp session ...
        if len(fields) >= 4:
            table[int(name)] = (int(fields[1]), int(fields[3]), fields[0])
    return table


def live(pid: int) -> bool:
    """Whether ``pid`` runs (exists and is not a zombie), from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except OSError:
        return False
    return text[text.rfind(")") + 2:][:1] != "Z"


def descendants(root: int, table: dict[int, tuple[int, int, str]] | None = None) -> set[int]:
    """Every live (not zombie) process below ``root`` in the parent tree, ``root`` excluded."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found if table[pid][2] != "Z"}


def session_members(sid: int, table: dict[int, tuple[int, int, str]] | None = None) -> set[int]:
    """Live processes of session ``sid`` (this process excluded)."""
    table = process_table() if table is None else table
    return {pid for pid, (_, session, state) in table.items() if session == sid and state != "Z"
            and pid != os.getpid()}


def _send(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_processes(find: Callable[[], set[int]], grace_s: float, reap: Callable[[], None] | None = None) -> bool:
    """End every process ``find()`` names, again and again until it names none: SIGTERM (and SIGCONT, so a
    stopped one gets it) to each new one, then SIGKILL to all once ``grace_s`` has passed. ``reap`` is called
    before each look (a subreaper collects its exited orphans, which would otherwise stay zombies). Returns
    whether none was left (False only when some survived SIGKILL for :data:`_KILL_ROUNDS_S`)."""
    start = time.monotonic()
    termed: set[int] = set()
    while True:
        if reap is not None:
            reap()
        alive = find()
        if not alive:
            return True
        elapsed = time.monotonic() - start
        if elapsed < grace_s:
            new = alive - termed
            _send(new, signal.SIGTERM)
            _send(new, signal.SIGCONT)
            termed |= new
        elif elapsed < grace_s + _KILL_ROUNDS_S:
            _send(alive, signal.SIGKILL)
        else:
            return False
        time.sleep(_POLL_S)
