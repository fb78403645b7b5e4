"""Who am I in the job: rank, world size, local rank, master address, from the launcher's environment.

One pure function, :func:`rank_info`, reads an environment mapping and returns a :class:`RankInfo`.
Schemes are tried in this order, the first whose variables are present wins (``source`` names it):

``torchrun``  ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` (node index),
              ``GROUP_WORLD_SIZE`` (nodes), ``MASTER_ADDR``, ``MASTER_PORT``. First because torchrun inside
              an ``srun`` or ``mpirun`` step still sees the outer launcher's variables.
``openmpi``   ``OMPI_COMM_WORLD_RANK``/``_SIZE``/``_LOCAL_RANK``/``_LOCAL_SIZE`` (mpirun, prterun).
``pmi``       ``PMI_RANK``/``PMI_SIZE`` (MPICH Hydra, Intel MPI); ``MPI_LOCALRANKID``/``MPI_LOCALNRANKS`` if set.
``pmix``      ``PMIX_RANK`` with the size from ``PMI_SIZE`` or ``SLURM_NTASKS`` (PMIx exports no size).
``slurm``     ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_NNODES`` (or the step's
              ``SLURM_STEP_NUM_NODES``), ``SLURM_NODEID``; the master is the first host of
              ``SLURM_STEP_NODELIST`` (or ``SLURM_JOB_NODELIST``), expanded by :func:`expand_nodelist`.
``single``    none of the above: one process, rank 0 of 1.

Master address and port, when the scheme has none of its own: ``MASTER_ADDR``/``MASTER_PORT`` from the
environment win; otherwise the address is ``127.0.0.1`` when every rank is on this node (local size equals
world size) and the port is derived from the job's identity (``SLURM_JOB_ID``/``SLURM_STEP_ID`` or
``PMIX_NAMESPACE``), the same number on every rank of one job, in 20000..32767: below Linux's ephemeral range
(``net.ipv4.ip_local_port_range``, default 32768-60999), whose ports any outgoing connection of the node may be
holding when rank 0 binds (EADDRINUSE). Either may stay ``None``
when nothing determines it (a multi-node mpirun without ``MASTER_ADDR``); the torch harness then says so.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from collscope.errors import ConfigError, ParseError

__all__ = ["RankInfo", "RankSource", "rank_info", "expand_nodelist", "select_cuda_device"]

RankSource = Literal["torchrun", "openmpi", "pmi", "pmix", "slurm", "single"]

_PORT_BASE = 20000
_PORT_SPAN = 12768
"""Derived rendezvous ports are 20000..32767, below Linux's default ephemeral range (32768-60999)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankInfo:
    """This process's place in a job, as its launcher described it."""

    rank: int
    """Global rank, 0-based."""
    world_size: int
    """Number of ranks in the job."""
    local_rank: int
    """Rank among the processes on this node (0 when the launcher does not say)."""
    local_size: int | None
    """Processes on this node; ``None`` when the launcher does not say."""
    node_rank: int | None
    """Index of this node in the job; ``None`` when unknown."""
    nnodes: int | None
    """Number of nodes in the job; ``None`` when unknown (derived as world/local size when uniform)."""
    master_addr: str | None
    """Host of rank 0 for TCP rendezvous (torch), or ``None`` when it cannot be told from the environment."""
    master_port: int | None
    """Rendezvous port; from ``MASTER_PORT`` or derived from the job id (see the module doc)."""
    source: RankSource
    """Which launcher's variables were used."""

    @property
    def is_root(self) -> bool:
        return self.rank == 0


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None


def _need(env: Mapping[str, str], name: str) -> int:
    value = _int(env, name)
    assert value is not None, name  # callers check presence first
    return value


def _has(env: Mapping[str, str], *names: str) -> bool:
    return all(env.get(n, "").strip() != "" for n in names)


def _nodes_from(world: int, local_size: int | None) -> int | None:
    if local_size and local_size > 0 and world % local_size == 0:
        return world // local_size
    return None


def _derived_port(env: Mapping[str, str]) -> int | None:
    if _has(env, "SLURM_JOB_ID"):
        key = f"slurm:{env['SLURM_JOB_ID']}:{env.get('SLURM_STEP_ID', '')}"
    elif _has(env, "PMIX_NAMESPACE"):
        key = f"pmix:{env['PMIX_NAMESPACE']}"
    else:
        return None
    return _PORT_BASE + zlib.crc32(key.encode()) % _PORT_SPAN


def _master(env: Mapping[str, str], world: int, local_size: int | None,
            default_addr: str | None = None) -> tuple[str | None, int | None]:
    addr = env.get("MASTER_ADDR") or default_addr
    if addr is None and local_size is not None and local_size == world:
        addr = "127.0.0.1"
    port = _int(env, "MASTER_PORT")
    if port is None:
        port = _derived_port(env)
    return addr, port


