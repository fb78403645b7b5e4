"""Names as traces spell them, mapped to collscope's: collectives (``Collective name``, ``c10d::*``, ``nccl:*``,
``gloo:*``, NCCL kernel names, Flight Recorder ``profiling_name``, Inspector ``coll``) and dtypes with their sizes.

Sources: PyTorch ``ProcessGroupNCCL.cpp`` / ``ProcessGroupGloo`` profiling titles, ``ParamCommsUtils.hpp``
collective names, NCCL ``ncclFunc`` names (``reference/traces.md``).
"""

from __future__ import annotations

import re

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


_DTYPES = {
    "float": "float32", "float32": "float32", "c10::float": "float32",
    "half": "float16", "c10::half": "float16", "float16": "float16",
    "bfloat16": "bfloat16", "c10::bfloat16": "bfloat16",
    "double": "float64", "float64": "float64",
    "int": "int32", "int32": "int32", "long": "int64", "long int": "int64", "int64": "int64",
    "short": "int16", "int16": "int16", "char": "int8", "signed char": "int8", "int8": "int8",
    "byte": "uint8", "unsigned char": "uint8", "uint8": "uint8", "bool": "bool",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "c10::float8_e4m3fn": "float8_e4m3fn",
    "c10::float8_e5m2": "float8_e5m2",
    "ncclfloat32": "float32", "ncclfloat": "float32", "ncclfloat16": "float16", "ncclhalf": "float16",
    "ncclbfloat16": "bfloat16", "ncclfloat64": "float64", "ncclint32": "int32", "ncclint64": "int64",
    "ncclint8": "int8", "nccluint8": "uint8",
}
_SIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int64": 8, "int16": 2, "int8": 1,
          "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


def dtype_of(name: str | None) -> str | None:
    """``Float``, ``float``, ``c10::BFloat16``, ``ncclFloat32`` -> ``float32``...; None when unknown."""
    if not name:
        return None
    return _DTYPES.get(name.strip().lower())


def element_bytes(dtype: str | None) -> int | None:
    return None if dtype is None else _SIZES.get(dtype)
