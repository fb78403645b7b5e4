"""The only place in collscope that starts subprocesses.

Every call takes an argv list (never a shell string), an optional environment, and a mandatory
timeout. The child runs in its own session/process group so that on timeout (or interruption) the
whole group, grandchildren included, is killed. The outcome is returned as a :class:`ProcResult` value;
a non-zero exit is not an exception, a missing executable is (:class:`ToolMissingError`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from collscope.errors import LaunchError, ToolMissingError

__all__ = ["ProcResult", "Started", "run", "start", "which", "TAIL_CHARS"]

TAIL_CHARS = 64_000
"""How much of stdout/stderr a result keeps (the end of each stream)."""

_KILL_GRACE_S = 2.0

_OPEN_MPI_LAUNCHERS = frozenset({"mpirun", "mpiexec", "prterun", "oshrun"})
_PRRTE_SESSION_BASES = ("PRTE_MCA_prte_local_tmpdir_base", "PRTE_MCA_prte_tmpdir_base")


def _private_session_base(argv: Sequence[str], env: dict[str, str]) -> str | None:
    """A fresh directory for the session files of an Open MPI 5 ``mpirun`` (PRRTE), put into ``env``.

    PRRTE keeps its PMIx rendezvous files in ``$TMPDIR/ompi.<mpirun's pid>``. A mpirun killed by a timeout
    leaves that directory behind, and a later mpirun that gets the same pid (Linux reuses pids; pid_max is
    often 32768) fails at once: "The PMIx server's listener thread failed to start", exit 213. Each launch
    of ours therefore gets a base directory of its own, removed when the launch ends (a SIGKILL of this process
    leaves it behind, under a name no later launch uses). Nothing is done when
    the caller chose a base (``PRTE_MCA_prte_local_tmpdir_base`` or ``..._tmpdir_base``); other MPIs ignore
    the variable.
    """
    if os.path.basename(argv[0]) not in _OPEN_MPI_LAUNCHERS or any(name in env for name in _PRRTE_SESSION_BASES):
        return None
    try:
        base = tempfile.mkdtemp(prefix="collscope-mpirun-", dir=env.get("TMPDIR") or None)
    except OSError as exc:
        raise LaunchError(f"cannot create a session directory for {argv[0]}: {exc}") from exc
    env[_PRRTE_SESSION_BASES[0]] = base
    return base


def _remove_session_base(base: str | None) -> None:
    if base is not None:
        shutil.rmtree(base, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class ProcResult:
    """What happened to one child process."""

    argv: tuple[str, ...]
    returncode: int | None
    """Exit status; negative for a signal; ``None`` only if the process could not be reaped."""
    stdout: str
    """The last :data:`TAIL_CHARS` characters of standard output."""
    stderr: str
    """The last :data:`TAIL_CHARS` characters of standard error."""
    duration_s: float
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def _tail_bytes(path: str | os.PathLike[str], limit: int = 4 * TAIL_CHARS) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - limit))
        return fh.read()


def which(tool: str) -> str | None:
    """The full path of ``tool`` on PATH, or ``None``."""
    return shutil.which(tool)


def _kill_group(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + _KILL_GRACE_S
            while time.monotonic() < deadline:
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.05)


def run(
    argv: Sequence[str],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin_text: str | None = None,
    install_hint: str = "install it or put it on PATH",
    output_path: str | os.PathLike[str] | None = None,
    kill_on_parent_death: bool = False,
) -> ProcResult:
    """Run ``argv`` to completion or until ``timeout_s`` seconds have passed.

    ``env`` replaces the environment when given; ``extra_env`` is added on top of it (or of
    ``os.environ``). On timeout the process group is sent SIGTERM, then SIGKILL, and the result has
    ``timed_out=True``. Output is decoded as UTF-8 with replacement, so binary noise never raises.

    ``output_path``: stdout and stderr both go to this file as they are produced (appended, so a log survives
    a crash of ours), and the result's ``stdout`` is the file's tail. ``kill_on_parent_death``: the command
    runs under :mod:`collscope._reaper`, which kills its whole process group if this process dies, even by
    SIGKILL.
    """
    if isinstance(argv, (str, bytes)):
        raise TypeError("proc.run takes an argv list, not a shell string")
    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise ValueError("proc.run needs a non-empty argv")
    if timeout_s is None or timeout_s <= 0:
        raise ValueError(f"proc.run needs a positive timeout_s, got {timeout_s!r}")
    full_env = dict(os.environ if env is None else env)
    if extra_env:
        full_env.update(extra_env)
    if os.sep not in argv[0] and shutil.which(argv[0], path=full_env.get("PATH")) is None:
        raise ToolMissingError(argv[0], install_hint)

    session_base = _private_session_base(argv, full_env)
    try:
        launched = [sys.executable, "-m", "collscope._reaper", "--", *argv] if kill_on_parent_death else argv
        log = open(output_path, "ab", buffering=0) if output_path is not None else None  # noqa: SIM115
        start = time.monotonic()
        try:
            child = subprocess.Popen(
                launched,
                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                stdout=log if log is not None else subprocess.PIPE,
                stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise ToolMissingError(argv[0], install_hint) from exc
        except OSError as exc:
            raise LaunchError(f"cannot start {argv[0]}: {exc}") from exc
        finally:
            if log is not None:
                log.close()

        timed_out = False
        try:
            out_b, err_b = child.communicate(input=None if stdin_text is None else stdin_text.encode(),
                                             timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(child.pid)
            out_b, err_b = child.communicate()
        except BaseException:
            _kill_group(child.pid)
            child.wait()
            raise
        else:
            # The leader exited; children it left behind in its group are ours to clean up.
            _kill_group(child.pid)
        duration_s = time.monotonic() - start
        if output_path is not None:
            out_b, err_b = _tail_bytes(output_path), b""
        return ProcResult(
            argv=tuple(argv),
            returncode=child.returncode,
            stdout=(out_b or b"").decode("utf-8", "replace")[-TAIL_CHARS:],
            stderr=(err_b or b"").decode("utf-8", "replace")[-TAIL_CHARS:],
            duration_s=duration_s,
            timed_out=timed_out,
        )
    finally:
        _remove_session_base(session_base)


class Started:
    """A child started by :func:`start` that runs while the caller watches it (persistent sweep workers)."""

    def __init__(self, argv: tuple[str, ...], popen: subprocess.Popen[bytes], session_base: str | None = None) -> None:
        self.argv = argv
        self._popen = popen
        self._session_base = session_base
        self.started_at = time.monotonic()

    @property
    def pid(self) -> int:
        return self._popen.pid

    def poll(self) -> int | None:
        """The exit status once the child has exited, else None."""
        return self._popen.poll()

    def kill_group(self) -> int | None:
        """SIGTERM, then SIGKILL, to the child's whole process group, then SIGKILL to every process left in the
        sessions the child's processes lead (mpirun puts each rank in a process group of its own); the exit
        status."""
        sessions = _sessions_led_below(self._popen.pid)
        _kill_group(self._popen.pid)
        for sid in sessions:
            _kill_session(sid)
        try:
            code: int | None = self._popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self._end_session()
        return code

    def wait(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for the exit; then clean up what the leader left in its group."""
        try:
            code = self._popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        _kill_group(self._popen.pid)
        self._end_session()
        return code

    def _end_session(self) -> None:
        _remove_session_base(self._session_base)
        self._session_base = None


