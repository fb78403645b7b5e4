"""Reading the files a user hands us, and checking the places we will write, before any work starts.

Every input file goes through :func:`read_input_bytes` (or :func:`read_input_text`): a FIFO, a socket, a device
or a directory is refused without ever being opened for a blocking read (the file is opened with
``O_NONBLOCK`` and checked with ``fstat`` before reading, so a path swapped for a FIFO between two calls is
caught too); a dangling symlink is named as such; text that is not UTF-8 is an error naming the line.
Output directories go through :func:`check_output_dir`: the directory is created when missing and a file
can be written in it. Every path collscope writes is made absolute first (:func:`absolute_path`), from the
directory collscope was started in: ranks and job steps started elsewhere (``srun --chdir``, another node, a step
whose node lacks the directory) write where collscope reads, and a temporary file and its target are never named
through two different mounts. Every problem is a :class:`~collscope.errors.ParseError` (inputs) or
:class:`~collscope.errors.ConfigError` (outputs) naming the path.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from collscope.errors import ConfigError, ParseError, shown
from collscope.units import parse_size

__all__ = ["read_input_bytes", "read_input_text", "size_limit_from_env",
           "decode_text", "check_output_dir", "absolute_path", "kind_of", "UnreadableFileError"]

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words (``a FIFO (named pipe)``, ``a regular file``...)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


class UnreadableFileError(ParseError):
    """The file exists but this user may not read it (EACCES): a permission to fix, not a damaged file."""


def read_input_bytes(path: Path | str, what: str = "a regular file", *, follow_links: bool = True,
                     max_bytes: int | None = None, why_capped: str = "") -> bytes:
    """The bytes of the regular file ``path``; anything else is a ParseError saying what was found.

    ``what`` says what the file should be (``a Measurement JSONL file``), for the message. ``follow_links=False``
    (the files of a results directory): a symbolic link is refused, never followed (``O_NOFOLLOW``). A file this
    user may not read is an :class:`UnreadableFileError`. ``max_bytes``: a larger file is refused before a byte is
    read, ``why_capped`` saying why and how to raise the cap.
    """
    name = str(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except PermissionError as exc:
        raise UnreadableFileError(name, None, what, found=f"{exc.strerror} (unreadable for this user)") from None
    except FileNotFoundError:
        if os.path.islink(path):
            raise ParseError(name, None, what, found=f"a symlink to a missing target ({os.readlink(path)})") from None
        raise ParseError(name, None, what, found="no such file") from None
    except IsADirectoryError:
        raise ParseError(name, None, what, found="a directory") from None
    except OSError as exc:
        if not follow_links and exc.errno == errno.ELOOP and os.path.islink(path):
            found = f"a symbolic link (to {os.readlink(path)}), not followed"
            raise ParseError(name, None, what, found=found) from None
        raise ParseError(name, None, what, found=exc.strerror or str(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ParseError(name, None, what, found=kind_of(mode))
        size = os.fstat(fd).st_size
        if max_bytes is not None and size > max_bytes:
            raise ParseError(name, None, f"{what} of at most {max_bytes:,} bytes{why_capped}",
                             found=f"{size:,} bytes")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    except OSError as exc:
        raise ParseError(name, None, what, found=exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def size_limit_from_env(name: str, example: str) -> int | None:
    """The byte size the environment variable ``name`` sets (``16G``), None when it is unset or blank; a value
    that is not a size is a ConfigError naming the variable (``example``: sizes to suggest, ``4G or 16G``)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return parse_size(raw)
    except ValueError:
        raise ConfigError(f"{name}={shown(raw)}: expected a size such as {example}") from None


def decode_text(data: bytes, source: str, what: str = "UTF-8 text") -> str:
    """``data`` as UTF-8 text; bytes that are not name the line and the offset (a binary file, a wrong encoding)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ParseError(source, line, what, found=f"bytes that are not UTF-8 text (byte {exc.start}: "
                         f"{data[exc.start:exc.start + 4]!r}); a binary or damaged file") from None


def read_input_text(path: Path | str, what: str = "a UTF-8 text file", *, max_bytes: int | None = None,
                    why_capped: str = "") -> str:
    """The text of the regular file ``path`` (see :func:`read_input_bytes` and :func:`decode_text`)."""
    return decode_text(read_input_bytes(path, what, max_bytes=max_bytes, why_capped=why_capped), str(path), what)


def absolute_path(path: Path | str, what: str = "output path") -> Path:
    """``path`` made absolute from the working directory (an absolute one as it is; ``..`` and links left as
    written, never resolved).

    The working directory's name must reach the directory itself: a process that entered another mount namespace
    keeping its directory (``nsenter --wd``, as the simulated cluster's ``exec`` does) may sit in a directory
    that its namespace knows under that name as another directory, or not at all. That is a ConfigError naming
    it, with the way out (``cd`` there again, or an absolute path), never files written somewhere else.
    """
    given = Path(path)
    if given.is_absolute():
        return given
    try:
        here = os.getcwd()
        same = os.path.samestat(os.stat("."), os.stat(here))
    except OSError as exc:
        raise ConfigError(f"{what} {given}: relative to a working directory that cannot be named "
                          f"({exc.strerror or exc}); give an absolute path") from None
    if not same:
        raise ConfigError(f"{what} {given}: the working directory {here} is not the directory of that name here "
                          "(entered from another mount namespace?); cd into it again or give an absolute path")
    return Path(here) / given


def check_output_dir(path: Path | str, what: str = "output directory") -> Path:
    """Make sure ``path`` is a directory we can write, before any work starts; ConfigError naming it otherwise.
    Returns it absolute (:func:`absolute_path`).

    The directory (and its parents) is created when missing, and a probe file is created and removed in it:
    asking the file system is the only check that holds on /proc, read-only mounts and full disks.
    """
    target = absolute_path(path, what)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{what} {target}: {_found(target)}, not a directory") from None
    except OSError as exc:
        raise ConfigError(f"{what} {target}: cannot be created ({exc.strerror or exc})") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".collscope-write-test.", dir=target)
    except OSError as exc:
        raise ConfigError(f"{what} {target}: not writable ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    return target


def _found(path: Path) -> str:
    try:
        return f"is {kind_of(path.stat().st_mode)}"
    except FileNotFoundError:
        return "is a symlink to a missing target" if path.is_symlink() else "is missing"
    except OSError as exc:
        return exc.strerror or str(exc)
