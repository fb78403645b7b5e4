"""Point -> command: the argv and environment that start one point's ranks (pure, no subprocess).

:func:`build_launch` is the single entry point. It returns a :class:`LaunchCommand`; ``runner.py`` executes it
with :func:`collscope.proc.run` (``extra_env=command.env``) and ``--dry-run`` prints :meth:`LaunchCommand.display`.

What each launcher starts (``P`` is the per-rank program, :func:`bench_argv`, or the nccl-tests binary):

``local``   this host only. mpi: ``mpirun -np N P`` (Open MPI; ``--oversubscribe`` when N exceeds the cores);
            torch: ``python -m torch.distributed.run --standalone --nproc-per-node N -m collscope bench ...``
            (torchrun from the same interpreter, its own free rendezvous port); nccl-tests: one process
            driving N GPUs (``-g N``).
``mpirun``  Open MPI: ``mpirun -np N [--hostfile F] [--map-by M] [--bind-to B] -x VAR ... P``; MPICH/Hydra:
            ``mpirun -n N [-f F] [-ppn K] -genv VAR VALUE ... P``. Multi-node without ``map_by`` places
            ``nranks / nnodes`` ranks per node.
``srun``    inside an allocation: ``srun --ntasks N --nodes M --export=ALL --kill-on-bad-exit=1 [--mpi=X] P``;
            on GPU nodes (``gpus_per_node``) also ``--ntasks-per-node``, ``--cpus-per-task``, ``--cpu-bind=cores``
            and per-task GPU binding turned off, by Slurm version (:mod:`collscope.sweeps.slurm_gpu`).

Environment: the point's variables (``spec.fixed_env``, then the point's settings, which win) and the
launcher's (Open MPI's run-as-root pair, ``MASTER_ADDR``/``MASTER_PORT`` for torch) are returned in
``env``, to be ADDED to the caller's environment, never written into a shell string. Open MPI does not carry
the environment to other hosts, so every name is also forwarded with ``-x NAME`` (the value stays in the
environment, so commas, quotes and newlines survive), and so is every name of the user's own environment that
the caller lists in ``LaunchOptions.forward_env`` (NCCL_*, UCX_*, OMPI_MCA_*, FI_*, CUDA_*, LD_LIBRARY_PATH, ...,
never ``CUDA_VISIBLE_DEVICES``: see :data:`~collscope.sweeps.environment.FORWARD_PREFIXES`); Hydra gets
``-genv NAME VALUE`` pairs as argv elements (and forwards the caller's whole environment by itself).
srun exports the environment it was started with; ``--export=ALL`` is explicit because a batch script started
with ``sbatch --export=NONE`` sets ``SLURM_EXPORT_ENV`` and would otherwise leave the settings behind, and the
values are not written as ``--export=ALL,VAR=value`` because Slurm splits that list on commas, so a value with
a comma (``NCCL_ALGO=Ring,Tree``) cannot be expressed there.

Timeouts: the per-rank program gets :func:`rank_timeout_s` (90 % of the point's ``timeout_s`` unless set), so a
hung collective is reported by the ranks themselves (which rank, which op) before the runner kills the group.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal, get_args

from collscope.collectives.nccl_tests.spec import (
    NcclTestsSpec,
    binary_name,
    nccl_tests_argv,
    nccl_tests_spec_for_ladder,
)
from collscope.collectives.spec import BENCH_DTYPES, BENCH_OPS
from collscope.errors import ConfigError, ParseError
from collscope.sweeps.slurm_gpu import SlurmVersion, gpu_step
from collscope.sweeps.spec import Point, SweepSpec

__all__ = ["LaunchCommand", "LaunchOptions", "LauncherKind", "MpiFlavour", "SrunMpi", "build_launch", "bench_argv",
           "launcher_prefix", "nccl_tests_spec_for", "rank_timeout_s", "detect_mpi_flavour", "ROOT_ENV"]

LauncherKind = Literal["local", "mpirun", "srun"]
MpiFlavour = Literal["openmpi", "mpich"]
SrunMpi = Literal["pmix", "pmi2", "none"]

ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
"""What Open MPI's mpirun needs to start ranks as root (works for Open MPI 4 and 5)."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RANK_TIMEOUT_SHARE = 0.9


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
        take for an assignment).
        """
        if self.per_rank_env is None:
            return _env_line(self.env, self.argv)
        lines = [_env_line({**self.env, **extra}, self.argv) + " &" for extra in self.per_rank_env]
        return "\n".join([*lines, "wait"])


def _env_line(env: dict[str, str], argv: tuple[str, ...]) -> str:
    return " ".join(shlex.quote(word) for word in ["env", *(f"{k}={v}" for k, v in env.items()), *argv])


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
        _choice("flavour", self.flavour, get_args(MpiFlavour))
        if self.srun_mpi is not None:
            _choice("srun_mpi", self.srun_mpi, get_args(SrunMpi))
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
                     "nccl_tests_binary"):
            _no_nul(name, getattr(self, name))
        for arg in self.extra_args:
            _no_nul("extra_args", arg)
        if not isinstance(self.forward_env, tuple) or not all(
                isinstance(n, str) and _ENV_NAME.fullmatch(n) for n in self.forward_env):
            raise ConfigError(f"forward_env={self.forward_env!r} is invalid; valid: a tuple of environment "
                              "variable names (letters, digits and _)")


def _choice(name: str, value: object, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ConfigError(f"{name}={value!r} is invalid; valid: {', '.join(valid)}")


def _no_nul(name: str, value: str | None) -> None:
    if value is not None and "\0" in value:
        raise ConfigError(f"{name}={value!r} contains a NUL byte, which no argv element or variable can hold")


def _num(x: float) -> str:
    """``2.0`` -> ``"2"``, ``1.5`` -> ``"1.5"``: the shortest exact text."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def rank_timeout_s(spec: SweepSpec, options: LaunchOptions) -> float:
    """The per-rank program's timeout: ``options.rank_timeout_s``, else 90 % of ``spec.timeout_s`` (>= 1 s)."""
    if options.rank_timeout_s is not None:
        return options.rank_timeout_s
    return max(1.0, spec.timeout_s * _RANK_TIMEOUT_SHARE)


