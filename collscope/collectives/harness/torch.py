"""The torch.distributed harness: time collectives of a gloo or NCCL process group over a size ladder.

Every rank calls :func:`run_torch_bench`; rank 0 gets the records. The process group is set up from
:func:`collscope.collectives.ranks.rank_info`: under torchrun with ``env://`` (torchrun's agent hosts the
store), under any other launcher (mpirun, srun) with ``tcp://MASTER_ADDR:MASTER_PORT`` and the launcher's rank
and size, so the same command runs under torchrun, mpirun and srun. ``spec.timeout_s`` bounds the rendezvous
and every collective (gloo and NCCL process-group timeout), so a dead rank fails the run instead of hanging it.

Calls: all_reduce ``all_reduce`` (in place by nature), all_gather ``all_gather_single`` (the 2.13 name of
``all_gather_into_tensor``, used when the older name is all there is), reduce_scatter ``reduce_scatter_single``
(``reduce_scatter_tensor``), alltoall ``all_to_all_single``, broadcast ``broadcast`` (in place by nature).
All five run on gloo CPU tensors in torch 2.13 (checked with real runs; nothing is emulated).
``in_place`` makes all_gather's input a view of its slot of the output and reduce_scatter's output a view of
its block of the input (as NCCL's in-place mode); alltoall has no in-place form and is refused.

Timing as nccl-tests: per size a fresh warm-up, a barrier, then ``iters`` calls as one batch; gloo (CPU)
between host ``perf_counter_ns`` reads, NCCL between two CUDA events on the current stream, or, with
``cuda_graph``, the replay of one CUDA graph holding the ``iters`` calls. Time per op = batch / iters, maximum
over ranks. ``check`` fills and counts by period (:mod:`~collscope.collectives.harness.torch_check`), in
O(size) memory.

The measured communicator carries the measured op and nothing else (warm-up, timed batch, the check call): the
harness's own bookkeeping (host names, barriers, the batch times' maximum and the wrong counts' sum) goes over
a gloo side group of the same ranks. Under NCCL this matters twice: NCCL >= 2.24 refuses an op its forced
``NCCL_ALGO`` cannot run ("no algorithm/protocol available", ``src/enqueue.cc``), so a bookkeeping AllGather
under ``NCCL_ALGO=Tree`` (or PAT, NVLSTree, CollNetChain) would fail the run, and every NCCL call shows in
the TUNING lines that verify which algorithm ran. For NCCL the GPU is chosen by
:func:`~collscope.collectives.ranks.select_cuda_device` (one GPU per rank, checked against the visible ones)
and passed to ``init_process_group(device_id=...)``, so NCCL's communicator is created there and then.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import socket
from collections.abc import Callable, Mapping
from functools import partial
from itertools import repeat
from typing import Any, Literal

from collscope.collectives.harness.periodic import PERIOD, expected_blocks
from collscope.collectives.harness.torch_check import count_wrong_tensor, fill_rows
from collscope.collectives.ranks import RankInfo, rank_info, select_cuda_device
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
from collscope.errors import ConfigError
from collscope.vocab.ops import elements_per_rank, op_facts

__all__ = ["run_torch_bench", "TorchBackend", "TORCH_HINT", "torch_dtype", "import_torch"]

log = logging.getLogger(__name__)

TorchBackend = Literal["gloo", "nccl"]
TORCH_HINT = "pip install 'collscope[torch]'"
OnRecord = Callable[[Measurement], None]


def import_torch() -> tuple[Any, Any]:
    """``(torch, torch.distributed)``, or ConfigError saying how to install torch."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise ConfigError(f"the torch engine needs torch: {TORCH_HINT} ({exc})") from None
    if not dist.is_available():
        raise ConfigError(f"this torch build has no torch.distributed; {TORCH_HINT}")
    return torch, dist


def torch_dtype(name: str) -> Any:
    import torch

    return {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
            "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64, "int8": torch.int8,
            "uint8": torch.uint8}[name]


def _check_spec(spec: BenchSpec, backend: str, torch: Any, dist: Any) -> None:
    if backend not in ("gloo", "nccl"):
        raise ConfigError(f"unknown torch backend {backend!r}; valid: gloo, nccl")
    if backend == "gloo" and not dist.is_gloo_available():
        raise ConfigError(f"this torch build has no gloo backend; {TORCH_HINT}")
    if backend == "nccl":
        if not dist.is_nccl_available():
            raise ConfigError(f"backend nccl needs a CUDA build of torch and a visible GPU; this torch "
                              f"({torch.__version__}) has no NCCL; use --backend gloo")
        if spec.device != "cuda":
            raise ConfigError("backend nccl runs on device 'cuda'")
    elif spec.device != "cpu":
        raise ConfigError("backend gloo is measured on CPU tensors (device 'cpu'); use --backend nccl for GPUs")
    if spec.cuda_graph and backend != "nccl":
        raise ConfigError("cuda_graph needs backend nccl")
    if spec.in_place and spec.op == "alltoall":
        raise ConfigError("alltoall has no in-place form in torch.distributed; drop --in-place")


