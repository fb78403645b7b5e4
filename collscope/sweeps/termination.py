"""What ends a sweep from outside, and what is left behind: SIGTERM from Slurm (a node failed, the time ran
out, scancel) turned into :class:`SweepTerminated` so the running point is written down as cancelled, the job steps
a timed-out srun point leaves, and the nodes Slurm reports down (for the failure's detail)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

from collscope import proc
from collscope.errors import CollscopeError
from collscope.topo.naming import natural_key

__all__ = ["SweepTerminated", "raise_terminated", "on_sigterm", "cancel_job_steps", "slurm_nodes_down",
           "parse_nodes_down"]

log = logging.getLogger(__name__)


class SweepTerminated(CollscopeError):
    """The sweep process got SIGTERM (Slurm cancelling the job: a node failed, the time ran out, scancel)."""

    detail: str = ""
    exit_code: int = 128 + signal.SIGTERM
    """The CLI ends with it (143, as a shell reports a process SIGTERM killed), not with 2 (bad input)."""


def raise_terminated(signum: int, frame: object) -> None:
    raise SweepTerminated(f"the sweep was stopped by {signal.Signals(signum).name}")


def on_sigterm() -> Any:
    """Turn SIGTERM into :class:`SweepTerminated` while the sweep runs (main thread only), so the running point is
    written down as cancelled, with why, before the process ends; returns the previous handler (None when not
    installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, raise_terminated)


def cancel_job_steps(timeout_s: float = 10.0) -> None:
    """After a timed-out srun point: cancel (SIGKILL) the job steps still running in this allocation. Killing srun
    alone leaves a hung or stopped task (and its step's resources) behind on the other nodes, so the next point's
    step could not start. Only numbered steps are ours; the batch step runs this sweep."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return
    try:
        listed = proc.run(["squeue", "-h", "-s", "-j", job, "-o", "%i"], timeout_s=timeout_s)
        steps = [s.strip() for s in listed.stdout.split() if s.strip().startswith(f"{job}.")
                 and s.strip().split(".", 1)[1].isdigit()]
        if steps:
            log.warning("cancelling job step(s) %s left by the timed-out point", ", ".join(steps))
            proc.run(["scancel", "--signal=KILL", *steps], timeout_s=timeout_s)
            proc.run(["scancel", *steps], timeout_s=timeout_s)
    except CollscopeError as exc:
        log.warning("could not cancel the job steps of the timed-out point: %s", exc)


def slurm_nodes_down(timeout_s: float = 3.0) -> str | None:
    """Nodes of this Slurm allocation that Slurm does not consider up, with the reason Slurm gives when it has one
    (``node2 down* (Not responding)``), from ``sinfo``: after a node failure, the node that failed (the messages of
    the step name the nodes that reported it)."""
    nodes = os.environ.get("SLURM_JOB_NODELIST")
    if not nodes:
        return None
    try:
        result = proc.run(["sinfo", "-h", "-N", "-n", nodes, "-o", "%N|%T|%E"], timeout_s=timeout_s)
    except CollscopeError:
        return None
    return ", ".join(parse_nodes_down(result.stdout)) or None


_UP_STATES = ("idle", "mixed", "allocated", "completing")


def parse_nodes_down(text: str) -> list[str]:
    """The lines of ``sinfo -h -N -o '%N|%T|%E'`` whose state is not up, as ``node2 down* (Not responding)``, in
    natural order, each node once (sinfo -N prints a node once per partition). Slurm's ``none`` reason is left
    out; a line in another shape (an older ``%N %T``) keeps its node and state."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        fields = [f.strip() for f in line.split("|", 2)] if "|" in line else line.split(None, 1)
        if len(fields) < 2 or not fields[0]:
            continue
        node, state = fields[0], fields[1]
        if state.rstrip("*~#$@+").lower() in _UP_STATES:
            continue
        reason = fields[2] if len(fields) > 2 and fields[2] and fields[2].lower() != "none" else ""
        found.setdefault(node, f"{node} {state}" + (f" ({reason})" if reason else ""))
    return [found[n] for n in sorted(found, key=natural_key)]