def _torchrun(env: Mapping[str, str]) -> RankInfo:
    world = _need(env, "WORLD_SIZE")
    local_size = _int(env, "LOCAL_WORLD_SIZE")
    nnodes = _int(env, "GROUP_WORLD_SIZE") or _nodes_from(world, local_size)
    addr, port = _master(env, world, local_size)
    return RankInfo(rank=_need(env, "RANK"), world_size=world, local_rank=_int(env, "LOCAL_RANK") or 0,
                    local_size=local_size, node_rank=_int(env, "GROUP_RANK"), nnodes=nnodes,
                    master_addr=addr, master_port=port, source="torchrun")


def _openmpi(env: Mapping[str, str]) -> RankInfo:
    world = _need(env, "OMPI_COMM_WORLD_SIZE")
    local_size = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE")
    addr, port = _master(env, world, local_size)
    return RankInfo(rank=_need(env, "OMPI_COMM_WORLD_RANK"), world_size=world,
                    local_rank=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK") or 0, local_size=local_size,
                    node_rank=None, nnodes=_nodes_from(world, local_size), master_addr=addr, master_port=port,
                    source="openmpi")


def _pmi(env: Mapping[str, str], rank_var: str, source: RankSource, size: int) -> RankInfo:
    local_size = _int(env, "MPI_LOCALNRANKS") or _int(env, "SLURM_NTASKS_PER_NODE")
    addr, port = _master(env, size, local_size, _slurm_master(env))
    return RankInfo(rank=_need(env, rank_var), world_size=size,
                    local_rank=_int(env, "MPI_LOCALRANKID") or _int(env, "SLURM_LOCALID") or 0,
                    local_size=local_size, node_rank=_int(env, "SLURM_NODEID"),
                    nnodes=_slurm_nnodes(env) or _nodes_from(size, local_size), master_addr=addr, master_port=port,
                    source=source)


def _slurm_nnodes(env: Mapping[str, str]) -> int | None:
    return _int(env, "SLURM_STEP_NUM_NODES") or _int(env, "SLURM_NNODES")


def _slurm_master(env: Mapping[str, str]) -> str | None:
    for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        text = env.get(name, "").strip()
        if text:
            try:
                return expand_nodelist(text)[0]
            except ParseError as exc:
                raise ConfigError(f"{name}: {exc}") from None
    return None


def _slurm(env: Mapping[str, str]) -> RankInfo:
    world = _need(env, "SLURM_NTASKS")
    nnodes = _slurm_nnodes(env)
    local_size = _slurm_local_size(env, nnodes)
    addr, port = _master(env, world, local_size, _slurm_master(env))
    return RankInfo(rank=_need(env, "SLURM_PROCID"), world_size=world, local_rank=_int(env, "SLURM_LOCALID") or 0,
                    local_size=local_size, node_rank=_int(env, "SLURM_NODEID"), nnodes=nnodes,
                    master_addr=addr, master_port=port, source="slurm")


def _slurm_local_size(env: Mapping[str, str], nnodes: int | None) -> int | None:
    # SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE look like "2(x3),1"; only a uniform "N" or "N(xM)" is used.
    text = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    m = re.fullmatch(r"\s*(\d+)(?:\(x\d+\))?\s*", text)
    if m:
        return int(m.group(1))
    if nnodes == 1:
        return _int(env, "SLURM_NTASKS")
    return None


