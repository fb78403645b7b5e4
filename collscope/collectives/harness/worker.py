"""The persistent sweep worker: one MPI job that measures point after point (``--workers persistent``).

Every rank runs ``python -m collscope.collectives.harness.worker --control C --status S --rank-timeout T
[--added NAMES] [--idle-timeout S]`` under mpirun (or srun). Rank 0 reads point descriptions, one JSON object
per line, from the control file C that the sweep runner writes, and broadcasts each to every rank.
Per point, every rank:

1. sets the point's Open MPI control variables through MPI_T (:mod:`collscope.collectives.harness.mpit`);
   a variable the point does not force goes back to the value it had when the worker started;
2. creates a new communicator (``COMM_WORLD.Dup()``: coll tuned reads the forced algorithm at creation);
3. measures with the mpi4py harness (:func:`~collscope.collectives.harness.mpi.run_mpi_bench`), rank 0
   appending each size's record to the point's partial file as one ``write`` (so a rank killed mid-point
   leaves every finished size's record behind, as ``collscope bench --out`` does) and fsyncing the file once
   when the point ends;
4. frees the communicator.

What does not change between points is done once per launch: the hosts are gathered at start, and the
buffers come from one :class:`~collscope.collectives.harness.mpi.BufferPool`, sized for each point's largest size
as a launch of that point alone would size them and kept while the next point's largest size is the same (zeroed
again for every size, not allocated and faulted in again), so the time between collectives is the check pass and
the records.

Rank 0 waits for the next control line at most ``--idle-timeout`` seconds (default: the larger of the rank
timeout and 60 s; a runner that keeps a job for several rounds of an adaptive sweep gives more) and then
ends the job, as a job whose runner is gone must.

Rank 0 reports progress as JSON lines appended to the status file S: ``ready``, then per point ``start`` and
``done`` (or ``error`` for an invalid point, the same on every rank), and ``expired`` when the point ran past
``--rank-timeout`` (then the job is aborted, as the per-point harness's watchdog does). A control line
``{"end": true}`` ends the worker. ``--added`` names the variables the launch set only for the worker (e.g.
``OMPI_MCA_coll_tuned_use_dynamic_rules``): the records' settings leave them out unless the point sets them,
so they read as a one-launch-per-point run's would.

A line of control: ``{"point_id", "spec": {BenchSpec fields}, "cvars": {"coll_tuned_allreduce_algorithm": 4},
"env": {the point's variables}, "out": "/abs/points/<id>.partial.jsonl"}``.

No file is opened through a link (issue 22 item 6): the control and status files (which the sweep runner made,
under names with a random part) are opened with ``O_NOFOLLOW`` and refused unless each is a regular file of one
link, and rank 0 creates a point's partial file, before the point runs, in its directory opened with
``O_NOFOLLOW`` and with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (:mod:`collscope.atomic`): anything under that name
(a link planted there, a file left behind) is never opened, and the point ends in ``error`` on every rank. A
control or status file that is refused aborts the job with the reason.

Test hook: with ``COLLSCOPE_TESTING=1``, the point whose id is ``COLLSCOPE_TEST_HANG_POINT`` hangs on every rank
(to test timeouts); without ``COLLSCOPE_TESTING`` the variable is ignored.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from collscope.atomic import create_new_in, open_dir_nofollow, open_nofollow, write_all

__all__ = ["main", "read_control_line", "effective_env", "PointFile"]

_POLL_S = 0.001


def effective_env(environ: dict[str, str], added: set[str], point_env: dict[str, str]) -> dict[str, str]:
    """The environment a one-launch-per-point run of this point would have had: the worker's, without the
    variables added for the worker, plus the point's own."""
    env = {k: v for k, v in environ.items() if k not in added}
    env.update(point_env)
    return env


