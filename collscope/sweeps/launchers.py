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
from pathlib import PurePath
from typing import Literal, get_args

from collscope.collectives.nccl_tests.spec import (
    NcclTestsSpec,
    binary_name,
    nccl_tests_argv,
    nccl_tests_spec_for_ladder,
)
from collscope.errors import ConfigError, ParseError
from collscope.sweeps.launch_options import (
    ENV_NAME,
    ROOT_ENV,
    LaunchCommand,
    LauncherKind,
    LaunchOptions,
    MpiFlavour,
    check_choice,
    check_no_nul,
)
from collscope.sweeps.slurm_gpu import gpu_step
from collscope.sweeps.spec import Point, SweepSpec
from collscope.vocab.engines import EngineRow, engine_row

__all__ = ["build_launch", "bench_argv", "launcher_prefix", "nccl_tests_spec_for", "rank_timeout_s",
           "detect_mpi_flavour"]

_RANK_TIMEOUT_SHARE = 0.9


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
    row = _row(spec, point.op)
    if row.program != "bench":
        raise ConfigError(f"collscope bench is not the per-rank program of engine {spec.engine!r} (it runs "
                          f"{row.program})")
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
    if row.backend is not None and spec.backend is not None:
        argv += ["--backend", spec.backend]
    return argv


def _row(spec: SweepSpec, op: str | None = None) -> EngineRow:
    """The engine's row (:mod:`collscope.vocab.engines`), with ``op`` (when given) and the spec's dtype checked
    against what it measures."""
    row = engine_row(spec.engine, spec.backend)
    if op is not None:
        check_choice(f"op (engine {row.engine})", op, row.ops)
    check_choice(f"dtype (engine {row.engine})", spec.dtype, row.dtypes)
    return row


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
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise ConfigError(f"environment variable name {name!r} is invalid; valid: letters, digits and _, "
                              "not starting with a digit")
        if not isinstance(value, str):
            raise ConfigError(f"{name}={value!r} is invalid; valid: a string value")
        check_no_nul(name, value)
    return env


def _reject(kind: str, options: LaunchOptions, names: tuple[str, ...], why: str) -> None:
    for name in names:
        value = getattr(options, name)
        if value not in (None, (), False, 0):
            raise ConfigError(f"launcher {kind!r} does not take {name}={value!r}: {why}")


_SRUN_ONLY = ("srun_mpi", "cpu_bind", "gpus_per_node", "slurm_version", "cpus_per_task", "cpus_on_node",
              "one_gpu_per_task", "nodelist", "job_name", "even_placement")


def build_launch(kind: LauncherKind, spec: SweepSpec, point: Point, out_jsonl: str | PurePath,
                 options: LaunchOptions) -> LaunchCommand:
    """The command that runs ``point`` of ``spec`` with launcher ``kind``, its records going to ``out_jsonl``.

    Raises ConfigError, naming the bad value and the valid ones, for combinations that cannot run: an unknown
    launcher, options that do not apply to it (a hostfile for ``local``), a multi-node ``local`` launch, an op
    or dtype the engine does not have, a missing or mismatched nccl-tests binary. Whether srun is inside an
    allocation and whether the tools exist are the runner's checks (they need the live system).
    """
    check_choice("launcher", kind, get_args(LauncherKind))
    if spec.nranks < 1 or spec.nnodes < 1 or spec.nnodes > spec.nranks:
        raise ConfigError(f"nranks={spec.nranks}, nnodes={spec.nnodes} is invalid; valid: 1 <= nnodes <= nranks")
    env = _point_env(spec, point)
    row = _row(spec, point.op)
    if options.master_addr is not None or options.master_port is not None:
        if kind == "local" or not row.master_addr:
            raise ConfigError(f"master_addr/master_port apply to engine torch under mpirun or srun, not engine "
                              f"{spec.engine!r} with launcher {kind!r}")
        if options.master_addr is not None:
            env["MASTER_ADDR"] = options.master_addr
        if options.master_port is not None:
            env["MASTER_PORT"] = str(options.master_port)
    if options.nccl_tests_binary is not None and row.program != "nccl-tests":
        raise ConfigError(f"nccl_tests_binary applies to engine nccl-tests, not {spec.engine!r}")
    if kind == "local":
        return _local(spec, point, out_jsonl, options, env)
    if kind == "mpirun":
        return _mpirun(spec, point, out_jsonl, options, env)
    return _srun(spec, point, out_jsonl, options, env)


def _program(spec: SweepSpec, point: Point, out_jsonl: str | PurePath, options: LaunchOptions) -> list[str]:
    """The per-rank program under mpirun or srun (one process per rank, one GPU each for nccl-tests)."""
    if _row(spec).program == "nccl-tests":
        return _nccl_tests_program(spec, point, options, ngpus=1)
    return bench_argv(spec, point, out_jsonl, python=options.python, timeout_s=rank_timeout_s(spec, options))


def _records_from(spec: SweepSpec) -> Literal["out_file", "stdout"]:
    return _row(spec).records_from


def _local(spec: SweepSpec, point: Point, out_jsonl: str | PurePath, options: LaunchOptions,
           env: dict[str, str]) -> LaunchCommand:
    _reject("local", options, ("hostfile",), "it runs on this host only; use launcher 'mpirun'")
    _reject("local", options, _SRUN_ONLY, "they are srun options; use launcher 'srun'")
    if spec.nnodes != 1:
        raise ConfigError(f"nnodes={spec.nnodes} is invalid for launcher 'local'; valid: 1 (use mpirun or srun)")
    n = spec.nranks
    start = _row(spec).local_start
    if start != "mpirun":
        _reject("local", options, ("map_by", "bind_to", "oversubscribe"),
                f"they are mpirun options and engine {spec.engine!r} runs without mpirun")
    if start == "one-process":
        _reject("local", options, ("extra_args",), "a local nccl-tests launch is one process with no launcher")
        return LaunchCommand(argv=tuple(_nccl_tests_program(spec, point, options, ngpus=n)), env=env,
                             records_from="stdout")
    program = bench_argv(spec, point, out_jsonl, python=options.python, timeout_s=rank_timeout_s(spec, options))
    if start == "torchrun":
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
    if _row(spec).master_addr and spec.nnodes > 1 and not env.get("MASTER_ADDR"):
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
    check_choice("launcher", kind, ("mpirun", "srun"))
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
    if options.nodelist is not None:
        argv += ["--nodelist", options.nodelist]
    if options.job_name is not None:
        argv += ["--job-name", options.job_name]
    if options.even_placement and not options.gpus_per_node:
        if nranks % nnodes:
            raise ConfigError(f"nranks={nranks} is not a multiple of nnodes={nnodes}; valid with even_placement: "
                              "a multiple")
        argv.append(f"--ntasks-per-node={nranks // nnodes}")
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

