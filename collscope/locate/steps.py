"""One locate test -> the ``srun`` job step that measures it, and the environment that pins it to a rail (pure).

A step is ``srun --nodes K --ntasks K*P --ntasks-per-node P --nodelist NODES --export=ALL --kill-on-bad-exit=1
[--mpi=pmix] PROGRAM``: the program is ``python -m collscope bench --engine mpi|torch --op all_reduce --sizes S``
(rank 0 appends the record to ``--out``), or for engine nccl-tests the MPI-built ``all_reduce_perf`` itself
(``-b S -e S``; its table is parsed from the step's output). Steps of one round run at the same time on
disjoint nodes.

Ranks per node: a node test runs ``node_ranks`` ranks on its node (CPU: 2 ranks talking inside the node; GPU:
one per GPU, the NVLink path); an inter-node test runs ``net_ranks`` per node (CPU 1; GPU one per GPU).

Rails (:func:`rail_env`): on a CPU cluster rail r is the interface ``<iface_prefix><r>`` (``cl<r>`` on the
simulated cluster): ``OMPI_MCA_btl_tcp_if_include`` and ``OMPI_MCA_oob_tcp_if_include`` for mpi,
``GLOO_SOCKET_IFNAME`` for torch with gloo. On a GPU cluster rail r is its NIC: ``NCCL_IB_HCA==<nic>`` (exact
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

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Literal

from collscope.errors import ConfigError
from collscope.locate.model import TestSpec
from collscope.locate.nodelist import format_nodelist
from collscope.vocab.configs import OMPI_ASYNC_MODEX

__all__ = ["StepOptions", "LocateEngine", "step_argv", "rail_env", "launch_env", "ranks_per_node"]

LocateEngine = Literal["mpi", "torch", "nccl-tests"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOptions:
    """How every step of one locate run is launched."""

    engine: LocateEngine = "mpi"
    size_bytes: int = 16 << 20
    iters: int = 10
    warmup: int = 3
    python: str = "python3"
    """The interpreter that runs ``-m collscope bench`` on every node (the caller's ``sys.executable``)."""
    srun: str = "srun"
    srun_mpi: str | None = "pmix"
    """``--mpi=``: Open MPI 5 speaks PMIx only; ``None`` leaves Slurm's MpiDefault."""
    backend: Literal["gloo", "nccl"] = "gloo"
    """Engine torch: the process-group backend."""
    gpus_per_node: int = 0
    """0: a CPU cluster. G > 0: node tests and inter-node tests run one rank per GPU."""
    iface_prefix: str = "cl"
    """CPU rails: rail r is interface ``<iface_prefix><r>``."""
    rail_nics: tuple[str, ...] = ()
    """GPU rails: rail r is NIC ``rail_nics[r]`` (NCCL_IB_HCA)."""
    nccl_tests_binary: str = "all_reduce_perf"
    """Engine nccl-tests: the MPI build of all_reduce_perf (a name on PATH or a path)."""
    rank_timeout_s: float = 60.0
    """Each step's own bound (``collscope bench --timeout``, nccl-tests ``-T``), below the runner's kill timeout."""
    extra_srun_args: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.engine not in ("mpi", "torch", "nccl-tests"):
            raise ConfigError(f"engine={self.engine!r} is invalid; valid: mpi, torch, nccl-tests")
        if self.size_bytes < 8:
            raise ConfigError(f"size={self.size_bytes} bytes is invalid; valid: 8 bytes or more (16M is a good "
                              "bandwidth test)")
        if self.iters < 1 or self.warmup < 0:
            raise ConfigError(f"iters={self.iters}, warmup={self.warmup} are invalid; valid: iters >= 1, warmup >= 0")
        if self.gpus_per_node < 0:
            raise ConfigError(f"gpus_per_node={self.gpus_per_node} is invalid; valid: 0 (CPU) or the GPU count")
        if self.engine == "nccl-tests" and self.gpus_per_node == 0:
            raise ConfigError("engine nccl-tests needs GPUs: give --gpus-per-node G (or use engine mpi or torch)")


def ranks_per_node(spec: TestSpec, options: StepOptions) -> int:
    if spec.kind == "node":
        return options.gpus_per_node or 2
    return options.gpus_per_node or 1


def rail_env(rail: int | None, options: StepOptions) -> dict[str, str]:
    """The variables that pin a step to ``rail`` (empty for every rail)."""
    if rail is None:
        return {}
    if options.gpus_per_node or options.engine == "nccl-tests" or options.backend == "nccl":
        if rail >= len(options.rail_nics):
            raise ConfigError(f"rail {rail} has no NIC name: give --rail-nics NIC0,NIC1,... (one per rail) or "
                              "--topo with the cluster's rails")
        return {"NCCL_IB_HCA": f"={options.rail_nics[rail]}"}
    iface = f"{options.iface_prefix}{rail}"
    if options.engine == "mpi":
        return {"OMPI_MCA_btl_tcp_if_include": iface, "OMPI_MCA_oob_tcp_if_include": iface}
    return {"GLOO_SOCKET_IFNAME": iface}


def launch_env(spec: TestSpec, options: StepOptions, environ: Mapping[str, str]) -> dict[str, str]:
    """What srun's environment needs for ``spec`` on top of ``environ`` (see the module docstring)."""
    nodes = format_nodelist(spec.nodes)
    env = {"SLURM_JOB_NODELIST": nodes, "SLURM_NODELIST": nodes}
    if options.engine == "mpi" and OMPI_ASYNC_MODEX not in environ:
        env[OMPI_ASYNC_MODEX] = "1"
    return env


def _program(options: StepOptions, out_jsonl: str | PurePath) -> list[str]:
    size = str(options.size_bytes)
    timeout = f"{options.rank_timeout_s:g}"
    if options.engine == "nccl-tests":
        return [options.nccl_tests_binary, "-b", size, "-e", size, "-g", "1", "-n", str(options.iters),
                "-w", str(options.warmup), "-c", "0", "-T", str(max(1, int(options.rank_timeout_s)))]
    argv = [options.python, "-m", "collscope", "bench", "--engine", options.engine, "--op", "all_reduce",
            "--sizes", size, "--iters", str(options.iters), "--warmup", str(options.warmup),
            "--out", str(out_jsonl), "--timeout", timeout]
    if options.engine == "torch":
        argv += ["--backend", options.backend]
    return argv


def step_argv(spec: TestSpec, options: StepOptions, out_jsonl: str | PurePath) -> list[str]:
    """The srun command line of one repeat of ``spec``; ``out_jsonl`` is where rank 0 appends its record."""
    ppn = ranks_per_node(spec, options)
    k = len(spec.nodes)
    argv = [options.srun, "--nodes", str(k), "--ntasks", str(k * ppn), "--ntasks-per-node", str(ppn),
            "--nodelist", format_nodelist(spec.nodes), "--export=ALL", "--kill-on-bad-exit=1",
            "--job-name", f"locate-{spec.kind}"]
    if options.srun_mpi is not None:
        argv.append(f"--mpi={options.srun_mpi}")
    return [*argv, *options.extra_srun_args, *_program(options, out_jsonl)]