def _init(dist: Any, backend: str, info: RankInfo, timeout_s: float, device: Any = None) -> Any:
    """Start the measured process group (all ranks) and return the gloo side group for the bookkeeping.

    ``device`` (a CUDA device, backend nccl) goes to ``device_id=`` (torch >= 2.3): the NCCL communicator is
    made at once, on that GPU, instead of lazily by the first collective.
    """
    timeout = _dt.timedelta(seconds=timeout_s)
    bound = {"device_id": device} if backend == "nccl" and device is not None else {}
    if info.source == "torchrun":
        dist.init_process_group(backend, init_method="env://", timeout=timeout, **bound)
    else:
        if info.master_addr is None or info.master_port is None:
            raise ConfigError(f"cannot tell the rendezvous point from the {info.source} environment: set "
                              "MASTER_ADDR (the host of rank 0) and MASTER_PORT (a free TCP port), the same on "
                              "every rank")
        host = f"[{info.master_addr}]" if ":" in info.master_addr else info.master_addr
        dist.init_process_group(backend, init_method=f"tcp://{host}:{info.master_port}", rank=info.rank,
                                world_size=info.world_size, timeout=timeout, **bound)
    return dist.new_group(backend="gloo", timeout=timeout)  # made over the store: no collective on the first


class _Tensors:
    """Preallocated tensors of one size and the bound call that uses them."""

    def __init__(self, spec: BenchSpec, torch: Any, dist: Any, device: Any, count: int, rank: int, n: int) -> None:
        self.spec, self.torch, self.count, self.rank, self.nranks = spec, torch, count, rank, n
        dtype = torch_dtype(spec.dtype)
        redop = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[spec.redop]
        op = spec.op
        zeros = partial(torch.zeros, dtype=dtype, device=device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        if op in ("all_reduce", "broadcast"):
            self.inp = self.out = zeros(count)
            self.call = (partial(dist.all_reduce, self.out, op=redop) if op == "all_reduce"
                         else partial(dist.broadcast, self.out, src=spec.root))
        elif op == "all_gather":
            self.out = zeros(count * n)
            self.inp = self.out[rank * count:(rank + 1) * count] if spec.in_place else zeros(count)
            self.call = partial(gather, self.out, self.inp)
        elif op == "reduce_scatter":
            self.inp = zeros(count * n)
            self.out = self.inp[rank * count:(rank + 1) * count] if spec.in_place else zeros(count)
            self.call = partial(scatter, self.out, self.inp, op=redop)
        else:
            self.inp, self.out = zeros(count * n), zeros(count * n)
            self.call = partial(dist.all_to_all_single, self.out, self.inp)

    def fill_for_check(self) -> None:
        """Inputs := :func:`pattern` of this rank, by period; outputs := a value no correct result leaves."""
        spec, torch, count = self.spec, self.torch, self.count
        self.out.fill_(255 if spec.dtype == "uint8" else -7)
        row = pattern(self.rank, PERIOD, spec.dtype)
        if spec.op == "broadcast":
            if self.rank == spec.root:
                fill_rows(torch, self.out, row, 0, count)
            return
        n_in = elements_per_rank(spec.op, count, self.nranks)[0]
        fill_rows(torch, self.inp, row, 0, n_in)

    def wrong(self) -> int:
        """Wrong elements of this rank's output, counted by period on the output's device."""
        spec = self.spec
        blocks = expected_blocks(spec.op, rank=self.rank, nranks=self.nranks, count=self.count, dtype=spec.dtype,
                                 redop=spec.redop, root=spec.root)
        return count_wrong_tensor(self.torch, self.out.detach(), blocks, self.count)


def _time_batch_cuda(torch: Any, call: Callable[[], Any], barrier: Callable[[], Any], iters: int,
                     graph: bool) -> int:
    """Nanoseconds between two CUDA events around the batch (or around one replay of a captured graph).

    The ranks line up without touching the measured communicator: each first drains its own GPU
    (``torch.cuda.synchronize()``: warm-up and capture done), then the hosts meet at ``barrier`` (the gloo side
    group's), then each records its start event on an idle stream and enqueues the batch. Every rank's batch so
    starts within the barrier's exit skew, and the events hold the batch alone. A barrier on the NCCL group would
    be an NCCL AllReduce in the measured communicator (in the TUNING counts, refused under some forced
    algorithms); the gloo barrier only lines up the hosts, which is why each GPU is drained before it.

    With ``graph``, one eager call comes before the capture whatever the warm-up (nccl-tests warms up before
    capturing too, ``src/common.cu``): a communicator's first use sets up connections and buffers (NCCL's lazy
    connection, torch's bookkeeping of the stream), which must not be captured into the graph.
    """
    replay: Callable[[], Any] | None = None
    if graph:
        call()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(iters):
                call()
        g.replay()  # the graph's own warm-up
        replay = g.replay
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    barrier()
    start.record()
    if replay is not None:
        replay()
    else:
        for _ in repeat(None, iters):
            call()
    end.record()
    end.synchronize()
    return int(start.elapsed_time(end) * 1e6)


def _nccl_version(torch: Any) -> str | None:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # CPU builds have no NCCL to ask
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def run_torch_bench(spec: BenchSpec, backend: TorchBackend = "gloo", *, env: Mapping[str, str] | None = None,
                    on_record: OnRecord | None = None) -> list[Measurement]:
    """Measure ``spec`` on a ``backend`` process group of all ranks; rank 0 returns the records, others ``[]``.

    ``on_record`` is called on rank 0 as each size completes. ConfigError (before anything is measured) for a
    spec the backend or this machine cannot run; errors of torch.distributed (a peer gone, a timeout)
    propagate, after at most ``spec.timeout_s``.
    """
    torch, dist = import_torch()
    env = os.environ if env is None else env
    info = rank_info(env)
    _check_spec(spec, backend, torch, dist)
    if op_facts(spec.op).rooted and spec.root >= info.world_size:
        raise ConfigError(f"root {spec.root} is not a rank of this {info.world_size}-rank job")
    world = info.world_size
    sizes = (size_list(spec.sizes, elem_size=spec.elem_size, op=spec.op, nranks=world) if spec.sizes is not None
             else size_ladder(spec.min_bytes, spec.max_bytes, spec.factor, elem_size=spec.elem_size, op=spec.op,
                              nranks=world))
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", select_cuda_device(info, torch.cuda.device_count(), env))
        torch.cuda.set_device(device)
    side = _init(dist, backend, info, spec.timeout_s, device)
    records = _measure(spec, backend, torch, dist, side, device, sizes, env, on_record)
    dist.destroy_process_group()
    return records


def _worst_and_wrong(torch: Any, dist: Any, side: Any, elapsed_ns: int, wrong: int) -> tuple[int, int]:
    """On rank 0: the largest batch time and the summed wrong count over the ranks (one gather on ``side``)."""
    mine = torch.tensor([elapsed_ns, wrong], dtype=torch.int64)
    rank = dist.get_rank(group=side)
    parts = [torch.zeros_like(mine) for _ in range(dist.get_world_size(group=side))] if rank == 0 else None
    dist.gather(mine, parts, dst=0, group=side)
    if parts is None:
        return 0, 0
    return max(int(p[0]) for p in parts), sum(int(p[1]) for p in parts)


def _measure(spec: BenchSpec, backend: str, torch: Any, dist: Any, side: Any, device: Any, sizes: list[int],
             env: Mapping[str, str], on_record: OnRecord | None) -> list[Measurement]:
    """Every size on the measured group (the default one); everything else on ``side``."""
    rank, n = dist.get_rank(), dist.get_world_size()
    names: list[Any] = [None] * n
    dist.all_gather_object(names, socket.gethostname(), group=side)
    hosts = tuple(dict.fromkeys(str(h) for h in names))
    barrier = partial(dist.barrier, group=side)
    version, nccl = f"torch {torch.__version__}", _nccl_version(torch) if backend == "nccl" else None
    settings = captured_settings(env)
    environment = captured_environment(env, forced=settings)
    in_place = spec.in_place or spec.op in ("all_reduce", "broadcast")
    records: list[Measurement] = []
    for size in sizes:
        count = call_count(spec.op, size, elem_size=spec.elem_size, nranks=n)
        bufs = _Tensors(spec, torch, dist, device, count, rank, n)
        call = bufs.call
        for _ in range(spec.warmup):
            call()
        if backend == "nccl":
            elapsed_ns = _time_batch_cuda(torch, call, barrier, spec.iters, spec.cuda_graph)
        else:
            elapsed_ns = time_batch_ns(call, barrier, spec.iters)
        local_wrong = 0
        if spec.check:
            bufs.fill_for_check()
            if device.type == "cuda":
                torch.cuda.synchronize()
            barrier()  # every rank's input in place before any rank's check call
            call()
            local_wrong = bufs.wrong()
        worst_ns, total_wrong = _worst_and_wrong(torch, dist, side, elapsed_ns, local_wrong)
        if rank != 0:
            continue
        record = make_record(spec, engine="torch", backend=backend, size_bytes=size, count=count, nranks=n,
                             time_us=worst_ns / spec.iters / 1e3, wrong=total_wrong if spec.check else None,
                             in_place=in_place, hosts=hosts, engine_version=version, nccl_version=nccl,
                             settings=settings, environment=environment, rail=rail_pinned("torch", backend, env),
                             source=f"collscope bench --engine torch --backend {backend}",
                             extra={"gpu": torch.cuda.get_device_name(device)} if device.type == "cuda" else None)
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records
