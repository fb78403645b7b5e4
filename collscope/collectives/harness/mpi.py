"""The mpi4py harness: time MPI collectives over a size ladder, as nccl-tests times NCCL's.

Every rank of an MPI job (``mpirun -np N python -m collscope bench --engine mpi ...``) calls
:func:`run_mpi_bench`; rank 0 gets the records. Per size: buffers are taken from a :class:`BufferPool` and
zeroed, ``warmup`` untimed calls run (a fresh warm-up for every size), a barrier lines the ranks up, then
``iters`` calls are timed as one batch with ``time.perf_counter_ns``; time per op is batch / iters and the
record holds the **maximum over ranks**. With ``check`` the size then runs once more on rank-dependent values
and wrong elements are counted exactly (summed over ranks, by period: :mod:`~collscope.collectives.harness.
periodic`); the timed loop never touches the values. One gather per size brings every rank's batch time and
wrong count to rank 0.

A persistent worker (:mod:`collscope.collectives.harness.worker`) passes the same pool and the job's hosts to
every point, so points of the same sizes reuse their buffers (zeroed again, never re-allocated and faulted in)
and the hosts are gathered once per launch; a single ``collscope bench`` run gets a pool of its own. Either way
every size of a point runs on a prefix of buffers sized for the point's largest size (:meth:`BufferPool.reserve`):
the memory a size runs on then does not depend on what ran before it, which changed the page backing and with it
the time (huge pages for numpy arrays of 4 MiB and more).

MPI calls: all_reduce ``Allreduce``, all_gather ``Allgather``, reduce_scatter ``Reduce_scatter_block``,
alltoall ``Alltoall``, broadcast ``Bcast`` (in place by nature); ``in_place`` passes ``MPI.IN_PLACE``.
Buffers are numpy arrays; with ``device="cuda"`` they are torch CUDA tensors, allowed only when the MPI
library is CUDA-aware (``MPI.Query_cuda_support()`` where mpi4py has it, else ``ompi_info``), and the rank's GPU
is chosen from the launcher's local rank before ``MPI_Init`` (:func:`import_mpi`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from collscope import proc
from collscope.collectives.harness.periodic import PERIOD, count_wrong_periodic, expected_blocks, fill_periodic
from collscope.collectives.ranks import rank_info, select_cuda_device
from collscope.collectives.record import Measurement
from collscope.collectives.sizes import call_count, size_ladder, size_list
from collscope.collectives.spec import (
    BenchSpec,
    captured_environment,
    captured_settings,
    make_record,
    pattern,
    rail_pinned,
    time_batch_ns,
)
from collscope.errors import ConfigError, ToolMissingError
from collscope.vocab.ops import elements_per_rank, op_facts

if TYPE_CHECKING:
    from mpi4py import MPI as _MPI

__all__ = ["run_mpi_bench", "check_mpi_spec", "import_mpi", "select_gpu", "mpi_engine_version",
           "parse_ompi_cuda_support", "MPI_HINT", "OnRecord", "BufferPool", "job_hosts"]

log = logging.getLogger(__name__)

MPI_HINT = "pip install 'collscope[mpi]' (mpi4py and Open MPI)"
OnRecord = Callable[[Measurement], None]

_NUMPY_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
                 "int8": np.int8, "uint8": np.uint8}

_MPI_TYPES = {"float32": "FLOAT", "float64": "DOUBLE", "int32": "INT32_T", "int64": "INT64_T", "int8": "INT8_T",
              "uint8": "UINT8_T"}


def import_mpi(device: str = "cpu", env: Mapping[str, str] | None = None) -> Any:
    """``mpi4py.MPI`` (initialising MPI), or ConfigError saying how to install it.

    With ``device="cuda"`` this rank's GPU is made current first (:func:`select_gpu`, from the launcher's local
    rank in ``env``): a CUDA-aware MPI library sets up its CUDA state (context, IPC and registration caches) in
    ``MPI_Init`` on the device current then, which would otherwise be GPU 0 on every rank of the node.
    """
    if device == "cuda":
        select_gpu(os.environ if env is None else env)
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ConfigError(f"the mpi engine needs mpi4py: {MPI_HINT} ({exc})") from None
    return MPI


def select_gpu(env: Mapping[str, str]) -> int:
    """Make this rank's GPU current (torch) before MPI starts, from the launcher's variables alone; its index.

    ConfigError when torch is missing or the GPU cannot be chosen (:func:`~collscope.collectives.ranks.
    select_cuda_device`: no visible GPU, more ranks on the node than visible GPUs)."""
    try:
        import torch
    except ImportError as exc:
        raise ConfigError(f"device 'cuda' with the mpi engine needs torch for its GPU buffers ({exc})") from None
    index = select_cuda_device(rank_info(env), torch.cuda.device_count(), env)
    torch.cuda.set_device(index)
    return index


def gpu_extra(device: str) -> dict[str, str] | None:
    """``{"gpu": name}`` of this rank's current GPU for a record measured on GPU buffers (as the torch harness
    names it), so that the analysis models it as a GPU's collective; None on the host."""
    if device != "cuda":
        return None
    import torch

    return {"gpu": torch.cuda.get_device_name(torch.cuda.current_device())}


