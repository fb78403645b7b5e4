"""A tiny parent for a command, so that the command dies with whoever started it.

``python -m collscope._reaper -- ARGV...`` asks Linux to send it SIGTERM when its parent dies
(``PR_SET_PDEATHSIG``), runs ARGV in its own process group, and on SIGTERM/SIGINT kills that whole group
with SIGKILL. proc.run uses it (``kill_on_parent_death=True``) so that ``kill -9`` of a sweep leaves no
benchmark, mpirun or rank behind: the kernel tells the reaper, the reaper kills the group.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

_PR_SET_PDEATHSIG = 1


def _set_parent_death_signal(sig: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: python -m collscope._reaper -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    command = argv[1:]
    parent = os.getppid()
    _set_parent_death_signal(signal.SIGTERM)
    child: subprocess.Popen[bytes] | None = None

    def kill_group(signum: int, _frame: object) -> None:
        if child is not None:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, kill_group)
    signal.signal(signal.SIGINT, kill_group)
    signal.signal(signal.SIGHUP, kill_group)
    try:
        child = subprocess.Popen(command, start_new_session=True)
    except OSError as exc:
        print(f"collscope._reaper: cannot start {command[0]}: {exc}", file=sys.stderr)
        return 127
    if os.getppid() != parent:  # the parent died before the death signal was armed
        kill_group(signal.SIGTERM, None)
    code = child.wait()
    try:  # leftovers of the command's group (ranks that outlived mpirun, daemons)
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
