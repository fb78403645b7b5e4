"""The torch harness on N spawned gloo ranks, with torch.distributed wrapped to log which group each collective
reaches (tests of the harness's bookkeeping side group; no GPU needed).

:class:`GroupRecordingDist` stands in for ``torch.distributed`` inside the harness (through its
``import_torch``): every collective passes to the real gloo one and is logged as ``("measured", name)`` when it
runs on the default group (the group the harness measures) and ``("side", name)`` otherwise. With
``refuse_except``, a call on the measured group of any other function raises the error NCCL >= 2.24 gives when
a forced ``NCCL_ALGO`` has no algorithm for the function (NCCL ``src/enqueue.cc``: "Error : no
algorithm/protocol available for function %s with datatype %s. NCCL_ALGO was set to %s."), as ProcessGroupNCCL
turns it into an exception.
"""

from __future__ import annotations

import multiprocessing
import traceback
from typing import Any

from tests.collectives.launch import free_port

MEASURED_CALLS: dict[str, frozenset[str]] = {
    "all_reduce": frozenset({"all_reduce"}),
    "all_gather": frozenset({"all_gather_single", "all_gather_into_tensor"}),
    "reduce_scatter": frozenset({"reduce_scatter_single", "reduce_scatter_tensor"}),
    "alltoall": frozenset({"all_to_all_single"}),
    "broadcast": frozenset({"broadcast"}),
}
"""The torch.distributed functions that are the measured op itself."""

_NCCL_FUNCTION = {"all_reduce": "AllReduce", "all_reduce_coalesced": "AllReduce", "barrier": "AllReduce",
                  "monitored_barrier": "AllReduce", "broadcast": "Broadcast", "broadcast_object_list": "Broadcast",
                  "reduce": "Reduce", "reduce_scatter": "ReduceScatter", "reduce_scatter_single": "ReduceScatter",
                  "reduce_scatter_tensor": "ReduceScatter", "all_gather": "AllGather",
                  "all_gather_single": "AllGather", "all_gather_into_tensor": "AllGather",
                  "all_gather_object": "AllGather", "gather": "Send", "gather_object": "Send", "scatter": "Send",
                  "scatter_object_list": "Send", "all_to_all": "Send", "all_to_all_single": "Send"}
"""The NCCL function each torch.distributed collective launches (gather/scatter/alltoall are send/recv)."""


class GroupRecordingDist:
    """``torch.distributed`` whose collectives are logged by group (module doc)."""

    def __init__(self, real: Any, refuse_except: frozenset[str] | None = None, forced_algo: str = "Tree") -> None:
        self._real = real
        self._allowed = refuse_except
        self._algo = forced_algo
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._real, name)
        if name not in _NCCL_FUNCTION:
            return value

        def collective(*args: Any, **kwargs: Any) -> Any:
            group = kwargs.get("group")
            where = "measured" if group is None or group is self._real.group.WORLD else "side"
            self.calls.append((where, name))
            if where == "measured" and self._allowed is not None and name not in self._allowed:
                raise RuntimeError(
                    "NCCL error in: ProcessGroupNCCL.cpp, invalid usage (run with NCCL_DEBUG=WARN for details), "
                    "NCCL version 2.27.3\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
                    f"Last error:\nError : no algorithm/protocol available for function {_NCCL_FUNCTION[name]} with "
                    f"datatype ncclInt64. NCCL_ALGO was set to {self._algo}.")
            return value(*args, **kwargs)

        return collective


def _rank_main(rank: int, nranks: int, runs: list[dict[str, Any]], queue: Any) -> None:
    import torch
    import torch.distributed as dist

    from collscope.collectives.harness import torch as harness
    from collscope.collectives.spec import BenchSpec

    results = []
    for run in runs:
        proxy = GroupRecordingDist(dist, refuse_except=MEASURED_CALLS[run["op"]] if run["refuse"] else None)
        harness.import_torch = lambda proxy=proxy: (torch, proxy)  # type: ignore[misc]
        env = {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(nranks),
               "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_SIZE": str(nranks),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(run["port"])}
        error = None
        records: list[dict[str, Any]] = []
        try:
            spec = BenchSpec(op=run["op"], timeout_s=60, **run["spec"])
            records = [r.to_dict() for r in harness.run_torch_bench(spec, "gloo", env=env)]
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"
            if dist.is_initialized():
                dist.destroy_process_group()
        results.append({"calls": proxy.calls, "records": records, "error": error})
    queue.put((rank, results))


def run_ranks(nranks: int, runs: list[dict[str, Any]], timeout_s: float = 600) -> list[list[dict[str, Any]]]:
    """Each run (``{"op", "refuse", "spec": BenchSpec fields}``) on ``nranks`` spawned processes, one after the
    other; per rank, per run: ``{"calls", "records", "error"}``."""
    ports: set[int] = set()
    while len(ports) < len(runs):
        ports.add(free_port())
    runs = [{**run, "port": port} for run, port in zip(runs, sorted(ports), strict=True)]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, nranks, runs, queue)) for r in range(nranks)]
    for p in procs:
        p.start()
    try:
        got = dict(queue.get(timeout=timeout_s) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return [got[r] for r in range(nranks)]
