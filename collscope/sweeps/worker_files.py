"""The files of one persistent worker job in ``DIR/workers/``: its control file (points in), its status file
(events out) and its output (the ranks' stdout and stderr), made and used without following a link.

``workers/`` is opened with ``O_NOFOLLOW | O_DIRECTORY`` (a link there is refused, as ``points/`` is) and each
file is created in it with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under a name with a random part
(``launch-<time>-<pid>-<random>.control``), so nothing planted under a name is ever opened (a name taken is
left alone and another drawn). The runner keeps the descriptors: control lines are appended through one, status
events read through another, the output read back (``pread``) from the descriptor it was created with, and the
launch writes to it through ``/proc/self/fd/<fd>`` (:class:`~collscope.results.logs.PointLog`). The worker job
itself gets the names (rank 0 may run on another node that shares the directory).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from collscope.atomic import check_writable_fd, open_dir_nofollow, umask_mode, write_all
from collscope.errors import ConfigError
from collscope.results.logs import PointLog

__all__ = ["WorkerFiles"]

_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NAMES = ("control", "status", "log")


def _open_dir(workers: Path) -> int:
    return open_dir_nofollow(workers, "the workers/ directory", create=True)


def _stem() -> str:
    """``launch-<time>-<pid>-<random>``: a name nobody can plant ahead of the runner."""
    return f"launch-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{os.urandom(4).hex()}"


class WorkerFiles:
    """``control``, ``status`` and ``output`` of one job, created together in ``workers``; :meth:`close` ends."""

    def __init__(self, workers: Path) -> None:
        self._dir = _open_dir(workers)
        try:
            stem, fds = self._create()
        except BaseException:
            os.close(self._dir)
            raise
        self.control, self.status, self.output = (workers / f"{stem}.{name}" for name in _NAMES)
        self._control, self._status, out = fds
        self.log = PointLog(out, self.output, None)

    def _create(self) -> tuple[str, list[int]]:
        for _ in range(100):
            stem = _stem()
            made: list[int] = []
            try:
                for name in _NAMES:
                    made.append(os.open(f"{stem}.{name}", _FLAGS, umask_mode(), dir_fd=self._dir))
                    check_writable_fd(made[-1], name)
                return stem, made
            except FileExistsError:  # a name taken (planted?): never opened; draw another
                self._undo(stem, made)
            except OSError as exc:
                self._undo(stem, made)
                raise ConfigError(f"cannot create a worker job's files in workers/ ({exc.strerror or exc})") from None
        raise ConfigError("no free name for a worker job's files in workers/")

    def _undo(self, stem: str, made: list[int]) -> None:
        for fd, name in zip(made, _NAMES, strict=False):
            os.close(fd)
            os.unlink(f"{stem}.{name}", dir_fd=self._dir)

    def append_control(self, lines: list[str]) -> None:
        """Append ``lines`` (one JSON document each) to the control file."""
        write_all(self._control, "".join(line + "\n" for line in lines).encode(), str(self.control))

    def read_status(self) -> bytes:
        """What the status file got since the last call."""
        chunks = []
        while chunk := os.read(self._status, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self, *, keep_output: bool) -> None:
        """Close every descriptor; remove the control and status files, and the output unless ``keep_output``;
        then ``workers/`` itself when it is left empty."""
        if self._dir < 0:
            return
        for fd in (self._control, self._status):
            os.close(fd)
        self.log.close()
        for path in (self.control, self.status, *(() if keep_output else (self.output,))):
            try:
                os.unlink(path.name, dir_fd=self._dir)
            except FileNotFoundError:
                pass
        os.close(self._dir)
        self._dir = -1
        try:
            os.rmdir(self.output.parent)
        except OSError:
            pass