def bench_argv(spec: SweepSpec, point: Point, out_jsonl: str | PurePath, *, python: str,
               timeout_s: float) -> list[str]:
    """``python -m collscope bench ...`` for one point of engine mpi or torch (every rank runs it).

    ``out_jsonl`` should be absolute: ranks may start in another directory (``srun --chdir``, remote hosts).
    """
    if spec.engine not in ("mpi", "torch"):
        raise ConfigError(f"collscope bench is the per-rank program of engines mpi and torch, not {spec.engine!r}")
    _choice(f"op (engine {spec.engine})", point.op, BENCH_OPS)
    _choice(f"dtype (engine {spec.engine})", spec.dtype, BENCH_DTYPES)
    argv = [python, "-m", "collscope", "bench", "--engine", spec.engine, "--op", point.op]
    if point.sizes is not None:
        argv += ["--sizes", ",".join(str(int(s)) for s in point.sizes)]
    else:
        argv += ["--min-bytes", str(spec.min_bytes), "--max-bytes", str(spec.max_bytes), "--factor",
                 _num(spec.factor)]
    argv += ["--iters", str(spec.iters), "--warmup", str(spec.warmup)]
    if spec.check:
        argv.append("--check")
    argv += ["--dtype", spec.dtype, "--out", str(out_jsonl), "--timeout", _num(timeout_s)]
    if spec.engine == "torch" and spec.backend is not None:
        argv += ["--backend", spec.backend]
    return argv


def nccl_tests_spec_for(spec: SweepSpec, point: Point, *, ngpus: int, timeout_s: float) -> NcclTestsSpec:
    """The nccl-tests invocation of one point: the spec's sizes, iterations and check, ``-g ngpus``, ``-T``."""
    if point.sizes is not None:
        raise ConfigError(f"point {point.point_id} lists sizes {list(point.sizes)}; engine nccl-tests measures a "
                          "ladder (-b/-e/-f) only: use the grid strategy, or engine mpi or torch")
    return nccl_tests_spec_for_ladder(op=point.op, min_bytes=spec.min_bytes, max_bytes=spec.max_bytes,
                                      factor=spec.factor, iters=spec.iters, warmup=spec.warmup, check=spec.check,
                                      dtype=spec.dtype, ngpus=ngpus, timeout_s=timeout_s, nranks=spec.nranks)


