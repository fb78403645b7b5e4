"""The Slurm allocation a launch runs in, as its variables say it, and whether a step of N ranks on M nodes fits
in it (pure: environment in, words out). Shared by sweeps (checked once before the first point) and ``locate``
(:mod:`collscope.locate.launch`, which names the allocation when every step failed to start); its GPUs per node
are :mod:`collscope.collectives.allocation`'s.

Inside an allocation, srun refuses a step that needs more CPUs on a node than the job holds there ("Unable to
create step for job N: More processors requested than permitted"), or more nodes than the job has: with
``salloc -N 4 --ntasks-per-node 1`` (1 CPU per node without ``--exclusive``) every step of 4 ranks per node
fails the same way on every node. The job's CPUs per node are ``SLURM_JOB_CPUS_PER_NODE`` (``4(x2),2``: 4 on
two nodes, then 2); its nodes ``SLURM_JOB_NUM_NODES`` (``SLURM_NNODES`` in older releases); Slurm's
``srun(1)``/``salloc(1)`` OUTPUT ENVIRONMENT VARIABLES. A step with ``--overcommit`` may place more tasks than
CPUs, so nothing is said then.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

__all__ = ["allocation_shape", "tasks_per_node", "cpus_per_node", "allocated_nodes", "step_misfit"]

_SHAPE_VARIABLES = ("SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                    "SLURM_JOB_CPUS_PER_NODE", "SLURM_CPUS_PER_TASK")
_COUNTS = re.compile(r"\s*(\d+)(?:\(x(\d+)\))?\s*")


def allocation_shape(environ: Mapping[str, str]) -> str:
    """The allocation as its variables say it: ``SLURM_JOB_NUM_NODES=4, SLURM_TASKS_PER_NODE=1(x4), ...``."""
    shown = [f"{name}={environ[name]}" for name in _SHAPE_VARIABLES if environ.get(name)]
    return ", ".join(shown) if shown else "no SLURM_* shape variables"


def tasks_per_node(environ: Mapping[str, str]) -> int | None:
    """Tasks per node of the allocation (``SLURM_NTASKS_PER_NODE``, else the first count of
    ``SLURM_TASKS_PER_NODE`` such as ``1(x4)``), or None when neither says it."""
    for name in ("SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        match = re.match(r"\s*(\d+)", environ.get(name, ""))
        if match:
            return int(match.group(1))
    return None


def cpus_per_node(environ: Mapping[str, str]) -> int | None:
    """The fewest CPUs the job holds on one of its nodes (``SLURM_JOB_CPUS_PER_NODE``: ``4(x2),2`` -> 2), or None
    when it is absent or not in Slurm's form."""
    text = environ.get("SLURM_JOB_CPUS_PER_NODE", "").strip()
    if not text:
        return None
    counts = []
    for part in text.split(","):
        match = _COUNTS.fullmatch(part)
        if match is None:
            return None
        counts.append(int(match.group(1)))
    return min(counts)


def allocated_nodes(environ: Mapping[str, str]) -> int | None:
    """The job's nodes (``SLURM_JOB_NUM_NODES``, else ``SLURM_NNODES``), or None."""
    for name in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def step_misfit(nranks: int, nnodes: int, environ: Mapping[str, str], *, cpus_per_task: int = 1,
                overcommit: bool = False) -> str | None:
    """Why srun inside this allocation (``environ``, with ``SLURM_JOB_ID``) refuses a step of ``nranks`` ranks on
    ``nnodes`` nodes, ``cpus_per_task`` CPUs each, with the shape and the fix; None when it fits, when no
    allocation is there, or when its variables do not say."""
    if not environ.get("SLURM_JOB_ID"):
        return None
    nodes, cpus = allocated_nodes(environ), cpus_per_node(environ)
    per_node = math.ceil(nranks / max(nnodes, 1))
    have_tasks = tasks_per_node(environ)
    tasks = f"{have_tasks} task(s) per node" if have_tasks is not None else "no tasks per node given"
    has = (f"this allocation has {tasks} on {nodes if nodes is not None else '?'} node(s)"
           + (f", {cpus} CPU(s) on its smallest node" if cpus is not None else "") + f" ({allocation_shape(environ)})")
    needs = f"the sweep needs {nranks} ranks on {nnodes} node(s) ({per_node} per node"
    needs += f", {cpus_per_task} CPUs each)" if cpus_per_task > 1 else ")"
    fix = (f"allocate with e.g. salloc -N {nnodes} --ntasks-per-node {per_node}"
           + (f" --cpus-per-task {cpus_per_task}" if cpus_per_task > 1 else "")
           + " (or --exclusive), or give --nranks/--nnodes that fit this allocation")
    if nodes is not None and nnodes > nodes:
        return f"{has}; {needs}: srun cannot start a step on more nodes than the job has: {fix}"
    if cpus is not None and not overcommit and per_node * cpus_per_task > cpus:
        return (f"{has}; {needs}: srun refuses such a step (\"More processors requested than permitted\"): {fix}")
    return None
