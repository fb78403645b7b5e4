"""What an srun step on GPU nodes needs beyond a CPU step's line (pure: no subprocess, no environment).

:func:`gpu_step` is the one policy; ``launchers._srun`` adds what it returns to every srun line when the nodes have
GPUs (``LaunchOptions.gpus_per_node``), and CPU-only clusters keep their lines unchanged. Facts, by Slurm version
(Slurm's ``NEWS``, ``doc/man/man1/srun.1`` and ``src/common/slurm_opt.c`` of each release):

GPU binding off. From 21.08 ``--gpus-per-task`` binds each task to its own GPUs (``--gpu-bind=per_task:N`` by
default, so ``CUDA_VISIBLE_DEVICES`` lists one GPU per task); from 23.11 ``--tres-per-task=gres/gpu:N`` binds the
same way unless a binding for ``gpu`` is given on the command line. nccl-tests then dies: it picks device
``localRank * nThreads * nGpus`` (nccl-tests ``src/common.cu``, ``src/util.cu``: "Invalid number of GPUs ...
requested but only 1 were found", or "invalid device ordinal"; nccl-tests issue 300, Slurm 24.05 with
``--tres-bind=gres/gpu:per_task:1``), and NCCL in the torch engine no longer sees the node's other GPUs, so it
loses NVLink/P2P between them (NCCL issue 1066: "NCCL needs to see all GPUs on the same node"). The step turns the
binding off: ``--tres-bind=gres/gpu:none`` from 23.11 (where ``--tres-bind`` first exists and ``--gpu-bind=X``
means ``--tres-bind=gres/gpu:X``), ``--gpu-bind=none`` on 21.08.1 .. 23.02 (``none`` was added in 21.08.1),
nothing before (no per-task binding to undo). A step gets every GPU the job holds on its nodes by default
(``doc/html/gres.shtml``), so no ``--gpus`` option is needed.

One GPU per task anyway. Where the site itself gives each task one GPU (a TaskProlog or a forced binding sets
``CUDA_VISIBLE_DEVICES`` per task), nccl-tests must use device 0 of what it sees: ``NCCL_TESTS_DEVICE=0``
(read by nccl-tests >= 2.13.4, ``src/common.cu``: the first device instead of ``localRank * nThreads * nGpus``).

CPUs. From 22.05 srun no longer reads ``SLURM_CPUS_PER_TASK`` (22.05 and 23.02 read ``SRUN_CPUS_PER_TASK``;
23.11 reads ``SLURM_CPUS_PER_TASK`` again), so a step inside ``sbatch --cpus-per-task=C`` gets one CPU per task
and every GPU rank (its spinning main thread, NCCL's proxy thread, PyTorch's watchdog) shares it. The step says
``--cpus-per-task`` itself (the allocation's ``SLURM_CPUS_PER_TASK``, else the node's CPUs
``SLURM_CPUS_ON_NODE`` divided by the tasks per node), ``--ntasks-per-node`` (ranks / nodes, one per GPU) and
``--cpu-bind=cores`` unless the caller chose a binding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from collscope.errors import ConfigError, ParseError
from collscope.vocab.engines import engine_row

__all__ = ["SlurmVersion", "GpuStep", "gpu_step", "gpu_unbind_flag", "parse_slurm_version", "GPU_BIND_NONE_SINCE",
           "TRES_BIND_SINCE", "NCCL_TESTS_DEVICE_SINCE"]

SlurmVersion = tuple[int, int, int]
"""``(year, month, micro)``: ``srun --version`` ``slurm 22.05.8`` -> ``(22, 5, 8)``."""

GPU_BIND_NONE_SINCE: SlurmVersion = (21, 8, 1)
"""``--gpu-bind=none`` first accepted (NEWS 21.08.1: "Add --gpu-bind=none to disable gpu binding when using
--gpus-per-task"); 21.08.0 made ``--gpus-per-task`` bind per task."""
TRES_BIND_SINCE: SlurmVersion = (23, 11, 0)
"""``--tres-bind`` first accepted (``src/common/slurm_opt.c`` of 23.11; not in 23.02), and ``--tres-per-task``
first binds GPUs implicitly."""
NCCL_TESTS_DEVICE_SINCE = "2.13.4"
"""The nccl-tests release whose device selection reads ``NCCL_TESTS_DEVICE`` (commit d313d20, 2022-09)."""

_VERSION = re.compile(r"^\s*slurm\S*\s+(\d+)\.(\d+)(?:\.(\d+))?", re.IGNORECASE | re.MULTILINE)


def parse_slurm_version(text: str, source: str = "srun --version") -> SlurmVersion:
    """``slurm 22.05.8`` (``slurm-wlm 22.05.8`` on some distributions, ``slurm 23.11.0-0rc1``) -> ``(22, 5, 8)``;
    anything else raises ParseError."""
    match = _VERSION.search(text)
    if match is None:
        first = (text.strip().splitlines() or [""])[0]
        raise ParseError(source, None, "'slurm <major>.<minor>.<micro>' as srun --version prints it", found=first)
    return int(match[1]), int(match[2]), int(match[3] or 0)


def gpu_unbind_flag(version: SlurmVersion | None) -> str | None:
    """The srun option that turns per-task GPU binding off for ``version`` (module docstring): 23.11 and later
    ``--tres-bind=gres/gpu:none``, 21.08.1 .. 23.02 ``--gpu-bind=none``, older ``None`` (they have no per-task
    binding to undo and reject ``none``). An unknown version gets ``--gpu-bind=none``, which every Slurm from
    21.08.1 on accepts."""
    if version is None or GPU_BIND_NONE_SINCE <= version < TRES_BIND_SINCE:
        return "--gpu-bind=none"
    if version >= TRES_BIND_SINCE:
        return "--tres-bind=gres/gpu:none"
    return None


@dataclass(frozen=True, slots=True)
class GpuStep:
    """What an srun step on GPU nodes adds: options before the program and variables for every task."""

    flags: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


def gpu_step(*, nranks: int, nnodes: int, gpus_per_node: int, slurm_version: SlurmVersion | None,
             cpus_per_task: int | None, cpus_on_node: int | None, cpu_bind: str | None,
             one_gpu_per_task: bool, engine: Literal["mpi", "torch", "nccl-tests"] | str) -> GpuStep:
    """The options and variables of a GPU srun step of ``nranks`` tasks on ``nnodes`` nodes (module docstring).

    ``--ntasks-per-node`` is ``nranks / nnodes`` (a ConfigError when it does not divide, or exceeds
    ``gpus_per_node``: two ranks would share a GPU, which NCCL refuses as "Duplicate GPU"); ``--cpus-per-task`` is
    ``cpus_per_task``, else ``cpus_on_node // tasks per node`` (at least 1), else left out; ``--cpu-bind=cores``
    unless ``cpu_bind`` is given (the caller then adds its own); the GPU-binding option of ``slurm_version``;
    ``NCCL_TESTS_DEVICE=0`` for engine nccl-tests when ``one_gpu_per_task``.
    """
    if gpus_per_node < 1:
        raise ConfigError(f"gpus_per_node={gpus_per_node} is invalid for a GPU step; valid: 1 or more")
    if nranks % nnodes:
        raise ConfigError(f"nranks={nranks} is not a multiple of nnodes={nnodes}; valid on GPU nodes: one rank per "
                          f"GPU on every node, e.g. nranks={nnodes * gpus_per_node}")
    per_node = nranks // nnodes
    if per_node > gpus_per_node:
        raise ConfigError(f"nranks={nranks} on nnodes={nnodes} is {per_node} ranks per node, but each node has "
                          f"{gpus_per_node} GPU(s): ranks would share a GPU (NCCL: Duplicate GPU detected); valid: "
                          f"nranks <= {nnodes * gpus_per_node}")
    flags = [f"--ntasks-per-node={per_node}"]
    cpus = cpus_per_task if cpus_per_task else (max(1, cpus_on_node // per_node) if cpus_on_node else None)
    if cpus is not None:
        flags.append(f"--cpus-per-task={cpus}")
    if cpu_bind is None:
        flags.append("--cpu-bind=cores")
    unbind = gpu_unbind_flag(slurm_version)
    if unbind is not None:
        flags.append(unbind)
    env = {"NCCL_TESTS_DEVICE": "0"} if one_gpu_per_task and engine_row(engine).program == "nccl-tests" else {}
    return GpuStep(flags=tuple(flags), env=env)