def _nccl_tests_program(spec: SweepSpec, point: Point, options: LaunchOptions, ngpus: int) -> list[str]:
    binary = options.nccl_tests_binary
    if binary is None:
        raise ConfigError("engine nccl-tests needs nccl_tests_binary: resolve it with "
                          f"find_nccl_tests_binary({point.op!r}, spec.nccl_tests_dir) and pass the path")
    names = (binary_name(point.op), binary_name(point.op, True))
    if PurePath(binary).name not in names:
        raise ConfigError(f"nccl_tests_binary={binary!r} does not run op {point.op!r}; valid names: "
                          f"{', '.join(names)}")
    return nccl_tests_argv(nccl_tests_spec_for(spec, point, ngpus=ngpus, timeout_s=rank_timeout_s(spec, options)),
                           binary)


def _point_env(spec: SweepSpec, point: Point) -> dict[str, str]:
    env = {**spec.fixed_env, **point.settings}
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ConfigError(f"environment variable name {name!r} is invalid; valid: letters, digits and _, "
                              "not starting with a digit")
        if not isinstance(value, str):
            raise ConfigError(f"{name}={value!r} is invalid; valid: a string value")
        _no_nul(name, value)
    return env


def _reject(kind: str, options: LaunchOptions, names: tuple[str, ...], why: str) -> None:
    for name in names:
        value = getattr(options, name)
        if value not in (None, (), False, 0):
            raise ConfigError(f"launcher {kind!r} does not take {name}={value!r}: {why}")


_SRUN_ONLY = ("srun_mpi", "cpu_bind", "gpus_per_node", "slurm_version", "cpus_per_task", "cpus_on_node",
              "one_gpu_per_task")


def build_launch(kind: LauncherKind, spec: SweepSpec, point: Point, out_jsonl: str | PurePath,
                 options: LaunchOptions) -> LaunchCommand:
    """The command that runs ``point`` of ``spec`` with launcher ``kind``, its records going to ``out_jsonl``.

    Raises ConfigError, naming the bad value and the valid ones, for combinations that cannot run: an unknown
    launcher, options that do not apply to it (a hostfile for ``local``), a multi-node ``local`` launch, an op
    or dtype the engine does not have, a missing or mismatched nccl-tests binary. Whether srun is inside an
    allocation and whether the tools exist are the runner's checks (they need the live system).
    """
    _choice("launcher", kind, get_args(LauncherKind))
    if spec.nranks < 1 or spec.nnodes < 1 or spec.nnodes > spec.nranks:
        raise ConfigError(f"nranks={spec.nranks}, nnodes={spec.nnodes} is invalid; valid: 1 <= nnodes <= nranks")
    env = _point_env(spec, point)
    if options.master_addr is not None or options.master_port is not None:
        if kind == "local" or spec.engine != "torch":
            raise ConfigError(f"master_addr/master_port apply to engine torch under mpirun or srun, not engine "
                              f"{spec.engine!r} with launcher {kind!r}")
        if options.master_addr is not None:
            env["MASTER_ADDR"] = options.master_addr
        if options.master_port is not None:
            env["MASTER_PORT"] = str(options.master_port)
    if options.nccl_tests_binary is not None and spec.engine != "nccl-tests":
        raise ConfigError(f"nccl_tests_binary applies to engine nccl-tests, not {spec.engine!r}")
    if kind == "local":
        return _local(spec, point, out_jsonl, options, env)
    if kind == "mpirun":
        return _mpirun(spec, point, out_jsonl, options, env)
    return _srun(spec, point, out_jsonl, options, env)


def _program(spec: SweepSpec, point: Point, out_jsonl: str | PurePath, options: LaunchOptions) -> list[str]:
    """The per-rank program under mpirun or srun (one process per rank, one GPU each for nccl-tests)."""
    if spec.engine == "nccl-tests":
        return _nccl_tests_program(spec, point, options, ngpus=1)
    return bench_argv(spec, point, out_jsonl, python=options.python, timeout_s=rank_timeout_s(spec, options))


def _records_from(spec: SweepSpec) -> Literal["out_file", "stdout"]:
    return "stdout" if spec.engine == "nccl-tests" else "out_file"