def _stat_fields(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()  # state ppid pgrp session ...


def _sessions_led_below(root: int) -> list[int]:
    """Session ids led by ``root`` or its descendants (Linux /proc; empty elsewhere)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    parent = {}
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            parent[int(pid)] = (int(fields[1]), int(fields[3]))
    below, grew = {root}, True
    while grew:
        grew = False
        for child, (ppid, _) in parent.items():
            if ppid in below and child not in below:
                below.add(child)
                grew = True
    return sorted(p for p in below if parent.get(p, (0, -1))[1] == p)


def _kill_session(sid: int) -> None:
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None and int(fields[3]) == sid and int(pid) != os.getpid():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def start(argv: Sequence[str], *, output_path: str | os.PathLike[str], extra_env: Mapping[str, str] | None = None,
          install_hint: str = "install it or put it on PATH", kill_on_parent_death: bool = True,
          env: Mapping[str, str] | None = None) -> Started:
    """Start ``argv`` in its own process group, stdout and stderr appended to ``output_path``; return at once.

    The caller owns the child: it must end with :meth:`Started.wait` or :meth:`Started.kill_group` (the whole
    group is killed either way). ``kill_on_parent_death`` runs it under :mod:`collscope._reaper` as
    :func:`run` does. ``env`` and ``extra_env`` as in :func:`run`.
    """
    if isinstance(argv, (str, bytes)):
        raise TypeError("proc.start takes an argv list, not a shell string")
    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise ValueError("proc.start needs a non-empty argv")
    full_env = dict(os.environ if env is None else env)
    if extra_env:
        full_env.update(extra_env)
    if os.sep not in argv[0] and shutil.which(argv[0], path=full_env.get("PATH")) is None:
        raise ToolMissingError(argv[0], install_hint)
    launched = [sys.executable, "-m", "collscope._reaper", "--", *argv] if kill_on_parent_death else argv
    session_base = _private_session_base(argv, full_env)
    with open(output_path, "ab", buffering=0) as log:
        try:
            child = subprocess.Popen(launched, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env=full_env, start_new_session=True)
        except FileNotFoundError as exc:
            _remove_session_base(session_base)
            raise ToolMissingError(argv[0], install_hint) from exc
        except OSError as exc:
            _remove_session_base(session_base)
            raise LaunchError(f"cannot start {argv[0]}: {exc}") from exc
    return Started(tuple(argv), child, session_base)