def mpi_engine_version(mpi: Any) -> str:
    """``"mpi4py 4.1.2; Open MPI v5.0.11"``: the binding and the first part of the library's version line (asked
    once per process)."""
    if _VERSION:
        return _VERSION[0]
    import mpi4py

    line = (mpi.Get_library_version().strip().splitlines() or ["unknown MPI"])[0]
    _VERSION.append(f"mpi4py {mpi4py.__version__}; {line.split(', package:')[0].strip()}")
    return _VERSION[0]


_VERSION: list[str] = []


def parse_ompi_cuda_support(text: str) -> bool | None:
    """``ompi_info --parsable --all`` -> whether Open MPI was built with CUDA support (None when not said)."""
    m = re.search(r"(?:mpi|opal)_built_with_cuda_support:value:(true|false)", text)
    return None if m is None else m.group(1) == "true"


def check_mpi_spec(spec: BenchSpec) -> None:
    """ConfigError for what the mpi engine cannot run, whatever the job (no MPI needed to tell)."""
    if spec.dtype not in _NUMPY_DTYPES:
        raise ConfigError(f"the mpi engine has no {spec.dtype} reductions; valid dtypes: {', '.join(_NUMPY_DTYPES)}")
    if spec.cuda_graph:
        raise ConfigError("cuda_graph is a torch + NCCL option; the mpi engine has none")


def _cuda_aware(mpi: Any) -> bool:
    query = getattr(mpi, "Query_cuda_support", None)
    if query is not None:
        return bool(query())
    try:
        result = proc.run(["ompi_info", "--parsable", "--all"], timeout_s=60, install_hint=MPI_HINT)
    except ToolMissingError:
        return False
    return bool(parse_ompi_cuda_support(result.stdout))


class BufferPool:
    """Host buffers kept across sizes and points: per (role, dtype) one array that grows to the largest count
    asked for; :meth:`get` hands out a zeroed prefix of it. Device buffers are allocated per size, as before."""

    def __init__(self) -> None:
        self._arrays: dict[tuple[str, str], np.ndarray] = {}

    def get(self, role: str, n: int, dtype: str) -> np.ndarray:
        """``n`` zeroed elements of ``dtype`` for ``role`` ("send", "recv"); the same memory as the last call
        with that role and dtype when it is large enough (every page touched, as a C loop's memset does)."""
        arr = self._arrays.get((role, dtype))
        if arr is None or arr.size < n:
            self._arrays.pop((role, dtype), None)  # free the smaller one first
            arr = np.empty(n, dtype=_NUMPY_DTYPES[dtype])
            self._arrays[(role, dtype)] = arr
        view = arr[:n]
        view.fill(0)
        return view

    def reserve(self, role: str, n: int, dtype: str) -> None:
        """Hold exactly ``n`` elements for ``role``: the array every size of a point takes a prefix of, as large as
        the point's largest size whatever ran before, so its memory is what a launch of that point alone gets. The
        page backing depends on it: numpy asks the kernel for transparent huge pages on arrays of 4 MiB and more
        (``NUMPY_MADVISE_HUGEPAGE``), and Open MPI's basic linear all_reduce at 1 MiB on 2 ranks ran 1.4-1.5x
        faster on a prefix of a 16 MiB array than on a 1 MiB array of its own on this project's machines."""
        arr = self._arrays.get((role, dtype))
        if arr is None or arr.size != n:
            self._arrays.pop((role, dtype), None)  # free the other one first
            arr = np.empty(n, dtype=_NUMPY_DTYPES[dtype])
            arr.fill(0)  # every page touched before anything is timed
            self._arrays[(role, dtype)] = arr


def buffer_elements(spec: BenchSpec, count: int, nranks: int) -> tuple[int | None, int]:
    """Elements of the send buffer (``None``: in place, no send buffer) and of the receive buffer of one size."""
    n_send, n_recv = elements_per_rank(spec.op, count, nranks)
    if spec.in_place and spec.op in ("reduce_scatter",):
        n_recv = count * nranks  # the input lives in the receive buffer, the result in its first block
    return (None if spec.in_place or spec.op == "broadcast" else n_send), n_recv


