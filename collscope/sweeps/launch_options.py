"""What a launch is and how to launch, as values: :class:`LaunchOptions` (beyond what the SweepSpec says),
:class:`LaunchCommand` (the argv and environment of one launch) and the launcher vocabulary. Built into commands by
:mod:`collscope.sweeps.launchers`; filled from this machine by :mod:`collscope.sweeps.environment`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal, get_args

from collscope.errors import ConfigError
from collscope.sweeps.slurm_gpu import SlurmVersion
from collscope.vocab.secrets import redact_env, redacted

__all__ = ["LaunchCommand", "LaunchOptions", "LauncherKind", "MpiFlavour", "SrunMpi", "ROOT_ENV", "check_choice",
           "check_no_nul", "ENV_NAME"]

LauncherKind = Literal["local", "mpirun", "srun"]
MpiFlavour = Literal["openmpi", "mpich"]
SrunMpi = Literal["pmix", "pmi2", "none"]

ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
"""What Open MPI's mpirun needs to start ranks as root (works for Open MPI 4 and 5)."""

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class LaunchCommand:
    """One point's launch: run ``argv`` with ``env`` added to the environment."""

    argv: tuple[str, ...]
    env: dict[str, str]
    """Variables to add to the caller's environment (settings, fixed env, launcher variables)."""
    per_rank_env: tuple[dict[str, str], ...] | None = None
    """One extra environment per process when the caller starts the ranks itself; ``None`` with the bundled
    launchers (mpirun, torchrun, srun), which is what :func:`build_launch` returns."""
    records_from: Literal["out_file", "stdout"] = "out_file"
    """Where the records appear: ``out_file`` (collscope bench appends JSONL to ``--out``) or ``stdout``
    (nccl-tests prints its table; the runner keeps stdout in the point log and parses it)."""

    def display(self) -> str:
        """The command as bash reads it: ``env VAR=value ... argv``, every word ``shlex.quote``d.

        With ``per_rank_env`` one line per process, each ending in ``&``, then ``wait``. A copy-paste into bash
        runs exactly this argv and environment (except an ``argv[0]`` containing ``=``, which ``env`` would
        take for an assignment). A secret's value (:func:`collscope.vocab.secrets.is_secret_name`) is shown as
        ``REDACTED``, in ``env`` assignments and after MPICH's ``-genv NAME``; the process gets the real one.
        """
        if self.per_rank_env is None:
            return _env_line(self.env, self.argv)
        lines = [_env_line({**self.env, **extra}, self.argv) + " &" for extra in self.per_rank_env]
        return "\n".join([*lines, "wait"])


