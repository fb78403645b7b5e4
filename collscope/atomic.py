"""Writing files without following links, without half-written files, and with the user's umask.

* :func:`write_text_atomic` / :func:`write_bytes_atomic`: whole-file replacement. The temporary file has an
  unpredictable name (``.<name>.<random>.tmp``, created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, as ``mkstemp``
  does), so a link planted under a predictable name is never written through; it is then given the umask's mode
  (``0666 & ~umask``: ``mkstemp``'s 0600 would hide the file from a group that shares the directory) and
  renamed over the target (a rename replaces a link, it never writes through it).
* :func:`append_bytes`: one append-only log line (``failures.jsonl``): opened with ``O_NOFOLLOW``, refused
  unless it is a regular file with one link, a missing newline at its end (a writer killed mid-line, a full disk)
  repaired first, every byte written (``os.write`` may write fewer: it is called again until all is written).
* :func:`open_append`: a log's descriptor under the same rules, for a caller that writes and reads it back.
* :func:`open_dir_nofollow`, :func:`create_new_in`, :func:`open_nofollow`: a directory opened without following a
  link, a new file created in it with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (nothing planted under the name is
  opened), a file another process made opened with ``O_NOFOLLOW``: for ``workers/`` and for the persistent
  worker, which runs below the results layer.

A file that is a symbolic link, a hard link to another name, or not a regular file is an :class:`UnsafeFileError`
naming it; a write that fails (a full disk, no permission) is a :class:`~collscope.errors.ConfigError` naming
the file and the system's reason, never a traceback.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from collscope.errors import ConfigError

__all__ = ["write_text_atomic", "write_bytes_atomic", "append_bytes", "open_append", "write_all", "umask_mode",
           "UnsafeFileError", "check_writable_fd", "checked_fd", "open_dir_nofollow", "create_new_in", "open_nofollow"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafeFileError(ConfigError):
    """A file collscope would write is a symbolic link, a hard link or not a regular file: never written through."""

    def __init__(self, path: Path | str, found: str) -> None:
        self.path = str(path)
        self.found = found
        super().__init__(f"{path}: {found}; collscope never writes through it (move it away, or use another --out)")


def umask_mode(mode: int = 0o666) -> int:
    """``mode`` less this process's umask (what ``open(..., O_CREAT, mode)`` would give a new file)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return mode & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc: read it by setting it (and put it back at once)
    os.umask(mask)
    return mode & ~mask


def write_all(fd: int, data: bytes, name: str = "") -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer: called again until done)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # a file system that takes nothing and says no error: treat as full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        view = view[written:]


def _found(st: os.stat_result) -> str | None:
    """What is wrong with a file to be written (None: a regular file with one link)."""
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink > 1:
        return f"a hard link ({st.st_nlink} names for one file)"
    return None


def check_writable_fd(fd: int, path: Path | str) -> os.stat_result:
    """``fstat(fd)``, or UnsafeFileError when it is not a regular file with one link."""
    st = os.fstat(fd)
    problem = _found(st)
    if problem is not None:
        raise UnsafeFileError(path, problem)
    return st


def checked_fd(fd: int, path: Path | str, *, blocking: bool = False) -> int:
    """``fd`` once :func:`check_writable_fd` accepts it (and, ``blocking``, set back to blocking reads and writes);
    closed before the error propagates otherwise."""
    try:
        check_writable_fd(fd, path)
        if blocking:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_error(path: Path | str, exc: OSError) -> ConfigError:
    if exc.errno == errno.ELOOP:
        return UnsafeFileError(path, "a symbolic link")
    return ConfigError(f"{path}: cannot be written ({exc.strerror or exc})")


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see the module doc); ConfigError naming it when that fails."""
    path = Path(path)
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise _write_error(path.parent, exc) from None
    tmp = ""
    try:
        for _ in range(100):
            tmp = f".{path.name}.{os.urandom(6).hex()}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dir_fd)
                break
            except FileExistsError:
                continue
        else:
            raise OSError(errno.EEXIST, "no free temporary name", str(path))
        try:
            write_all(fd, data, str(path))
            os.fchmod(fd, umask_mode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = ""
    except OSError as exc:
        raise _write_error(path, exc) from None
    finally:
        if tmp:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
        os.close(dir_fd)


def write_text_atomic(path: Path | str, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically: :func:`write_bytes_atomic`."""
    write_bytes_atomic(path, text.encode("utf-8"))


