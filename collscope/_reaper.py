"""A tiny parent for a launch, so that every process the launch starts dies with it.

``python -m collscope._reaper -- ARGV...`` runs ARGV (in a session of its own) as a *child subreaper*
(Linux ``PR_SET_CHILD_SUBREAPER``): a process below it whose parent dies is re-parented to the reaper, not to
init. So every process the launch started stays below the reaper, whatever it does: an Open MPI 5 rank in a
process group of its own, a daemon that called ``setsid()``, a rank left running by a ``prterun`` that exited.
When ARGV exits, and when the reaper gets SIGTERM, SIGINT or SIGHUP, it ends every process below it by pid:
SIGTERM, then SIGKILL after :data:`GRACE_S`, again and again until none is left (:mod:`collscope._proctree`).
It also asks Linux to send it SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), so ``kill -9`` of collscope
still ends the launch. proc.run and proc.start use it (``kill_on_parent_death=True``): sweep points, persistent
workers, locate steps, nccl-tests runs.

Why not a cgroup: a per-launch cgroup needs a delegated cgroup v2 subtree (systemd ``Delegate=``), which a
Slurm job step or a container seldom has (this machine has cgroup v1); a subreaper needs nothing but Linux
>= 3.4. What escapes it: a process that a privileged tool moves out of the tree (none of the launchers do).
Exit status: ARGV's (128 + N when it was killed by signal N), or 128 + N when the reaper was stopped by signal N.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

from collscope._proctree import descendants, end_processes

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

GRACE_S = 2.0
"""How long the processes of a launch have between SIGTERM and SIGKILL."""

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _raise_stopped(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


def _reap_exited() -> None:
    """Collect every exited child (re-parented orphans included) without blocking."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wait_for(child: subprocess.Popen[bytes]) -> int:
    """Wait for ``child`` while collecting the orphans re-parented here; its exit status, shell style."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child.pid:
            code = os.waitstatus_to_exitcode(status)
            child.returncode = code
            return code if code >= 0 else 128 - code


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: python -m collscope._reaper -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    command = argv[1:]
    parent = os.getppid()
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _raise_stopped)
    code: int
    try:
        try:
            child = subprocess.Popen(command, start_new_session=True)
        except OSError as exc:
            print(f"collscope._reaper: cannot start {command[0]}: {exc}", file=sys.stderr)
            return 127
        if os.getppid() != parent:  # the parent died before the death signal was armed
            raise _Stopped(signal.SIGTERM)
        code = _wait_for(child)
    except _Stopped as stop:
        code = 128 + stop.signum
    finally:
        for sig in _STOP_SIGNALS:  # the ending below is not to be cut short by a second signal
            signal.signal(sig, signal.SIG_IGN)
        me = os.getpid()
        end_processes(lambda: descendants(me), GRACE_S, reap=_reap_exited)
        _reap_exited()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
