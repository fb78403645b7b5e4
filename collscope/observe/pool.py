"""Processes for the CPU-bound parts of observe (parsing inputs, detecting changes), one per usable core.

Both are pure Python and numpy over independent pieces (files, series), so a pool of processes uses every core a
login node or a cron job gives; the pieces come back in order, so the results do not depend on the pool.

The pool forks, and all its processes are forked when it is made (:func:`process_pool`): a spawned or fork-server
child would run the caller's main module again (a plain nightly script calling collscope at its top level would
repeat its side effects and break the pool). A forked child holds copies of every file descriptor its parent had
at that moment, so a pool is made before its maker takes a lock (the store's writer lock is a ``flock``, which a
child's copy would keep held after the parent is killed), and each child dies with its parent
(``PR_SET_PDEATHSIG``): ``kill -9`` of an ingest leaves no process behind. The children only parse text and run
numpy on what they are sent; they never touch DuckDB or Arrow, whose threads the parent may have started.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor

from collscope.errors import ConfigError

__all__ = ["WORKERS_ENV", "workers", "process_pool"]

WORKERS_ENV = "COLLSCOPE_OBSERVE_WORKERS"
_PR_SET_PDEATHSIG = 1


def workers() -> int:
    """The processes to use: the cores this process may run on, or ``COLLSCOPE_OBSERVE_WORKERS`` (1: none, all in
    this process); ConfigError when that is not a whole number >= 1."""
    given = os.environ.get(WORKERS_ENV, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ConfigError(f"{WORKERS_ENV}={given!r} is invalid; valid: a whole number >= 1")
        return int(given)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _die_with(parent: int) -> None:
    """In each child: SIGKILL when the parent dies (Linux), and exit now if it already has."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def process_pool(count: int) -> ProcessPoolExecutor:
    """A pool of ``count`` forked processes, all started before it is returned (module doc)."""
    pool = ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context("fork"),
                               initializer=_die_with, initargs=(os.getpid(),))
    pool.submit(int).result()  # a forking pool starts every process at its first task
    return pool