class _Buffers:
    """Send/receive buffers of one size (from the pool) and the bound call that uses them."""

    def __init__(self, spec: BenchSpec, mpi: Any, comm: Any, count: int, nranks: int, pool: BufferPool) -> None:
        self.spec, self.count, self.nranks, self.rank = spec, count, nranks, comm.Get_rank()
        self._pool = pool
        op = spec.op
        n_send, n_recv = buffer_elements(spec, count, nranks)
        self.send = None if n_send is None else self._alloc("send", n_send)
        self.recv = self._alloc("recv", n_recv)
        send = mpi.IN_PLACE if self.send is None else self._message(mpi, self.send)
        recv = self._message(mpi, self.recv)
        redop = {"sum": mpi.SUM, "max": mpi.MAX, "min": mpi.MIN}[spec.redop]
        calls: dict[str, Callable[[], Any]] = {
            "all_reduce": partial(comm.Allreduce, send, recv, redop),
            "all_gather": partial(comm.Allgather, send, recv),
            "reduce_scatter": partial(comm.Reduce_scatter_block, send, recv, redop),
            "alltoall": partial(comm.Alltoall, send, recv),
            "broadcast": partial(comm.Bcast, recv, spec.root),
        }
        self.call = calls[op]

    def _message(self, mpi: Any, buf: Any) -> Any:
        """``[raw buffer, MPI datatype]`` for host arrays: mpi4py then skips the per-call format lookup."""
        if self.spec.device == "cuda":
            return buf
        raw = getattr(mpi, "buffer", None) or mpi.memory  # mpi4py 4 / 3
        return [raw.frombuffer(buf), getattr(mpi, _MPI_TYPES[self.spec.dtype])]

    def _alloc(self, role: str, n: int) -> Any:
        if self.spec.device == "cuda":
            import torch

            from collscope.collectives.harness.torch import torch_dtype

            return torch.zeros(n, dtype=torch_dtype(self.spec.dtype), device="cuda")
        return self._pool.get(role, n, self.spec.dtype)

    def _fill(self, buf: Any, row: np.ndarray, start: int, n: int) -> None:
        """``buf[start:start+n] := row repeated``: in place on host arrays, through one copy on devices."""
        if self.spec.device == "cuda":
            import torch

            buf[start:start + n].copy_(torch.from_numpy(np.resize(row, n)))
            torch.cuda.synchronize()
        else:
            fill_periodic(buf, row, start, n)

    def _get(self, buf: Any, n: int) -> np.ndarray:
        if self.spec.device == "cuda":
            return np.asarray(buf[:n].double().cpu().numpy())
        return np.asarray(buf[:n])

    def fill_for_check(self) -> None:
        """Inputs := :func:`pattern` of this rank; outputs := a value no correct result leaves in place."""
        spec, rank, count, n = self.spec, self.rank, self.count, self.nranks
        poison = 255 if spec.dtype == "uint8" else -7
        if spec.device == "cuda":
            self.recv.fill_(poison)
        else:
            self.recv.fill(poison)
        row = pattern(rank, PERIOD, spec.dtype)
        if spec.op == "broadcast":
            if rank == spec.root:
                self._fill(self.recv, row, 0, count)
            return
        n_in = elements_per_rank(spec.op, count, n)[0]
        if self.send is not None:
            self._fill(self.send, row, 0, n_in)
        elif spec.op == "all_gather":
            self._fill(self.recv, row, rank * count, count)
        else:
            self._fill(self.recv, row, 0, n_in)

    def wrong(self) -> int:
        spec = self.spec
        blocks = expected_blocks(spec.op, rank=self.rank, nranks=self.nranks, count=self.count, dtype=spec.dtype,
                                 redop=spec.redop, root=spec.root)
        return count_wrong_periodic(self._get(self.recv, len(blocks) * self.count), blocks, self.count)


def job_hosts(mpi: Any, comm: Any) -> tuple[str, ...]:
    """The hosts of ``comm``'s ranks, in rank order without repeats, on rank 0 (``()`` on the others)."""
    return tuple(dict.fromkeys(comm.gather(mpi.Get_processor_name(), root=0) or []))