def _env_line(env: dict[str, str], argv: tuple[str, ...]) -> str:
    words = list(argv)
    for i in range(len(words) - 2):
        if words[i] == "-genv":
            words[i + 2] = redacted(words[i + 1], words[i + 2])
    return " ".join(shlex.quote(word) for word in ["env", *(f"{k}={v}" for k, v in redact_env(env).items()),
                                                   *words])


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchOptions:
    """How to launch, beyond what the SweepSpec says. Options that do not apply to a launcher are errors."""

    python: str
    """Interpreter that runs ``-m collscope bench`` on every rank (the caller passes ``sys.executable``; on
    other hosts the same path must exist)."""
    as_root: bool = False
    """The caller runs as root (the caller checks ``os.geteuid() == 0``): Open MPI's mpirun then gets
    :data:`ROOT_ENV`. Ignored by MPICH and srun, which have no such check."""
    flavour: MpiFlavour = "openmpi"
    """MPI launcher dialect for ``local`` (engine mpi) and ``mpirun``; see :func:`detect_mpi_flavour`."""
    mpirun: str = "mpirun"
    """MPI launcher executable: a name on PATH or a path."""
    srun: str = "srun"
    """Slurm's srun executable: a name on PATH or a path."""
    hostfile: str | None = None
    """``mpirun`` only: Open MPI ``--hostfile F``, MPICH ``-f F``."""
    map_by: str | None = None
    """mpirun (and local engine mpi): ``--map-by`` / ``-map-by`` value, e.g. ``ppr:4:node``. Default for a
    multi-node mpirun: ``nranks / nnodes`` ranks per node (``ppr:K:node``, MPICH ``-ppn K``)."""
    bind_to: str | None = None
    """mpirun (and local engine mpi): ``--bind-to`` / ``-bind-to`` value (``core``, ``socket``, ``none``)."""
    oversubscribe: bool | None = None
    """Open MPI ``--oversubscribe`` (more ranks than slots; it also turns binding off). ``None``: local adds it
    when ``local_cores`` is unknown or below nranks, mpirun never."""
    local_cores: int | None = None
    """Physical cores of this host (Open MPI's default slot count), for the local ``--oversubscribe`` choice."""
    srun_mpi: SrunMpi | None = None
    """srun only: ``--mpi=pmix|pmi2|none``; ``None`` leaves Slurm's MpiDefault (Open MPI 5 needs pmix)."""
    cpu_bind: str | None = None
    """srun only: ``--cpu-bind=VALUE`` (``cores``, ``none``, ``map_cpu:0,4`` ...); on GPU nodes the default is
    ``cores``."""
    gpus_per_node: int | None = None
    """srun only: GPUs of each node. ``None`` or 0: CPU nodes, srun lines as they always were; G > 0: the step gets
    what GPU ranks need (:func:`~collscope.sweeps.slurm_gpu.gpu_step`), one rank per GPU at most."""
    slurm_version: SlurmVersion | None = None
    """srun on GPU nodes: ``srun --version`` as ``(22, 5, 8)``; chooses the option that turns GPU binding off."""
    cpus_per_task: int | None = None
    """srun on GPU nodes: ``--cpus-per-task`` (the allocation's ``SLURM_CPUS_PER_TASK``)."""
    cpus_on_node: int | None = None
    """srun on GPU nodes without ``cpus_per_task``: the node's CPUs (``SLURM_CPUS_ON_NODE``), shared by its tasks."""
    one_gpu_per_task: bool = False
    """srun on GPU nodes: the site gives each task exactly one GPU whatever srun asks; nccl-tests then gets
    ``NCCL_TESTS_DEVICE=0`` (else it picks device ``local rank``, which that task does not see)."""
    nodelist: str | None = None
    """srun only: ``--nodelist NODES`` (Slurm syntax), the nodes of the step; None: srun chooses in the
    allocation."""
    job_name: str | None = None
    """srun only: ``--job-name NAME`` of the step (what ``sacct`` and ``squeue --steps`` show)."""
    even_placement: bool = False
    """srun only: ``--ntasks-per-node=nranks/nnodes`` on CPU nodes too (GPU steps always say it), so a step's
    ranks are spread evenly whatever the allocation's shape."""
    master_addr: str | None = None
    """Engine torch under mpirun or srun: ``MASTER_ADDR`` (needed by mpirun across nodes; srun derives it)."""
    master_port: int | None = None
    """Engine torch under mpirun or srun: ``MASTER_PORT``; otherwise derived from the job id (see ranks.py)."""
    nccl_tests_binary: str | None = None
    """Engine nccl-tests: the point's ``<op>_perf`` (or ``_mpi``) binary, resolved by the caller with
    :func:`~collscope.collectives.nccl_tests.run.find_nccl_tests_binary` so this module stays pure."""
    rank_timeout_s: float | None = None
    """The per-rank program's own timeout (``--timeout``, nccl-tests ``-T``); ``None``: 90 % of the spec's."""
    extra_args: tuple[str, ...] = ()
    """Launcher arguments added before the program (not for a local nccl-tests launch, which has none)."""
    forward_env: tuple[str, ...] = ()
    """Names of the caller's own variables that Open MPI's mpirun forwards to every rank with ``-x NAME`` (the
    caller fills it from its environment, see :data:`FORWARD_PREFIXES`); the values stay in the environment."""

    def __post_init__(self) -> None:
        if not isinstance(self.python, str) or not self.python:
            raise ConfigError(f"python={self.python!r} is invalid; valid: the interpreter path (sys.executable)")
        check_choice("flavour", self.flavour, get_args(MpiFlavour))
        if self.srun_mpi is not None:
            check_choice("srun_mpi", self.srun_mpi, get_args(SrunMpi))
        if not isinstance(self.extra_args, tuple) or not all(isinstance(a, str) for a in self.extra_args):
            raise ConfigError(f"extra_args={self.extra_args!r} is invalid; valid: a tuple of strings, one per "
                              "argument (no shell splitting)")
        if self.local_cores is not None and (not isinstance(self.local_cores, int) or self.local_cores < 1):
            raise ConfigError(f"local_cores={self.local_cores!r} is invalid; valid: an integer >= 1 or None")
        if self.master_port is not None and (not isinstance(self.master_port, int)
                                             or not 0 < self.master_port < 65536):
            raise ConfigError(f"master_port={self.master_port!r} is invalid; valid: 1..65535 or None")
        for name in ("gpus_per_node", "cpus_per_task", "cpus_on_node"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ConfigError(f"{name}={value!r} is invalid; valid: an integer >= 0 or None")
        if self.rank_timeout_s is not None and not self.rank_timeout_s > 0:
            raise ConfigError(f"rank_timeout_s={self.rank_timeout_s!r} is invalid; valid: seconds > 0 or None")
        for name in ("python", "mpirun", "srun", "hostfile", "map_by", "bind_to", "cpu_bind", "master_addr",
                     "nccl_tests_binary", "nodelist", "job_name"):
            check_no_nul(name, getattr(self, name))
        for arg in self.extra_args:
            check_no_nul("extra_args", arg)
        if not isinstance(self.forward_env, tuple) or not all(
                isinstance(n, str) and ENV_NAME.fullmatch(n) for n in self.forward_env):
            raise ConfigError(f"forward_env={self.forward_env!r} is invalid; valid: a tuple of environment "
                              "variable names (letters, digits and _)")


def check_choice(name: str, value: object, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ConfigError(f"{name}={value!r} is invalid; valid: {', '.join(valid)}")


def check_no_nul(name: str, value: str | None) -> None:
    if value is not None and "\0" in value:
        raise ConfigError(f"{name}={value!r} contains a NUL byte, which no argv element or variable can hold")