def open_append(path: Path | str) -> int:
    """A descriptor to append to ``path`` (created with the umask's mode when missing): ``O_NOFOLLOW``, and
    UnsafeFileError unless it is a regular file with one link; opened for reading too (``pread``: a log is read
    back from the descriptor that wrote it, never by opening its name again). The caller closes it."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        raise _write_error(path, exc) from None
    return checked_fd(fd, path, blocking=True)


def append_bytes(path: Path | str, data: bytes) -> None:
    """Append ``data`` (whole lines) to the log ``path``: a missing newline at its end is written first, every
    byte is written and synced (see the module doc)."""
    fd = open_append(path)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # the last line was cut (killed writer, full disk): never glue onto it
        write_all(fd, data, str(path))
        os.fsync(fd)
    except OSError as exc:
        raise _write_error(path, exc) from None
    finally:
        os.close(fd)


def _link_target(path: Path | str) -> str | None:
    """Where ``path`` points when it is a symbolic link (None: not a link, or gone)."""
    try:
        return os.readlink(path) if stat.S_ISLNK(os.lstat(path).st_mode) else None
    except OSError:
        return None


def open_dir_nofollow(path: Path | str, what: str, *, create: bool = False) -> int:
    """A descriptor of the directory ``path`` (made first when ``create`` and missing), opened with
    ``O_DIRECTORY | O_NOFOLLOW``: a link there is an UnsafeFileError naming its target, never followed; anything
    else that fails is a ConfigError naming ``what`` (``the workers/ directory``). The caller closes it."""
    if create:
        try:
            os.mkdir(path)
        except FileExistsError:
            pass  # a directory already, or a link or a file: refused below
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be created ({exc.strerror or exc})") from None
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        target = _link_target(path) if exc.errno in (errno.ELOOP, errno.ENOTDIR) else None
        if target is not None:
            raise UnsafeFileError(path, f"a symbolic link (to {target}), never followed") from None
        raise ConfigError(f"{path}: cannot be opened as {what} ({exc.strerror or exc})") from None


def create_new_in(dir_fd: int, name: str, path: Path | str, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """A new file ``name`` in the directory ``dir_fd`` (``path``: its full name, for messages), created with
    ``O_CREAT | O_EXCL | O_NOFOLLOW`` and the umask's mode: whatever is under the name already (a link planted
    there, a leftover) is never opened; that is an UnsafeFileError naming what it is. The caller closes it."""
    try:
        fd = os.open(name, flags | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, umask_mode(), dir_fd=dir_fd)
    except FileExistsError:
        try:
            found = _found(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)) or "a file"
        except OSError:
            found = "a file"
        if found == "a symbolic link":
            target = os.readlink(name, dir_fd=dir_fd)
            found = f"a symbolic link (to {target})"
        raise UnsafeFileError(path, f"{found} under this name before collscope created it, never opened") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be created ({exc.strerror or exc})") from None
    return checked_fd(fd, path)


def open_nofollow(path: Path | str, flags: int) -> int:
    """A descriptor of the file ``path`` (``flags``: ``O_RDONLY``, ``O_WRONLY | O_APPEND | O_CREAT``...), opened
    with ``O_NOFOLLOW`` (``O_CREAT``: made with the umask's mode when missing) and refused (UnsafeFileError)
    unless it is a regular file of one link: a link planted under the name is never followed. A file that cannot
    be opened is a ConfigError naming it. The caller closes it."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, umask_mode())
    except OSError as exc:
        target = _link_target(path) if exc.errno == errno.ELOOP else None
        if target is not None:
            raise UnsafeFileError(path, f"a symbolic link (to {target}), never followed") from None
        raise ConfigError(f"{path}: cannot be opened ({exc.strerror or exc})") from None
    return checked_fd(fd, path, blocking=True)
