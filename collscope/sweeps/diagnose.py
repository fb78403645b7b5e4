"""Why a launch died, in words, from what the launcher printed (pure: text in, sentence out).

A point whose ranks ran on several nodes can fail because a node went away, Slurm cancelled the step, or a
rank was killed; the exit code alone ("exit code 14") does not say which. :func:`launch_diagnosis` reads the
attempt's output for the messages srun, slurmstepd and Open MPI's runtime print in those cases, and for the NCCL
warning of a launch that gave two ranks one GPU. :func:`launcher_failure` picks out the launcher's own errors (a
step srun could not create, a task killed by the runtime, a lost node or daemon, PMIx), which say nothing about the
point's configuration: a point that dies of one within seconds is started once more before it counts.
"""

from __future__ import annotations

import re

__all__ = ["launch_diagnosis", "launcher_failure", "NODE_LOST"]

NODE_LOST = ("node failure on ", "Slurm cancelled ", "a node is not answering", "the job was ending")
"""How :func:`launch_diagnosis` begins the words of a node lost under a point, or of the job ending around it: the
job's nodes, not the point's configuration, ended it (a resume measures such a point again)."""

_CANCELLED = re.compile(r"\*\*\* (JOB|STEP) (\S+) ON (\S+) CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))?(?:,[^*\n]*)? \*\*\*")
_NODE_FAIL = re.compile(r"srun: error: Node failure on (\S+)")
_TASK = re.compile(r"srun: error: (\S+): tasks? ([0-9,\-]+): (Killed|Segmentation fault|Exited with exit code \d+|"
                   r"Terminated|Aborted)")
_NO_STEP = re.compile(r"srun: error: (Unable to create step for job \S+: .*)")
_STEP_TIMEOUT = "srun: error: Timed out waiting for job step to complete"
_TASK_LAUNCH = re.compile(r"srun: error: tasks? ([0-9,\-]+) launch failed: ([^\n]*)")
"""srun's words for a task slurmd could not start (Slurm's launch/slurm plugin); srun then aborts the step ("StepId=N.M
aborted before step completely launched") and can exit 0 with nothing run: seen on a node just back in a requeued
job, where the revived slurmd still held the steps of the job's first run."""
_STEP_LAUNCH = re.compile(r"srun: error: Task launch for (\S+) failed on node (\S+): ([^\n]*)")
"""The same failure in the words other Slurm versions print ("Task launch for StepId=N.M failed on node X: <why>",
then "Application launch failed: <why>"), as published in Slurm users' CI logs (a lost slurmd connection, a CPU
layout srun could not build)."""
_PMIX_LISTENER = "The PMIx server's listener thread failed to start"
# NCCL src/init.cc (initTransportsRank) before 2.30: WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA
# device %lx"); from 2.30: WARN("Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to
# enable this configuration.")
_DUPLICATE_GPU = re.compile(r"Duplicate GPU detected : rank (\d+) and rank (\d+) both on CUDA device ([0-9a-fA-F]+)")
_SHARED_GPU = "Multiple Ranks are using the same GPU/Partition"
_ONE_GPU_PER_RANK = ("Each rank needs a GPU of its own: start at most as many ranks per node as GPUs, and check what "
                     "each rank sees (CUDA_VISIBLE_DEVICES inherited by every rank, srun --gpus-per-task / --gpu-bind, "
                     "a wrapper that sets it per local rank)")
_MPI_INIT_CRASH = re.compile(r"\((?:P?MPI_Init(?:_thread)?|ompi_mpi_init)\+0x[0-9a-f]+\)")
"""A frame of Open MPI's crash backtrace (``[node2:22665] [10] .../libmpi.so.40(PMPI_Init_thread+0xbf)[0x...]``):
a rank died inside MPI's start-up, before anything was measured."""
_LOST_DAEMON = re.compile(r"(PRTE|ORTE) has lost communication with a remote daemon|lost connection to .*daemon",
                          re.IGNORECASE)


# PMIx client and server errors: Open MPI/PRRTE "PMIX ERROR: UNREACHABLE in file ...", "PMIx_Init failed", srun's
# "mpi/pmix_v4: ... error ..." and "pmixp_..." lines of Slurm's plugin (src/plugins/mpi/pmix).
_PMIX_ERROR = re.compile(r"PMIX ERROR|PMIx_Init failed|PMIx_Connect|mpi/pmix\S*: .*error|pmixp_\w+: .*(error|fail)",
                         re.IGNORECASE)


_JOB_ENDING = "Job/step already completing or completed"
"""srun's words (Slurm's ESLURM_ALREADY_DONE) for a step asked of a job that is already ending: cancelled after a
node failed, out of time, or scancel'd, while the sweep went on to its next point."""


def _no_step(message: str) -> str:
    """srun's "Unable to create step" in words; a job already ending is said first, as a node lost is."""
    words = f"srun could not start the step ({message.strip()})"
    return f"the job was ending: {words}" if _JOB_ENDING in message else words


