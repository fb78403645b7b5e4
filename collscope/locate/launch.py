"""Launch failures of locate's steps, told apart from node failures (pure: text and environment in, words out).

A step can fail because a node is broken, or because the launch itself cannot work anywhere: the allocation
forbids the step (srun: "Unable to create step for job N: More processors requested than permitted" when the
allocation has fewer CPUs per node than the step's ranks), the program is missing on the nodes (slurmstepd:
"execve(): all_reduce_perf_mpi: No such file or directory"), or srun's MPI plugin cannot start the ranks (PMIx).
:func:`classify_launch` names such a failure with the launcher's own line and the fix; when every test of a
round failed the same way, :func:`collscope.locate.search.locate` stops with a :class:`LaunchFailedEverywhere`
error (exit 2: a usage or environment error) and names no node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from collscope.errors import LaunchError
from collscope.locate.model import LaunchFailure, TestResult
from collscope.sweeps.slurm_shape import allocation_shape, tasks_per_node

__all__ = ["classify_launch", "LaunchFailedEverywhere", "same_launch_failure"]

# srun's step-creation refusals that come from the allocation's shape, not from a node (Slurm's
# ESLURM_* messages: "More processors requested than permitted", "Requested node configuration is not
# available", "Memory required by task is not available").
_ALLOCATION = re.compile(r"Unable to create step for job \S+: (More processors requested than permitted|"
                         r"Requested node configuration is not available|Memory required by task is not available)")
# slurmstepd's exec failure (Slurm: "execve(): %s: %m"), and a shell's.
_MISSING = re.compile(r"execve\(\): (\S+?): (No such file or directory|Permission denied)|(\S+): command not found")
# srun's MPI plugin failing to load or set up (src/plugins/mpi/pmix), and Open MPI's PMIx client failing in
# every rank.
_LAUNCHER = re.compile(r"Couldn't find the specified plugin name for mpi/\S+|[Cc]annot create (mpi )?context for "
                       r"mpi/\S+|mpi/pmix\S*: .*error|PMIX ERROR|PMIx_Init failed|OPAL ERROR: .*PMIx")

def _line_of(text: str, start: int) -> str:
    begin = text.rfind("\n", 0, start) + 1
    end = text.find("\n", start)
    return text[begin:end if end >= 0 else len(text)].strip()[-300:]


def classify_launch(text: str, *, ranks_per_node: int, test_kind: str, environ: Mapping[str, str],
                    program: str, srun_mpi: str | None) -> LaunchFailure | None:
    """The launch failure in a failed step's output ``text``, with the launcher's line and the fix; None when the
    output does not say the launch itself failed (then the nodes may be at fault).

    ``ranks_per_node``: what the step asked for on each node (for the allocation's fix); ``program``: what each
    task runs (for a missing one); ``srun_mpi``: srun's ``--mpi=`` (for a PMIx failure)."""
    found = _ALLOCATION.search(text)
    if found:
        have = tasks_per_node(environ)
        has = f"has {have} task(s) per node" if have is not None else "does not allow the step"
        nnodes = environ.get("SLURM_JOB_NUM_NODES") or "N"
        fix = (f"the allocation {has} ({allocation_shape(environ)}); locate's {test_kind} test needs "
               f"{ranks_per_node} ranks per node: allocate with --ntasks-per-node={ranks_per_node} (or "
               f"--cpus-per-task={ranks_per_node}, or --exclusive), e.g. salloc -N {nnodes} "
               f"--ntasks-per-node={ranks_per_node}"
               + (", or sbatch slurm/locate.sh (2 tasks per node)" if ranks_per_node <= 2 else ""))
        return LaunchFailure(kind="allocation", line=_line_of(text, found.start()), fix=fix)
    found = _MISSING.search(text)
    if found:
        name = found.group(1) or found.group(3)
        fix = (f"{name} cannot be started on the nodes (each task runs {program}): the same path must exist on "
               "every node (a shared file system); for nccl-tests give --nccl-tests-dir with the MPI build, for "
               "the mpi and torch engines install collscope in an environment every node sees")
        return LaunchFailure(kind="missing program", line=_line_of(text, found.start()), fix=fix)
    found = _LAUNCHER.search(text)
    if found:
        fix = (f"srun could not start the ranks with --mpi={srun_mpi or '(Slurm default)'}: see 'srun --mpi=list' "
               "and give locate --srun-mpi with one it lists (Open MPI 5 needs pmix), or fix the PMIx setup of "
               "this Slurm")
        return LaunchFailure(kind="launcher", line=_line_of(text, found.start()), fix=fix)
    return None


def same_launch_failure(tests: Sequence[TestResult]) -> LaunchFailure | None:
    """The one launch failure every test of ``tests`` (at least 2) ended in, or None."""
    if len(tests) < 2:
        return None
    failures = [t.outcome.launch for t in tests]
    first = failures[0]
    if first is None or any(f is None or (f.kind, f.fix) != (first.kind, first.fix) for f in failures):
        return None
    return first


class LaunchFailedEverywhere(LaunchError):
    """Every test of a round failed to launch the same way: a usage or environment error, no node at fault."""

    def __init__(self, failure: LaunchFailure, tests: Sequence[TestResult]) -> None:
        self.failure = failure
        self.tests = tuple(tests)
        nodes = sorted({n for t in tests for n in t.spec.nodes})
        super().__init__(f"every test of round {tests[0].round} ({len(tests)} tests on {len(nodes)} nodes) failed "
                         f"to launch the same way ({failure.kind}), so no node is named: the launcher said "
                         f"{failure.line!r}; {failure.fix}")
