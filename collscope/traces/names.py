"""Names as traces spell them, mapped to collscope's: collectives (``Collective name``, ``c10d::*``, ``nccl:*``,
``gloo:*``, NCCL kernel names, Flight Recorder ``profiling_name``, Inspector ``coll``) and dtypes with their sizes.

Sources: PyTorch ``ProcessGroupNCCL.cpp`` / ``ProcessGroupGloo`` profiling titles, ``ParamCommsUtils.hpp``
collective names, NCCL ``ncclFunc`` names (``reference/traces.md``).
"""

from __future__ import annotations

import re

from collscope.vocab.ops import DTYPE_SPELLINGS, ELEM_BYTES

__all__ = ["op_of", "dtype_of", "element_bytes", "is_nccl_kernel", "SKIPPED"]

_OPS = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "allreduce_sparse": "all_reduce",
    "all_reduce": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "allgather": "all_gather", "all_gather": "all_gather", "_allgather_base": "all_gather",
    "allgather_base": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_coalesced": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "reducescatter": "reduce_scatter",
    "alltoall": "alltoall", "all_to_all": "alltoall", "alltoall_base": "alltoall", "all_to_allv": "alltoall",
    "broadcast": "broadcast", "reduce": "reduce", "gather": "gather", "scatter": "scatter",
    "send": "sendrecv", "recv": "sendrecv", "sendrecv": "sendrecv", "recv_any_source": "sendrecv",
}
SKIPPED = frozenset({"wait", "barrier", "monitored_barrier", "init", "wait_tensor", "coalesced", "sync"})
"""Names that are not a data-moving collective (a wait, a barrier): never CollectiveCalls."""

_PREFIX = re.compile(r"^(?:c10d::|nccl:|gloo:|_c10d_functional::|c10d_functional::)")
_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_KERNEL_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
               "Broadcast": "broadcast", "Reduce": "reduce", "SendRecv": "sendrecv", "AllToAll": "alltoall"}


def op_of(name: str) -> str | None:
    """collscope's op for a trace name; None for a wait/barrier or a name that is not a collective."""
    stripped = _PREFIX.sub("", name.strip()).lower()
    for base in (stripped, stripped.rstrip("_"), stripped.strip("_"), stripped.rstrip("_").removesuffix("_base")):
        if base in SKIPPED:
            return None
        if base in _OPS:
            return _OPS[base]
    m = _KERNEL.match(name)
    if m:
        return _KERNEL_OPS.get(m.group(1))
    return None


def is_nccl_kernel(name: str) -> bool:
    return name.startswith(("ncclKernel", "ncclDevKernel"))


def dtype_of(name: str | None) -> str | None:
    """``Float``, ``float``, ``c10::BFloat16``, ``ncclFloat32`` -> ``float32``...; None when unknown."""
    if not name:
        return None
    return DTYPE_SPELLINGS.get(name.strip().lower())


def element_bytes(dtype: str | None) -> int | None:
    return None if dtype is None else ELEM_BYTES.get(dtype)
