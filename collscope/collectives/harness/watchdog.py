"""A failing or hanging rank ends the whole MPI job quickly: the watchdog around :func:`run_mpi_bench`.

Under MPI one rank that raises, or one collective that never returns, would leave the other ranks waiting
forever. :func:`run_mpi_guarded` runs the harness on one rank with a timer: when ``timeout_s`` passes without a
result, or the harness raises, the rank reports one line (``error: rank R (mpi engine): ...``) and calls
``MPI_Abort`` with code 2, which the launcher turns into the end of every rank. A one-rank job raises collscope's
own errors instead, so the command line reports them as usual.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from collscope.errors import CollscopeError

if TYPE_CHECKING:
    from collscope.collectives.harness.mpi import OnRecord
    from collscope.collectives.spec import BenchSpec

__all__ = ["ABORT_CODE", "Watchdog", "failure_line", "run_mpi_guarded"]

ABORT_CODE = 2
"""The exit code ``MPI_Abort`` is given: the same as a usage error on the command line."""


def _stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def failure_line(rank: int, engine: str, exc: BaseException) -> str:
    """``error: rank R (ENGINE engine): Type: first line of the message`` (at most 400 characters of it)."""
    first = (str(exc).strip().splitlines() or [""])[0][:400]
    return f"error: rank {rank} ({engine} engine): {type(exc).__name__}: {first}"


class Watchdog:
    """Calls ``on_expire`` once, from a daemon thread, after ``timeout_s`` seconds unless cancelled first.

    Use as a context manager: the timer starts on entry and is cancelled on exit.
    """

    def __init__(self, timeout_s: float, on_expire: Callable[[], None]) -> None:
        self.timeout_s = timeout_s
        self._timer = threading.Timer(timeout_s, on_expire)
        self._timer.daemon = True

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def run_mpi_guarded(spec: BenchSpec, *, timeout_s: float, on_record: OnRecord | None = None,
                    report: Callable[[str], None] = _stderr, comm: Any = None,
                    on_rank: Callable[[int], None] | None = None) -> None:
    """Run the mpi4py harness on this rank; abort the whole job on a failure or after ``timeout_s`` seconds.

    ``on_record`` receives rank 0's records (other ranks pass none on). ``report`` writes the one-line reason
    before the abort (default: stderr). ``on_rank`` is told this process's rank before anything is measured
    (to quiet logging on other ranks). ConfigError from an invalid spec is raised on every rank alike, before MPI
    starts, and so is any collscope error of a one-rank job.
    """
    from collscope.collectives.harness.mpi import check_mpi_spec, import_mpi, run_mpi_bench

    check_mpi_spec(spec)  # the same on every rank: a plain error, no abort needed
    mpi = import_mpi(spec.device)  # with cuda: the rank's GPU chosen before MPI_Init
    comm = mpi.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    if on_rank is not None:
        on_rank(rank)

    def abort(message: str) -> None:
        report(message)
        sys.stderr.flush()
        comm.Abort(ABORT_CODE)

    expired = f"error: rank {rank} (mpi engine): no result after {timeout_s:g} s (--timeout); aborting the job"
    with Watchdog(timeout_s, lambda: abort(expired)):
        try:
            run_mpi_bench(spec, comm, on_record=on_record if rank == 0 else None)
        except Exception as exc:
            if size == 1 and isinstance(exc, CollscopeError):
                raise
            abort(failure_line(rank, "mpi", exc))
