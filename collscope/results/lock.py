"""One writer per results directory: ``DIR/.lock`` (``fcntl.flock``), held for the sweep's life.

A sweep takes ``DIR/.lock`` exclusively and writes its host, pid and start time into it; a second sweep into the
same directory (a double ``sbatch``, a rerun while the batch job still runs) is refused at once with one line
naming that holder. The shards of a job array (``--shard I/N``) share the directory by design: each takes
``DIR/.lock`` shared and ``DIR/.lock-shard-I-of-N`` exclusively (its identity written there), so shards of one
split run side by side, while the same shard twice, a shard of another split (``0/3`` beside ``0/2`` would run
the same points), or a whole sweep beside any shard is refused. The kernel releases a lock when its holder dies,
even by SIGKILL, so a stale lock file never blocks anyone. Within one process the lock is re-entrant (the rounds
of an adaptive sweep run inside the lock of the whole sweep).
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from collscope.atomic import UnsafeFileError, checked_fd, write_all
from collscope.errors import ConfigError

__all__ = ["writer_lock", "ResultsLockedError", "LOCK_NAME"]

LOCK_NAME = ".lock"
_SHARD_PREFIX = ".lock-shard-"
_HELD: dict[tuple[int, int], int] = {}
"""(device, inode) of a directory -> how many nested holders in this process."""


class ResultsLockedError(ConfigError):
    """Another sweep writes into the results directory."""


def _open_lock(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        try:
            fd = os.open(path, flags, 0o666)
        except PermissionError:  # another user's lock file in a shared directory: flock needs no write access
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFileError(path, "a symbolic link") from None
        raise ConfigError(f"{path}: the results directory's lock cannot be opened ({exc.strerror or exc})") from None
    return checked_fd(fd, path)


def _holder(path: Path) -> str:
    """Who holds the lock file ``path``, as it wrote itself there (``host node3, pid 1234, since ...``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "a process that did not say who it is"
    try:
        text = os.read(fd, 512).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)
    return "".join(c if c.isprintable() else "?" for c in text) or "a process that did not say who it is"


def _identity(shard: tuple[int, int] | None) -> bytes:
    what = f", shard {shard[0]}/{shard[1]}" if shard else ""
    return (f"host {socket.gethostname()}, pid {os.getpid()}{what}, since "
            f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n").encode()


def _sign(fd: int, shard: tuple[int, int] | None) -> None:
    """Write who holds the lock into it (nothing when the file is another user's and read-only to us)."""
    try:
        os.ftruncate(fd, 0)
        write_all(fd, _identity(shard))
    except OSError:
        pass


def _unsign(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)  # no stale name left behind
    except OSError:
        pass


def _try_lock(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _live_shards(root: Path) -> list[tuple[str, str]]:
    """(file name, holder) of every shard lock some process holds now."""
    live = []
    for name in sorted(os.listdir(root)):
        if not name.startswith(_SHARD_PREFIX):
            continue
        try:
            fd = os.open(root / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if _try_lock(fd, fcntl.LOCK_SH):
                fcntl.flock(fd, fcntl.LOCK_UN)
            else:
                live.append((name, _holder(root / name)))
        finally:
            os.close(fd)
    return live


def _refuse(root: Path, holder: str) -> ResultsLockedError:
    return ResultsLockedError(f"{root} is being written by another sweep ({holder}); wait for it to end, or "
                              "use another --out")


@contextmanager
def writer_lock(root: Path | str, shard: tuple[int, int] | None = None) -> Iterator[None]:
    """Hold the results directory ``root`` for writing (see the module doc) while the block runs;
    ResultsLockedError naming the holder when another process writes there."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        st = os.stat(root)
    except OSError as exc:
        raise ConfigError(f"{root}: not a results directory that can be written ({exc.strerror or exc})") from None
    key = (st.st_dev, st.st_ino)
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    fds: list[int] = []
    try:
        main = _open_lock(root / LOCK_NAME)
        fds.append(main)
        if shard is None:
            if not _try_lock(main, fcntl.LOCK_EX):
                shards = _live_shards(root)
                raise _refuse(root, shards[0][1] if shards else _holder(root / LOCK_NAME))
            _sign(main, None)
        else:
            if not _try_lock(main, fcntl.LOCK_SH):
                raise _refuse(root, _holder(root / LOCK_NAME))
            mine = f"{_SHARD_PREFIX}{shard[0]}-of-{shard[1]}"
            other = [h for name, h in _live_shards(root) if not name.endswith(f"-of-{shard[1]}")]
            if other:
                raise _refuse(root, f"{other[0]}: shards of another split would run the same points")
            own = _open_lock(root / mine)
            fds.append(own)
            if not _try_lock(own, fcntl.LOCK_EX):
                raise _refuse(root, _holder(root / mine))
            _sign(own, shard)
        _HELD[key] = 1
        try:
            yield
        finally:
            del _HELD[key]
            for fd in reversed(fds):
                if shard is None or fd != main:
                    _unsign(fd)
    finally:
        for fd in reversed(fds):
            os.close(fd)  # closing the descriptor releases its lock
