"""One locate test -> the ``srun`` job step that measures it, and the environment that pins it to a rail (pure).

A step is built by the sweeps' launcher (:func:`collscope.sweeps.launchers.build_launch`, launcher ``srun``), as
a sweep point of one size on the test's nodes: ``srun --ntasks K*P --nodes K --nodelist NODES --job-name
locate-KIND --ntasks-per-node=P [GPU options] --export=ALL --kill-on-bad-exit=1 [--mpi=pmix] PROGRAM``: the
program is ``python -m collscope bench --engine mpi|torch --op all_reduce --sizes S ... --dtype float32`` (rank 0
appends the record to ``--out``), or for engine nccl-tests the MPI-built ``all_reduce_perf`` itself (``-b S -e S
-g 1``, one process per GPU, ``-a 3``: the slowest rank's time, as the harnesses report; the sweeps' one
translation; its table is parsed from the step's output). Which program, and where its records appear, is the
engine's row (:mod:`collscope.vocab.engines`). Steps of one round run at the same time on disjoint nodes.

Ranks per node (:func:`ranks_per_node`): on CPU nodes a node test runs 2 ranks talking inside the node and an
inter-node test 1 rank per node; on GPU nodes every test runs one rank per GPU, so the node test drives every
GPU of its node over NVLink (a slow GPU or a broken NVLink slows it) and an inter-node test every GPU's NIC.
GPU steps get what the sweeps' one srun policy for GPU ranks (:func:`collscope.sweeps.slurm_gpu.gpu_step`, from
the Slurm version and the allocation's CPUs that ``collscope locate`` reads) gives for G ranks per node:
``--ntasks-per-node=G``, ``--cpus-per-task`` (the allocation's, else the node's CPUs / G: srun >= 22.05
does not inherit sbatch's), ``--cpu-bind=cores``, and the option that turns per-task GPU binding off for the Slurm
version (``--gpu-bind=none`` 21.08.1 .. 23.02, ``--tres-bind=gres/gpu:none`` from 23.11): every rank then sees
all GPUs of its node, as nccl-tests needs (it selects device ``localRank x threads x gpus``, nccl-tests
``src/common.cu``) and as NCCL needs to find its NVLink peers (NCCL issue 1066).

Rails (:func:`rail_env`): the variables of the engine's row in :mod:`collscope.vocab.engines`: on a CPU cluster
rail r is the interface ``<iface_prefix><r>`` (``cl<r>`` on the simulated cluster):
``OMPI_MCA_btl_tcp_if_include`` and ``OMPI_MCA_oob_tcp_if_include`` for mpi, ``GLOO_SOCKET_IFNAME`` for torch
with gloo; for the GPU engines (nccl-tests, torch with nccl) rail r is its NIC: ``NCCL_IB_HCA==<nic>`` (exact
match), taken from ``rail_nics`` (the topology's rails).

Launch environment (:func:`launch_env`): srun is given ``SLURM_JOB_NODELIST`` and ``SLURM_NODELIST`` equal to the
step's own nodes. Slurm 22.05's PMIx plugin (mpi/pmix_v4) routes the messages it sends through slurmd by the
job's node list indexed with the step's node ids, so a step on a subset that does not start at the job's first
node sends its fence contributions to the wrong nodes: seen on Slurm 22.05.8, a 2-node step on node[2-3] of a
node[1-4] job hung in MPI_Init in 3 of 12 runs (every run with ``SLURM_PMIX_DIRECT_CONN=false``), the stepd
logging "my peerid: 1:node2" on node3; with the step's list in those variables, 6 of 6 passed even without
direct connections. Bisection runs exactly such steps. For the mpi engine it also gets
``OMPI_MCA_pmix_base_async_modex=1`` unless the caller set it: with the modex fence in MPI_Init, Open MPI 5.0
lets a rank that leaves the fence first send before a slower peer has set MPI_COMM_WORLD up, and the peer dies
with SIGSEGV in ``mca_pml_ob1_recv_frag_callback_match`` (open-mpi/ompi#11438, fixed after 5.0 by #13559). Seen
here (Open MPI 5.0.11, Slurm 22.05.8) in 3 of 15 4-node srun steps, and in 0 of 15 with the asynchronous modex,
which fetches peers' connection data when first needed and has no such fence; the collectives measured are the
same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import cast

from collscope.errors import ConfigError
from collscope.locate.engines import rail_variables
from collscope.locate.model import TestSpec
from collscope.locate.nodelist import format_nodelist
from collscope.locate.plan import first_round, group_round
from collscope.sweeps.launch_options import LaunchCommand, LaunchOptions, SrunMpi
from collscope.sweeps.launchers import build_launch
from collscope.sweeps.slurm_gpu import SlurmVersion
from collscope.sweeps.spec import Point, SweepSpec
from collscope.vocab.configs import OMPI_ASYNC_MODEX
from collscope.vocab.engines import BackendName, EngineName, EngineRow, engine_row, rows_of

__all__ = ["StepOptions", "PlannedStep", "step_argv", "step_launch", "rail_env", "launch_env", "ranks_per_node",
           "first_steps"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOptions:
    """How every step of one locate run is launched."""

    engine: EngineName = "mpi"
    size_bytes: int = 16 << 20
    iters: int = 10
    warmup: int = 3
    python: str = "python3"
    """The interpreter that runs ``-m collscope bench`` on every node (the caller's ``sys.executable``)."""
    srun: str = "srun"
    srun_mpi: str | None = "pmix"
    """``--mpi=``: Open MPI 5 speaks PMIx only; ``None`` leaves Slurm's MpiDefault."""
    backend: BackendName = "gloo"
    """Engine torch: the process-group backend (nccl on GPU nodes)."""
    gpus_per_node: int = 0
    """0: CPU nodes (host engines). G > 0: GPU nodes, GPU engines only; every test runs one rank per GPU."""
    iface_prefix: str = "cl"
    """Host engines' rails: rail r is interface ``<iface_prefix><r>``."""
    rail_nics: tuple[str, ...] = ()
    """GPU engines' rails: rail r is NIC ``rail_nics[r]`` (NCCL_IB_HCA)."""
    nccl_tests_binary: str = "all_reduce_perf"
    """Engine nccl-tests: the MPI build of all_reduce_perf (a name on PATH or a path)."""
    rank_timeout_s: float = 60.0
    """Each step's own bound (``collscope bench --timeout``, nccl-tests ``-T``), below the runner's kill timeout."""
    extra_srun_args: tuple[str, ...] = field(default_factory=tuple)
    slurm_version: SlurmVersion | None = None
    """GPU engines: ``srun --version`` as ``(22, 5, 8)``: which option turns per-task GPU binding off (see the
    module docstring); None: ``--gpu-bind=none``."""
    cpus_per_task: int | None = None
    """GPU engines: ``--cpus-per-task`` (the allocation's ``SLURM_CPUS_PER_TASK``)."""
    cpus_on_node: int | None = None
    """GPU engines without ``cpus_per_task``: the node's CPUs (``SLURM_CPUS_ON_NODE``), shared by its G ranks."""

    def __post_init__(self) -> None:
        row = self.row  # an unknown engine or backend raises here
        if self.size_bytes < 8:
            raise ConfigError(f"size={self.size_bytes} bytes is invalid; valid: 8 bytes or more (16M is a good "
                              "bandwidth test)")
        if self.iters < 1 or self.warmup < 0:
            raise ConfigError(f"iters={self.iters}, warmup={self.warmup} are invalid; valid: iters >= 1, warmup >= 0")
        if self.gpus_per_node < 0:
            raise ConfigError(f"gpus_per_node={self.gpus_per_node} is invalid; valid: 0 (CPU) or the GPU count")
        if row.needs_gpus and self.gpus_per_node == 0:
            raise ConfigError(f"engine {row.name} needs GPUs: give --gpus-per-node G (or use engine mpi or "
                              "torch with gloo)")
        if not row.needs_gpus and self.gpus_per_node > 0:
            raise ConfigError(f"engine {row.name} measures {row.measures}, not the {self.gpus_per_node} GPUs per "
                              "node; valid on GPU nodes: nccl-tests, torch with nccl (gpus_per_node=0 tests the "
                              "host network)")

    @property
    def row(self) -> EngineRow:
        """The engine's row (:data:`collscope.vocab.engines.ENGINE_ROWS`; ``backend`` for an engine that has
        backends)."""
        return engine_row(self.engine, self.backend if len(rows_of(self.engine)) > 1 else None)


def ranks_per_node(spec: TestSpec, options: StepOptions) -> int:
    if spec.kind == "node":
        return options.gpus_per_node or 2
    return options.gpus_per_node or 1


def rail_env(rail: int | None, options: StepOptions) -> dict[str, str]:
    """The variables that pin a step to ``rail`` (empty for every rail): the engine's row says which."""
    if rail is None:
        return {}
    return rail_variables(options.row, rail, rail_nics=options.rail_nics, iface_prefix=options.iface_prefix)


def launch_env(spec: TestSpec, options: StepOptions, environ: Mapping[str, str]) -> dict[str, str]:
    """What srun's environment needs for ``spec`` on top of ``environ`` (see the module docstring)."""
    nodes = format_nodelist(spec.nodes)
    env = {"SLURM_JOB_NODELIST": nodes, "SLURM_NODELIST": nodes}
    if options.engine == "mpi" and OMPI_ASYNC_MODEX not in environ:
        env[OMPI_ASYNC_MODEX] = "1"
    return env


def step_launch(spec: TestSpec, options: StepOptions, out_jsonl: str | PurePath) -> LaunchCommand:
    """The launch of one repeat of ``spec``, built by the sweeps' srun launcher as a point of one size: its argv and
    the variables it adds (none but a GPU step's own); ``out_jsonl`` is where rank 0 appends its record."""
    row = options.row
    ppn = ranks_per_node(spec, options)
    k = len(spec.nodes)
    size = options.size_bytes
    sweep = SweepSpec(name=f"locate-{spec.kind}", engine=row.engine, backend=row.backend, ops=("all_reduce",),
                      min_bytes=size, max_bytes=size, factor=2, iters=options.iters, warmup=options.warmup,
                      check=False, dtype="float32", nranks=k * ppn, nnodes=k, repeats=1)
    # a bench program measures the one size it is given; nccl-tests takes a ladder of one rung (-b S -e S)
    point = Point(f"locate-{spec.kind}", "all_reduce", {}, sizes=(size,) if row.program == "bench" else None)
    launch = LaunchOptions(python=options.python, srun=options.srun,
                           srun_mpi=cast("SrunMpi | None", options.srun_mpi),  # LaunchOptions checks the choice
                           gpus_per_node=options.gpus_per_node or None, slurm_version=options.slurm_version,
                           cpus_per_task=options.cpus_per_task, cpus_on_node=options.cpus_on_node,
                           nodelist=format_nodelist(spec.nodes), job_name=f"locate-{spec.kind}", even_placement=True,
                           nccl_tests_binary=options.nccl_tests_binary if row.program == "nccl-tests" else None,
                           rank_timeout_s=options.rank_timeout_s, extra_args=options.extra_srun_args)
    return build_launch("srun", sweep, point, out_jsonl, launch)


def step_argv(spec: TestSpec, options: StepOptions, out_jsonl: str | PurePath) -> list[str]:
    """The srun command line of one repeat of ``spec`` (:func:`step_launch`'s argv)."""
    return list(step_launch(spec, options, out_jsonl).argv)


@dataclass(frozen=True, slots=True)
class PlannedStep:
    """One step locate would launch: the test, srun's command line, and what it adds to srun's environment."""

    round: int
    spec: TestSpec
    argv: tuple[str, ...]
    env: dict[str, str]


def first_steps(nodes: Sequence[str], options: StepOptions, *, rails: int, environ: Mapping[str, str],
                work_dir: str | PurePath) -> list[PlannedStep]:
    """The steps of locate's first rounds, which need no result: every node alone (round 1), then a group test
    of all nodes per rail (rounds 2..R+1); later rounds depend on what these measure. Nothing runs."""
    scopes: list[int | None] = [None] if rails == 1 else list(range(rails))
    rounds = [first_round(nodes), *(group_round(nodes, rail) for rail in scopes)]
    planned = []
    for number, specs in enumerate(rounds, start=1):
        for spec in specs:
            rail = "all" if spec.rail is None else f"r{spec.rail}"
            out = PurePath(work_dir) / f"<step>-{spec.kind}-{rail}.jsonl"
            launch = step_launch(spec, options, out)
            env = {**launch.env, **launch_env(spec, options, environ), **rail_env(spec.rail, options)}
            planned.append(PlannedStep(number, spec, launch.argv, env))
    return planned