def check_launch_matches_world(env: Mapping[str, str], world_size: int) -> None:
    """srun started N tasks but MPI sees another world size: the MPI library did not get a PMI it speaks.

    Open MPI 5 speaks only PMIx, so ``srun --mpi=pmi2`` or ``--mpi=none`` starts N one-rank worlds that would
    each measure nothing and report busbw 0. Raised (ConfigError) on every rank before anything is measured.
    """
    if "OMPI_COMM_WORLD_SIZE" in env:  # started by mpirun: Slurm's variables describe mpirun's daemons, not ranks
        return
    tasks = env.get("SLURM_STEP_NUM_TASKS")
    if not tasks or not tasks.isdigit():
        return
    if int(tasks) != world_size:
        raise ConfigError(
            f"srun started {tasks} tasks but MPI sees a world of {world_size}: the MPI library did not get a "
            "process-management interface it speaks; Open MPI 5 needs `srun --mpi=pmix` (check `srun --mpi=list`)")


def run_mpi_bench(spec: BenchSpec, comm: _MPI.Comm | None = None, *, on_record: OnRecord | None = None,
                  env: Mapping[str, str] | None = None, hosts: tuple[str, ...] | None = None,
                  pool: BufferPool | None = None) -> list[Measurement]:
    """Measure ``spec`` on every rank of ``comm`` (default ``COMM_WORLD``); rank 0 returns the records.

    Other ranks return ``[]``. ``on_record`` is called on rank 0 as each size completes (to write it at once).
    Every rank must call this with the same spec. ConfigError is raised, on every rank alike, before anything
    is measured when the spec cannot run here. ``hosts`` (the job's, from :func:`job_hosts`, given on every
    rank or on none) saves the gather; ``pool`` lends the buffers (a new pool when not given).
    """
    env = os.environ if env is None else env
    mpi = import_mpi(spec.device, env)  # the GPU made current before MPI_Init (when this call is the one that runs it)
    comm = mpi.COMM_WORLD if comm is None else comm
    rank, nranks = comm.Get_rank(), comm.Get_size()
    check_launch_matches_world(env, nranks)
    check_mpi_spec(spec)
    if op_facts(spec.op).rooted and spec.root >= nranks:
        raise ConfigError(f"root {spec.root} is not a rank of this {nranks}-rank job")
    if spec.device == "cuda" and not _cuda_aware(mpi):
        raise ConfigError("device 'cuda' needs a CUDA-aware MPI library; this one is not (ompi_info: "
                          "opal_built_with_cuda_support false). Use --device cpu or a CUDA-aware Open MPI")
    sizes = (size_list(spec.sizes, elem_size=spec.elem_size, op=spec.op, nranks=nranks) if spec.sizes is not None
             else size_ladder(spec.min_bytes, spec.max_bytes, spec.factor, elem_size=spec.elem_size, op=spec.op,
                              nranks=nranks))
    if hosts is None:
        hosts = job_hosts(mpi, comm)
    pool = BufferPool() if pool is None else pool
    version = mpi_engine_version(mpi)
    settings = captured_settings(env)
    environment = captured_environment(env, forced=settings)
    rail = rail_pinned("mpi", None, env)
    extra = gpu_extra(spec.device)
    in_place = spec.in_place or spec.op == "broadcast"
    records: list[Measurement] = []
    if rank == 0:
        log.info("mpi bench %s: %d sizes on %d ranks (%s)", spec.op, len(sizes), nranks, version)
    if sizes and spec.device != "cuda":  # host buffers: the largest size's, whatever ran before (BufferPool.reserve)
        largest = max(call_count(spec.op, s, elem_size=spec.elem_size, nranks=nranks) for s in sizes)
        n_send, n_recv = buffer_elements(spec, largest, nranks)
        if n_send is not None:
            pool.reserve("send", n_send, spec.dtype)
        pool.reserve("recv", n_recv, spec.dtype)
    for size in sizes:
        count = call_count(spec.op, size, elem_size=spec.elem_size, nranks=nranks)
        bufs = _Buffers(spec, mpi, comm, count, nranks, pool)
        call = bufs.call
        for _ in range(spec.warmup):
            call()
        elapsed_ns = time_batch_ns(call, comm.Barrier, spec.iters)
        local_wrong = -1
        if spec.check:
            bufs.fill_for_check()
            comm.Barrier()
            call()
            local_wrong = bufs.wrong()
        gathered = comm.gather((elapsed_ns, local_wrong), root=0)  # one collective: batch times and wrong counts
        if rank != 0:
            continue
        assert gathered is not None  # comm.gather returns the list on the root
        worst_ns = max(t for t, _ in gathered)
        wrong = sum(w for _, w in gathered) if spec.check else None
        record = make_record(spec, engine="mpi", backend="mpi", size_bytes=size, count=count, nranks=nranks,
                             time_us=worst_ns / spec.iters / 1e3, wrong=wrong, in_place=in_place, hosts=hosts,
                             engine_version=version, nccl_version=None, settings=settings,
                             environment=environment, source="collscope bench --engine mpi", rail=rail,
                             extra=extra)
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records
