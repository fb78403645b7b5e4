"""The only place in collscope that starts subprocesses.

Every call takes an argv list (never a shell string), an optional environment, and a mandatory
timeout. The child runs in a session of its own; when it ends, times out or is interrupted, every process of
that session (Open MPI 5 ranks, each in a process group of its own, included) is ended by pid: SIGTERM, a grace,
SIGKILL. A launch (``kill_on_parent_death=True``: sweep points, persistent workers, locate steps, nccl-tests)
runs under :mod:`collscope._reaper`, a child subreaper that ends every process the launch started, even ones
that called ``setsid()``, and even when this process is killed by SIGKILL. The outcome is returned as a
:class:`ProcResult` value; a non-zero exit is not an exception, a missing executable is (:class:`ToolMissingError`).
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

from collscope import _reaper
from collscope._proctree import descendants, end_processes, live, process_table, session_members
from collscope.errors import LaunchError, ToolMissingError

__all__ = ["ProcResult", "Started", "run", "start", "which", "TAIL_CHARS"]

TAIL_CHARS = 64_000
"""How much of stdout/stderr a result keeps (the end of each stream)."""

_KILL_GRACE_S = 2.0
"""Between SIGTERM and SIGKILL for the processes of a launch that runs without the reaper."""
_REAPER_MARGIN_S = 3.0
"""How much longer than its own grace (:data:`collscope._reaper.GRACE_S`) the reaper gets to end its tree."""

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


def _end_launch(leader: int, *, reaped: bool, under_reaper: bool) -> None:
    """End what is left of a launch whose first process is ``leader`` (a session leader): every process of its
    session (Open MPI 5 ranks sit in process groups of their own, in mpirun's session) and, while ``leader`` is
    not yet reaped (its pid cannot be reused), every process below it. SIGTERM, a grace, SIGKILL, by pid, until
    none is left (:func:`collscope._proctree.end_processes`); without /proc, the process group.

    ``under_reaper``: ``leader`` is :mod:`collscope._reaper`, which ends everything below it on SIGTERM itself
    (even processes that left the session); it gets its own grace plus a margin before SIGKILL."""
    if not os.path.isdir("/proc/self"):
        _kill_group(leader, _reaper.GRACE_S + _REAPER_MARGIN_S if under_reaper else _KILL_GRACE_S)
        return
    if under_reaper and not reaped:  # the reaper first: it ends its whole tree itself, then exits
        try:
            os.kill(leader, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + _reaper.GRACE_S + _REAPER_MARGIN_S
        while time.monotonic() < deadline and live(leader):
            time.sleep(0.05)

    def left() -> set[int]:
        table = process_table()
        found = session_members(leader, table)
        return found if reaped else found | descendants(leader, table)

    end_processes(left, _KILL_GRACE_S)


def _kill_group(pgid: int, grace_s: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + grace_s
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
    ``os.environ``). On timeout every process of the child's session is sent SIGTERM, then SIGKILL, and the result
    has ``timed_out=True``. Output is decoded as UTF-8 with replacement, so binary noise never raises.

    ``output_path``: stdout and stderr both go to this file as they are produced (appended, so a log survives
    a crash of ours), and the result's ``stdout`` is the file's tail. ``kill_on_parent_death``: the command
    runs under :mod:`collscope._reaper`, which ends every process the command starts (wherever it puts itself)
    when the command exits or times out, and when this process dies, even by SIGKILL.
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
            _end_launch(child.pid, reaped=False, under_reaper=kill_on_parent_death)
            out_b, err_b = child.communicate()
        except BaseException:
            _end_launch(child.pid, reaped=False, under_reaper=kill_on_parent_death)
            child.wait()
            raise
        else:  # the leader exited; what it left behind in its session is ours to end
            _end_launch(child.pid, reaped=True, under_reaper=kill_on_parent_death)
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

    def __init__(self, argv: tuple[str, ...], popen: subprocess.Popen[bytes], session_base: str | None = None,
                 *, under_reaper: bool = False) -> None:
        self.argv = argv
        self._under_reaper = under_reaper
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
        """End the child and every process of its launch (:func:`_end_launch`); the exit status."""
        _end_launch(self._popen.pid, reaped=self._popen.returncode is not None, under_reaper=self._under_reaper)
        try:
            code: int | None = self._popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self._end_session()
        return code

    def wait(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for the exit; then end what the leader left behind."""
        try:
            code = self._popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        _end_launch(self._popen.pid, reaped=True, under_reaper=self._under_reaper)
        self._end_session()
        return code

    def _end_session(self) -> None:
        _remove_session_base(self._session_base)
        self._session_base = None


def start(argv: Sequence[str], *, output_path: str | os.PathLike[str], extra_env: Mapping[str, str] | None = None,
          install_hint: str = "install it or put it on PATH", kill_on_parent_death: bool = True,
          env: Mapping[str, str] | None = None) -> Started:
    """Start ``argv`` in its own process group, stdout and stderr appended to ``output_path``; return at once.

    The caller owns the child: it must end with :meth:`Started.wait` or :meth:`Started.kill_group` (every
    process of the launch is ended either way). ``kill_on_parent_death`` runs it under :mod:`collscope._reaper` as
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
    return Started(tuple(argv), child, session_base, under_reaper=kill_on_parent_death)
