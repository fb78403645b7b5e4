"""A point's log (``points/<id>.log``, ``points/<id>.verify.log``): opened without following links, written and
read back through one descriptor.

Whatever sits under a log's name that collscope did not make, a symbolic link (to any file), a hard link to
another name, a FIFO, a directory, is moved aside (``<name>.damaged-<time>``, never deleted, never opened) and a
new log is started; the caller gets a note saying so. The log is then created with ``O_NOFOLLOW`` and the umask's
mode, written through its descriptor, and read back from that descriptor (``pread``), never by opening its name
again. A launched command's output goes to the same file through ``/proc/self/fd/<fd>``, which names the open
file, not the path (a link planted under the name after the open changes nothing).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import TracebackType

from collscope.atomic import UnsafeFileError, open_append, umask_mode, write_all
from collscope.errors import ConfigError
from collscope.files import kind_of
from collscope.results.points import move_aside

__all__ = ["PointLog", "open_log", "create_log", "read_log_tail"]


def _problem(path: Path) -> str | None:
    """What makes the entry at ``path`` something collscope must not write (None: missing or a plain file)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"a symbolic link (to {os.readlink(path)})"
    if not stat.S_ISREG(st.st_mode):
        return kind_of(st.st_mode)
    if st.st_nlink > 1:
        return f"a hard link ({st.st_nlink} names for one file)"
    return None


class PointLog:
    """An open log: :meth:`write`, :meth:`read_from`, :attr:`output_path` for a child's output; a context manager."""

    def __init__(self, fd: int, path: Path, note: str | None) -> None:
        self.fd = fd
        self.path = path
        self.note = note
        """Set when something else was under the log's name and was moved aside (say it to the user)."""

    @property
    def output_path(self) -> str:
        """A name of this open file for a child's stdout (``/proc/self/fd/<fd>``; the path where /proc is missing)."""
        proc_name = f"/proc/self/fd/{self.fd}"
        return proc_name if os.path.exists(proc_name) else str(self.path)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def write(self, text: str) -> None:
        try:
            write_all(self.fd, text.encode("utf-8", "replace"), str(self.path))
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot be written ({exc.strerror or exc})") from None

    def read_from(self, offset: int) -> str:
        """The log's text from byte ``offset`` to its end, read from the descriptor."""
        chunks = []
        while True:
            chunk = os.pread(self.fd, 1 << 20, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # a caller that raised before closing it leaks no descriptor
        self.close()

    def __enter__(self) -> PointLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def open_log(path: Path, *, truncate: bool = False) -> PointLog:
    """The log at ``path``, appended to (``truncate``: emptied first), after moving aside anything under its
    name that is not a plain file of one link (see the module doc)."""
    note = None
    problem = _problem(path)
    if problem is not None:
        aside = move_aside(path)
        note = f"{path.name} was {problem}, never followed; moved aside to {aside.name}, a new log is started"
    try:
        fd = open_append(path)
    except UnsafeFileError:  # swapped in between: move that aside too, once
        aside = move_aside(path)
        note = f"{path.name} was replaced while opened; moved aside to {aside.name}, a new log is started"
        fd = open_append(path)
    if truncate:
        os.ftruncate(fd, 0)
    return PointLog(fd, path, note)


def create_log(path: Path) -> PointLog:
    """A new log at ``path``, created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (the umask's mode): whatever is under
    the name (a link planted there, a leftover) is moved aside first, never opened, and the note says so."""
    note = None
    for _ in range(3):
        if os.path.lexists(path):
            found = _problem(path) or "a file already"
            aside = move_aside(path)
            note = f"{path.name} was {found} before collscope made it, never followed; moved aside to {aside.name}"
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         umask_mode())
        except FileExistsError:  # planted again in between: move that aside too
            continue
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be created ({exc.strerror or exc})") from None
        return PointLog(fd, path, note)
    raise UnsafeFileError(path, "replaced each time it was made")


def read_log_tail(path: Path, limit_chars: int) -> str:
    """The last ``limit_chars`` characters of a log, opened without following a link; a link, a FIFO or a hard
    link gives a sentence saying so instead of any content."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        found = _problem(path) or exc.strerror or str(exc)
        return f"(no log tail: {path.name} is {found}; not followed)"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            found = kind_of(st.st_mode) if not stat.S_ISREG(st.st_mode) else "a hard link to another name"
            return f"(no log tail: {path.name} is {found}; not read)"
        start = max(0, st.st_size - 4 * limit_chars)
        data = os.pread(fd, st.st_size - start, start)
        return data[-limit_chars:].decode("utf-8", "replace")
    except OSError as exc:
        return f"(no log tail: {exc.strerror or exc})"
    finally:
        os.close(fd)