def rank_info(env: Mapping[str, str]) -> RankInfo:
    """Rank, sizes and rendezvous point of this process from ``env`` (see the module doc for the order).

    Raises ConfigError for values that are not integers or contradict each other (rank >= world size).
    """
    if _has(env, "RANK", "WORLD_SIZE"):
        info = _torchrun(env)
    elif _has(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        info = _openmpi(env)
    elif _has(env, "PMI_RANK", "PMI_SIZE"):
        info = _pmi(env, "PMI_RANK", "pmi", _need(env, "PMI_SIZE"))
    elif _has(env, "PMIX_RANK") and (_has(env, "PMI_SIZE") or _has(env, "SLURM_NTASKS")):
        info = _pmi(env, "PMIX_RANK", "pmix", _int(env, "PMI_SIZE") or _need(env, "SLURM_NTASKS"))
    elif _has(env, "SLURM_PROCID", "SLURM_NTASKS"):
        info = _slurm(env)
    else:
        addr, port = _master(env, 1, 1)
        info = RankInfo(rank=0, world_size=1, local_rank=0, local_size=1, node_rank=0, nnodes=1,
                        master_addr=addr, master_port=port, source="single")
    _validate(info)
    return info


def _validate(info: RankInfo) -> None:
    where = f"({info.source} environment)"
    if info.world_size < 1:
        raise ConfigError(f"world size {info.world_size} must be >= 1 {where}")
    if not 0 <= info.rank < info.world_size:
        raise ConfigError(f"rank {info.rank} is outside 0..{info.world_size - 1} {where}")
    if info.local_size is not None and not 0 <= info.local_rank < info.local_size:
        raise ConfigError(f"local rank {info.local_rank} is outside 0..{info.local_size - 1} {where}")
    if info.master_port is not None and not 0 < info.master_port < 65536:
        raise ConfigError(f"master port {info.master_port} is not a TCP port (1..65535) {where}")


# --- the GPU of a rank ---------------------------------------------------------------------------------------

_LOCAL_VARS: dict[str, tuple[str, str]] = {
    "torchrun": ("LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    "openmpi": ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    "pmi": ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    "pmix": ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    "slurm": ("SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE"),
    "single": ("(none)", "(none)"),
}
"""Per launcher, the variables that gave the local rank and the local size (named in errors)."""


def select_cuda_device(info: RankInfo, visible_gpus: int, env: Mapping[str, str]) -> int:
    """The CUDA device (index among the ``visible_gpus`` devices this process sees) that rank ``info`` drives,
    one GPU per rank; pure, so that it can be checked under any simulated launcher environment.

    * No visible GPU: ConfigError with the reason (``CUDA_VISIBLE_DEVICES`` set but empty hides every GPU).
    * One visible GPU and ``CUDA_VISIBLE_DEVICES`` set: the launcher (``srun --gpus-per-task=1``,
      ``--gpu-bind=single:1``, ``--tres-bind=gres/gpu:per_task:1``) or a wrapper gave this task its own GPU:
      device 0. Two tasks given the same GPU show later as NCCL's "Duplicate GPU detected" (explained by
      :func:`collscope.sweeps.diagnose.launch_diagnosis`).
    * Otherwise the local rank, and ConfigError when this node's ranks outnumber the visible GPUs (NCCL needs one
      GPU per rank; two ranks on one GPU would fail late, in NCCL's init).
    """
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    shown = "unset" if cvd is None else repr(cvd)
    if visible_gpus < 1:
        if cvd is not None and cvd.strip() == "":
            raise ConfigError(f"rank {info.rank}: CUDA_VISIBLE_DEVICES is set but empty (''), which hides every GPU "
                              "from this process; unset it, or let the launcher set it (srun --gpus-per-task / "
                              "--gpus-per-node)")
        raise ConfigError(f"rank {info.rank}: no GPU visible to this process (CUDA_VISIBLE_DEVICES {shown}); check "
                          "the allocation's GPUs (--gpus-per-node, --gres=gpu:N) and nvidia-smi on this node")
    if visible_gpus == 1 and cvd is not None:
        return 0
    local_size = info.local_size if info.local_size is not None else info.local_rank + 1
    if local_size > visible_gpus:
        rank_var, size_var = _LOCAL_VARS[info.source]
        raise ConfigError(
            f"rank {info.rank}: {local_size} ranks on this node (local rank {info.local_rank} from {rank_var}, local "
            f"size from {size_var}, {info.source} environment) but {visible_gpus} visible GPU(s) (CUDA_VISIBLE_DEVICES "
            f"{shown}); NCCL needs one GPU per rank: start at most {visible_gpus} ranks per node "
            "(--nproc-per-node, --ntasks-per-node, mpirun --map-by ppr:N:node) or make more GPUs visible")
    return info.local_rank


# --- Slurm hostlists ---------------------------------------------------------------------------------------

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_MAX_RANGE = 100_000


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _expand_ranges(body: str, source: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise ParseError(source, None, "a number or range like 01-03 inside brackets", found=item)
        lo_text, hi_text = m.group(1), m.group(2)
        lo, hi = int(lo_text), int(hi_text) if hi_text is not None else int(lo_text)
        if hi < lo:
            raise ParseError(source, None, "a range whose end is not below its start", found=item)
        if hi - lo >= _MAX_RANGE:
            raise ParseError(source, None, f"a range of fewer than {_MAX_RANGE} hosts", found=item)
        width = len(lo_text)
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def _expand_host(pattern: str, source: str) -> list[str]:
    m = re.search(r"\[([^\[\]]*)\]", pattern)
    if m is None:
        if "[" in pattern or "]" in pattern:
            raise ParseError(source, None, "balanced brackets in a host list", found=pattern)
        return [pattern]
    head, tail = pattern[: m.start()], pattern[m.end():]
    return [h for value in _expand_ranges(m.group(1), source) for h in _expand_host(head + value + tail, source)]


def expand_nodelist(text: str, source: str = "nodelist") -> list[str]:
    """Expand a Slurm host list: ``"node[01-03,7],gpu5"`` -> ``["node01", "node02", "node03", "node7", "gpu5"]``.

    Zero padding follows the lower bound's width (``[08-10]`` -> ``08, 09, 10``); several bracket groups in
    one name expand as a product (``r[1-2]n[1-2]`` -> ``r1n1, r1n2, r2n1, r2n2``). Malformed input raises
    ParseError naming ``source``; order is kept and duplicates are not removed.
    """
    text = text.strip()
    if not text:
        raise ParseError(source, None, "a non-empty host list")
    hosts: list[str] = []
    for part in _split_top(text):
        part = part.strip()
        if not part:
            raise ParseError(source, None, "host names separated by single commas", found=text)
        hosts.extend(_expand_host(part, source))
    return hosts
