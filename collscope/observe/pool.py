"""Processes for the CPU-bound parts of observe (parsing inputs, detecting changes), one per usable core.

Both are pure Python and numpy over independent pieces (files, series), so a pool of processes uses every core a
login node or a cron job gives; the pieces come back in order, so the results do not depend on the pool.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from collscope.errors import ConfigError

__all__ = ["WORKERS_ENV", "workers", "process_pool"]

WORKERS_ENV = "COLLSCOPE_OBSERVE_WORKERS"


def workers() -> int:
    """The processes to use: the cores this process may run on, or ``COLLSCOPE_OBSERVE_WORKERS`` (1: none, all in
    this process); ConfigError when that is not a whole number >= 1."""
    given = os.environ.get(WORKERS_ENV, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ConfigError(f"{WORKERS_ENV}={given!r} is invalid; valid: a whole number >= 1")
        return int(given)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def process_pool(count: int) -> ProcessPoolExecutor:
    """A pool of ``count`` forked processes. Forked, not spawned or started by a fork server: those re-run the
    caller's main module in every child (a user's script without an ``if __name__ == "__main__"`` guard would run
    again, and the pool break). The children only parse text and run numpy on what they are sent; they never
    touch DuckDB or Arrow, whose threads the parent may have started (a fork copies none of them)."""
    return ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context("fork"))