def _local(spec: SweepSpec, point: Point, out_jsonl: str | PurePath, options: LaunchOptions,
           env: dict[str, str]) -> LaunchCommand:
    _reject("local", options, ("hostfile",), "it runs on this host only; use launcher 'mpirun'")
    _reject("local", options, _SRUN_ONLY, "they are srun options; use launcher 'srun'")
    if spec.nnodes != 1:
        raise ConfigError(f"nnodes={spec.nnodes} is invalid for launcher 'local'; valid: 1 (use mpirun or srun)")
    n = spec.nranks
    if spec.engine != "mpi":
        _reject("local", options, ("map_by", "bind_to", "oversubscribe"),
                f"they are mpirun options and engine {spec.engine!r} runs without mpirun")
    if spec.engine == "nccl-tests":
        _reject("local", options, ("extra_args",), "a local nccl-tests launch is one process with no launcher")
        return LaunchCommand(argv=tuple(_nccl_tests_program(spec, point, options, ngpus=n)), env=env,
                             records_from="stdout")
    program = bench_argv(spec, point, out_jsonl, python=options.python, timeout_s=rank_timeout_s(spec, options))
    if spec.engine == "torch":
        argv = [options.python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                "--nproc-per-node", str(n), *options.extra_args, *program[1:]]
        return LaunchCommand(argv=tuple(argv), env=env)
    if options.flavour == "mpich":
        _reject("local", options, ("oversubscribe",), "MPICH's Hydra always allows more ranks than cores")
        argv = [options.mpirun, "-n", str(n), *_placement(options, "-"), *options.extra_args, *program]
        return LaunchCommand(argv=tuple(argv), env=env)
    over = options.oversubscribe
    if over is None:
        over = options.local_cores is None or n > options.local_cores
    argv = [options.mpirun, "-np", str(n), *(["--oversubscribe"] if over else []), *_placement(options, "--"),
            *options.extra_args, *program]
    return LaunchCommand(argv=tuple(argv), env={**env, **(ROOT_ENV if options.as_root else {})})


def _placement(options: LaunchOptions, dash: str) -> list[str]:
    """``--map-by``/``--bind-to`` (Open MPI, ``dash="--"``) or ``-map-by``/``-bind-to`` (Hydra, ``dash="-"``)."""
    out: list[str] = []
    if options.map_by is not None:
        out += [f"{dash}map-by", options.map_by]
    if options.bind_to is not None:
        out += [f"{dash}bind-to", options.bind_to]
    return out


def _mpirun(spec: SweepSpec, point: Point, out_jsonl: str | PurePath, options: LaunchOptions,
            env: dict[str, str]) -> LaunchCommand:
    if spec.engine == "torch" and spec.nnodes > 1 and not env.get("MASTER_ADDR"):
        raise ConfigError("engine torch under mpirun on several nodes needs master_addr (the host of rank 0, "
                          "usually the first host of the hostfile)")
    program = _program(spec, point, out_jsonl, options)
    prefix = launcher_prefix("mpirun", nranks=spec.nranks, nnodes=spec.nnodes, engine=spec.engine, env=env,
                             options=options)
    return LaunchCommand(argv=(*prefix.argv, *program), env=prefix.env, records_from=_records_from(spec))


def _srun(spec: SweepSpec, point: Point, out_jsonl: str | PurePath, options: LaunchOptions,
          env: dict[str, str]) -> LaunchCommand:
    prefix = launcher_prefix("srun", nranks=spec.nranks, nnodes=spec.nnodes, engine=spec.engine, env=env,
                             options=options)
    return LaunchCommand(argv=(*prefix.argv, *_program(spec, point, out_jsonl, options)), env=prefix.env,
                         records_from=_records_from(spec))


def launcher_prefix(kind: Literal["mpirun", "srun"], *, nranks: int, nnodes: int, engine: str,
                    env: dict[str, str], options: LaunchOptions) -> LaunchCommand:
    """The launcher part of a command (its argv up to, not including, the per-rank program, ``extra_args``
    last) and the environment to add: what :func:`build_launch` puts before its program, for a caller that
    starts a program of its own under mpirun or srun (``collscope bench --engine nccl-tests --launcher``).
    ``env`` holds the variables every rank needs (mpirun forwards each by name)."""
    _choice("launcher", kind, ("mpirun", "srun"))
    if nranks < 1 or nnodes < 1 or nnodes > nranks:
        raise ConfigError(f"nranks={nranks}, nnodes={nnodes} is invalid; valid: 1 <= nnodes <= nranks")
    if kind == "srun":
        argv, env = _srun_prefix(nranks, nnodes, engine, env, options)
    else:
        argv, env = _mpirun_prefix(nranks, nnodes, env, options)
    return LaunchCommand(argv=(*argv, *options.extra_args), env=env)