def _step_not_run(text: str) -> list[str]:
    """In words: a step srun could not create, and tasks it could not start ("task N launch failed")."""
    found = []
    match = _NO_STEP.search(text)
    if match:
        found.append(_no_step(match.group(1)))
    failed = dict.fromkeys([f"task {tasks} ({why.strip() or 'no reason given'})"
                            for tasks, why in _TASK_LAUNCH.findall(text)]
                           + [f"the tasks of step {step} on {node} ({why.strip() or 'no reason given'})"
                              for step, node, why in _STEP_LAUNCH.findall(text)])
    if failed:
        found.append(f"srun could not start {', '.join(failed)}: the step was aborted before all its tasks ran")
    return found


def launcher_failure(text: str) -> str | None:
    """The launcher's own error in ``text`` (srun, slurmstepd, Open MPI's runtime, PMIx), in words, or None: what
    says the launch failed, not the measurement (a task killed, a step not created, a node or daemon lost, PMIx)."""
    found: list[str] = []
    for node in dict.fromkeys(_NODE_FAIL.findall(text)):
        found.append(f"node failure on {node}")
    killed = [f"{node}: task {task}: killed" for node, task, state in _TASK.findall(text) if state == "Killed"]
    if killed:
        found.append("; ".join(dict.fromkeys(killed)))
    found.extend(_step_not_run(text))
    pmix = _PMIX_ERROR.search(text)
    if pmix:
        line = text[text.rfind("\n", 0, pmix.start()) + 1:].split("\n", 1)[0].strip()
        found.append(f"PMIx error: {line[:200]}")
    if _PMIX_LISTENER in text:
        found.append("mpirun could not start its PMIx server")
    if _LOST_DAEMON.search(text):
        found.append("Open MPI lost contact with a remote node's daemon")
    if _MPI_INIT_CRASH.search(text):
        found.append("a rank crashed inside MPI_Init (Open MPI's start-up), before anything was measured")
    return "; ".join(found) if found else None


def _cancelled(kind: str, what: str, reporter: str, why: str, *, failed: list[str]) -> str:
    """Slurm's cancellation line in words. slurmstepd prints ``*** STEP 21.1 ON node1 CANCELLED AT ... DUE TO NODE
    FAILURE ***`` on the nodes that are still up (``ON`` names the node that printed it, Slurm's
    src/slurmd/slurmstepd), so for a node failure the node it names is a survivor, never the one that failed: the
    words name the failed node (srun's ``Node failure on X``) and the reporter apart."""
    if why != "NODE FAILURE":
        cause = f" due to {why.lower()}" if why else " (a node of the allocation failed or stopped answering, "\
            "or the job was cancelled)"
        return f"Slurm cancelled {kind} {what} on {reporter}{cause}"
    others = [n for n in failed if n != reporter]
    if others:
        return (f"Slurm cancelled {kind} {what} because {', '.join(others)} failed (slurmstepd on {reporter}, which "
                "stayed up, reported the cancellation)")
    return (f"Slurm cancelled {kind} {what} because another node of the {kind} failed (slurmstepd on {reporter}, "
            "which stayed up, reported the cancellation; `sinfo -R` names the node Slurm set down)")


def launch_diagnosis(text: str) -> str | None:
    """One line naming what went wrong according to the launcher's messages in ``text``; None when it said
    nothing recognisable. A lost node comes first (``node failure on node2``), then what Slurm did because of it."""
    found: list[str] = []
    for node in dict.fromkeys(_NODE_FAIL.findall(text)):
        found.append(f"node failure on {node}")
    for kind, what, node, why in _CANCELLED.findall(text):
        found.append(_cancelled(kind.lower(), what, node, why, failed=list(dict.fromkeys(_NODE_FAIL.findall(text)))))
        break
    tasks = [f"{node}: task {task}: {state.lower()}" for node, task, state in _TASK.findall(text)]
    if tasks:
        found.append("; ".join(dict.fromkeys(tasks)))
    found.extend(_step_not_run(text))
    if _STEP_TIMEOUT in text:
        found.append("a node is not answering: srun timed out waiting for the step's tasks to end")
    if _PMIX_LISTENER in text:
        found.append("mpirun could not start its PMIx server, most likely because a killed mpirun with the same "
                     "pid left its session directory ($TMPDIR/ompi.<pid>) behind; collscope gives each mpirun it "
                     "starts a fresh one unless PRTE_MCA_prte_local_tmpdir_base is set. Remove ompi.* "
                     "directories of mpiruns no longer running")
    duplicate = _DUPLICATE_GPU.search(text)
    if duplicate:
        rank, other, bus = duplicate.groups()
        found.append(f"two ranks drove one GPU: NCCL found rank {rank} and rank {other} both on the GPU at PCI bus id "
                     f"{bus} and refused to start (ncclInvalidUsage). {_ONE_GPU_PER_RANK}")
    elif _SHARED_GPU in text:
        found.append("two ranks drove one GPU (or MIG partitions of one GPU): NCCL refused to start (ncclInvalidUsage; "
                     "NCCL_MULTI_RANK_GPU_ENABLE=1 would let them share it, and a measurement would then time ranks "
                     f"sharing a GPU). {_ONE_GPU_PER_RANK}")
    if _LOST_DAEMON.search(text):
        found.append("Open MPI lost contact with a remote node's daemon")
    return "; ".join(found) if found else None