def read_control_line(fh: Any, buffer: list[bytes], idle_timeout_s: float,
                      sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """The next whole JSON line of the control file (waiting for the writer); ValueError on a bad line or when
    nothing arrives for ``idle_timeout_s``."""
    deadline = time.monotonic() + idle_timeout_s
    while True:
        chunk = fh.readline()
        if chunk:
            buffer.append(chunk)
            if chunk.endswith(b"\n"):
                line = b"".join(buffer)
                buffer.clear()
                if not line.strip():
                    continue
                doc = json.loads(line)
                if not isinstance(doc, dict):
                    raise ValueError(f"control line is not a JSON object: {line[:200]!r}")
                return doc
            continue
        if time.monotonic() > deadline:
            raise ValueError(f"no control line for {idle_timeout_s:g} s (the sweep runner is gone?)")
        sleep(_POLL_S)


def _args(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    it = iter(argv)
    for key in it:
        if not key.startswith("--") or key == "--":
            raise SystemExit(f"usage: python -m collscope.collectives.harness.worker --control C --status S "
                             f"--rank-timeout T [--added NAMES] (unexpected {key!r})")
        try:
            out[key[2:]] = next(it)
        except StopIteration:
            raise SystemExit(f"option {key} needs a value") from None
    for needed in ("control", "status", "rank-timeout"):
        if needed not in out:
            raise SystemExit(f"--{needed} is required")
    return out


class PointFile:
    """A point's partial records file on rank 0, created when the point starts (see the module doc: never through
    a link, never a file that was there; a ConfigError naming what was found): one ``write`` per record on an
    O_APPEND descriptor (each line whole, and in the file as soon as it is written: a killed worker leaves the
    finished sizes behind), one ``fsync`` when the point ends (:meth:`close`), not one per record. A file that got
    no record is removed at :meth:`close` (a point refused by the harness leaves nothing behind)."""

    def __init__(self, path: str) -> None:
        self._path = path
        directory, self._name = os.path.split(path)
        self._dir = open_dir_nofollow(directory or ".", "the directory of the point's records")
        try:
            self._fd = create_new_in(self._dir, self._name, path)
        except BaseException:
            os.close(self._dir)
            raise
        self._records = 0

    def write(self, record: Any) -> None:
        line = json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"
        write_all(self._fd, line.encode(), self._path)
        self._records += 1

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            os.fsync(self._fd)
            if not self._records:
                self._remove_empty()
        finally:
            os.close(self._fd)
            os.close(self._dir)
            self._fd = -1

    def _remove_empty(self) -> None:
        """Unlink the file this object made, if its name still holds it (by device and inode) and it is empty."""
        mine = os.fstat(self._fd)
        try:
            named = os.stat(self._name, dir_fd=self._dir, follow_symlinks=False)
            if (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino) and named.st_size == 0:
                os.unlink(self._name, dir_fd=self._dir)
        except OSError:
            pass


class _Status:
    """Progress lines (one ``write`` per line on an O_APPEND descriptor): rank 0 writes them all, except
    ``expired``, which the first rank whose watchdog fires writes (``every_rank``) before it aborts the job. The
    file is opened with ``O_NOFOLLOW`` (made when missing): a ConfigError when it is a link or not a plain file."""

    def __init__(self, path: str, rank: int) -> None:
        self._fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self._path = path
        self._rank = rank

    def __call__(self, event: str, every_rank: bool = False, **fields: Any) -> None:
        if self._rank == 0 or every_rank:
            line = json.dumps({"event": event, "time": time.time(), "rank": self._rank, **fields}) + "\n"
            write_all(self._fd, line.encode(), self._path)


def _open_control(path: str) -> tuple[Any, str | None]:
    """Rank 0's control file (read with ``O_NOFOLLOW``), or None and why it was refused."""
    from collscope.errors import ConfigError

    try:
        return os.fdopen(open_nofollow(path, os.O_RDONLY), "rb"), None
    except ConfigError as exc:
        return None, str(exc)


def main(argv: list[str]) -> int:
    args = _args(argv)
    from collscope.collectives.harness.mpi import BufferPool, import_mpi, job_hosts, run_mpi_bench
    from collscope.collectives.harness.mpit import MpiT, MpiTError
    from collscope.collectives.harness.watchdog import ABORT_CODE, Watchdog, failure_line
    from collscope.collectives.spec import BenchSpec
    from collscope.errors import ConfigError

    mpi = import_mpi()
    world = mpi.COMM_WORLD
    rank = world.Get_rank()
    try:
        status = _Status(args["status"], rank)
    except ConfigError as exc:  # the same on every rank (one shared file): nowhere to say it but stderr
        sys.stderr.write(f"error: rank {rank} (persistent worker): status file refused: {exc}\n")
        sys.stderr.flush()
        world.Abort(ABORT_CODE)
        return ABORT_CODE  # not reached: Abort ends the job
    rank_timeout_s = float(args["rank-timeout"])
    idle_timeout_s = float(args.get("idle-timeout") or max(rank_timeout_s, 60.0))
    added = {n for n in args.get("added", "").split(",") if n}
    environ = dict(os.environ)
    hang = environ.get("COLLSCOPE_TEST_HANG_POINT") if environ.get("COLLSCOPE_TESTING") == "1" else None
    mpit: MpiT | None = None
    initial: dict[str, int] = {}
    control, refused = _open_control(args["control"]) if rank == 0 else (None, None)  # for the worker's life
    buffer: list[bytes] = []
    hosts = job_hosts(mpi, world)  # once per launch: the ranks never move
    pool = BufferPool()
    status("ready", pid=os.getpid(), ranks=world.Get_size())

    def abort(message: str, point_id: str | None = None, expired: bool = False) -> None:
        if expired:
            status("expired", every_rank=True, point_id=point_id)
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
        world.Abort(ABORT_CODE)

    while True:
        doc: dict[str, Any] | None = None
        if rank == 0 and refused is not None:
            doc = {"abort": f"control file refused: {refused}"}
        elif rank == 0:
            assert control is not None
            try:
                doc = read_control_line(control, buffer, idle_timeout_s=idle_timeout_s)
            except ValueError as exc:
                doc = {"abort": f"bad control file {args['control']}: {exc}"}
        doc = world.bcast(doc, root=0)
        assert doc is not None
        if doc.get("end"):
            status("end")
            return 0
        if "abort" in doc:
            abort(f"error: rank {rank} (persistent worker): {doc['abort']}")
        point_id = str(doc["point_id"])
        status("start", point_id=point_id)
        try:
            spec_doc = dict(doc["spec"])
            if spec_doc.get("sizes") is not None:
                spec_doc["sizes"] = tuple(spec_doc["sizes"])
            spec = BenchSpec(**spec_doc)
            cvars = {str(k): int(v) for k, v in doc.get("cvars", {}).items()}
            if cvars and mpit is None:
                mpit = MpiT(mpi)
            if mpit is not None:
                for name in cvars:
                    if name not in initial:
                        initial[name] = mpit.read(name)
                for name, start_value in initial.items():
                    mpit.write(name, cvars.get(name, start_value))
        except (ConfigError, MpiTError, KeyError, TypeError, ValueError) as exc:
            status("error", point_id=point_id, message=f"{type(exc).__name__}: {exc}")
            continue
        problem: str | None = None
        out: PointFile | None = None
        if rank == 0:
            try:
                out = PointFile(str(doc["out"]))
            except (ConfigError, KeyError) as exc:  # a link or a file under the name: never opened
                problem = f"{type(exc).__name__}: {exc}"
        problem = world.bcast(problem, root=0)
        if problem is not None:  # every rank skips the point alike
            status("error", point_id=point_id, message=problem)
            continue
        env = effective_env(environ, added, {str(k): str(v) for k, v in doc.get("env", {}).items()})
        expired = (f"error: rank {rank} (mpi engine): point {point_id}: no result after {rank_timeout_s:g} s; "
                   "aborting the worker job")
        records = 0
        def on_expire(point_id: str = point_id, message: str = expired) -> None:
            abort(message, point_id, expired=True)

        with Watchdog(rank_timeout_s, on_expire):
            comm = world.Dup()
            try:
                if hang is not None and hang == point_id:
                    while True:
                        time.sleep(1)
                records = len(run_mpi_bench(spec, comm, on_record=None if out is None else out.write, env=env,
                                            hosts=hosts, pool=pool))
            except ConfigError as exc:  # the same on every rank: the point is invalid, the worker goes on
                if out is not None:
                    out.close()
                status("error", point_id=point_id, message=f"ConfigError: {exc}")
                comm.Free()
                continue
            except Exception as exc:
                abort(failure_line(rank, "mpi", exc))
            if out is not None:
                out.close()
            comm.Free()
        status("done", point_id=point_id, records=records)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