def _mpirun_prefix(nranks: int, nnodes: int, env: dict[str, str],
                   options: LaunchOptions) -> tuple[list[str], dict[str, str]]:
    _reject("mpirun", options, _SRUN_ONLY, "they are srun options; use launcher 'srun'")
    per_node = None
    if nnodes > 1 and options.map_by is None:
        if nranks % nnodes:
            raise ConfigError(f"nranks={nranks} is not a multiple of nnodes={nnodes}; valid: a multiple, or set "
                              "map_by to place the ranks yourself")
        per_node = nranks // nnodes
    if options.flavour == "mpich":
        _reject("mpirun", options, ("oversubscribe",), "MPICH's Hydra always allows more ranks than cores")
        argv = [options.mpirun, "-n", str(nranks)]
        if options.hostfile is not None:
            argv += ["-f", options.hostfile]
        if per_node is not None:
            argv += ["-ppn", str(per_node)]
        argv += _placement(options, "-")
        for name, value in env.items():
            argv += ["-genv", name, value]
        return argv, env
    env = {**env, **(ROOT_ENV if options.as_root else {})}
    argv = [options.mpirun, "-np", str(nranks)]
    if options.hostfile is not None:
        argv += ["--hostfile", options.hostfile]
    if per_node is not None:
        argv += ["--map-by", f"ppr:{per_node}:node"]
    argv += _placement(options, "--")
    if options.oversubscribe:
        argv.append("--oversubscribe")
    for name in (*env, *(n for n in options.forward_env if n not in env)):
        argv += ["-x", name]
    return argv, env


def _srun_prefix(nranks: int, nnodes: int, engine: str, env: dict[str, str],
                 options: LaunchOptions) -> tuple[list[str], dict[str, str]]:
    _reject("srun", options, ("hostfile", "map_by", "bind_to", "oversubscribe"),
            "they are mpirun options; srun places tasks from the allocation (use cpu_bind or extra_args)")
    argv = [options.srun, "--ntasks", str(nranks), "--nodes", str(nnodes)]
    if options.gpus_per_node:
        step = gpu_step(nranks=nranks, nnodes=nnodes, gpus_per_node=options.gpus_per_node,
                        slurm_version=options.slurm_version, cpus_per_task=options.cpus_per_task,
                        cpus_on_node=options.cpus_on_node, cpu_bind=options.cpu_bind,
                        one_gpu_per_task=options.one_gpu_per_task, engine=engine)
        argv += step.flags
        env = {**step.env, **env}  # a point that sets NCCL_TESTS_DEVICE itself wins
    argv += ["--export=ALL", "--kill-on-bad-exit=1"]
    if options.srun_mpi is not None:
        argv.append(f"--mpi={options.srun_mpi}")
    if options.cpu_bind is not None:
        argv.append(f"--cpu-bind={options.cpu_bind}")
    return argv, env


def detect_mpi_flavour(mpirun_version_text: str, source: str = "mpirun --version") -> MpiFlavour:
    """Which launcher dialect printed this ``mpirun --version`` text: ``openmpi`` or ``mpich``.

    Open MPI prints ``mpirun (Open MPI) 5.0.x`` (``(Open RTE)`` in old releases); MPICH, MVAPICH and Intel MPI
    use Hydra (``HYDRA build details:``; Intel MPI: ``Intel(R) MPI Library``). Anything else raises ParseError.
    """
    text = mpirun_version_text
    if re.search(r"\(Open (MPI|RTE)\)", text) or re.search(r"^\s*Open MPI\b", text, re.MULTILINE):
        return "openmpi"
    if re.search(r"HYDRA build details|Intel\(R\) MPI Library|\bMPICH\b|MVAPICH", text):
        return "mpich"
    first = (text.strip().splitlines() or [""])[0]
    raise ParseError(source, None, "'(Open MPI)' or 'HYDRA build details' (MPICH, Intel MPI, MVAPICH)",
                     found=first)

