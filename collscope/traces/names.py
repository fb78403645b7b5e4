"""Names as traces spell them, mapped to collscope's: collectives (``Collective name``, ``c10d::*``, ``nccl:*``,
``gloo:*``, NCCL kernel names, Flight Recorder ``profiling_name``, Inspector ``coll``) and dtypes with their sizes.

The op names are the op table's (:data:`collscope.vocab.ops.OP_TABLE` ``trace_names``, ``kernel_names``).
Sources: PyTorch ``ProcessGroupNCCL.cpp`` / ``ProcessGroupGloo`` profiling titles, ``ParamCommsUtils.hpp``
collective names, NCCL ``ncclFunc`` names (``reference/traces.md``).
"""

from __future__ import annotations

import re

from collscope.vocab.ops import DTYPE_SPELLINGS, ELEM_BYTES, OP_BY_KERNEL, OP_BY_TRACE_NAME, OP_FACTS

__all__ = ["op_of", "dtype_of", "element_bytes", "is_nccl_kernel", "kernel_runs", "SKIPPED"]

SKIPPED = frozenset({"wait", "barrier", "monitored_barrier", "init", "wait_tensor", "coalesced", "sync"})
"""Names that are not a data-moving collective (a wait, a barrier): never CollectiveCalls."""

_PREFIX = re.compile(r"^(?:c10d::|nccl:|gloo:|_c10d_functional::|c10d_functional::)")
_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")


def op_of(name: str) -> str | None:
    """collscope's op for a trace name; None for a wait/barrier or a name that is not a collective."""
    stripped = _PREFIX.sub("", name.strip()).lower()
    for base in (stripped, stripped.rstrip("_"), stripped.strip("_"), stripped.rstrip("_").removesuffix("_base")):
        if base in SKIPPED:
            return None
        if base in OP_BY_TRACE_NAME:
            return OP_BY_TRACE_NAME[base]
    m = _KERNEL.match(name)
    if m:
        return OP_BY_KERNEL.get(m.group(1))
    return None


def kernel_runs(op: str, kernel_op: str) -> bool:
    """Whether a call of ``op`` may run as kernels of ``kernel_op`` (read from the op table): its own function;
    point-to-point sends and receives (``SendRecv``) for the ops NCCL has no function for (alltoall, gather,
    scatter, send/recv); and the rooted function of the same reduction for a gathering or scattering op
    (PyTorch runs an all_gather of uneven tensors as grouped ``ncclBroadcast`` and a reduce_scatter of uneven
    ones as grouped ``ncclReduce``: ``ProcessGroupNCCL.cpp`` ``allgather_v`` / ``reduce_scatter_v`` paths).
    Unknown ops: True (nothing to say). A pair outside these is said, not trusted either way: the link may be
    wrong, or the name (NCCL 2.13's kernels were all named SendRecv, NVIDIA/nccl#714)."""
    said, ran = OP_FACTS.get(op), OP_FACTS.get(kernel_op)
    if said is None or ran is None or said is ran:
        return True
    if said.nccl_func is None and ran.nccl_func is None:
        return True
    spread = said.send_blocks_nranks != said.recv_blocks_nranks
    return spread and ran.rooted and not said.rooted and ran.reduces == said.reduces


def is_nccl_kernel(name: str) -> bool:
    return name.startswith(("ncclKernel", "ncclDevKernel"))


def dtype_of(name: str | None) -> str | None:
    """``Float``, ``float``, ``c10::BFloat16``, ``ncclFloat32`` -> ``float32``...; None when unknown."""
    if not name:
        return None
    return DTYPE_SPELLINGS.get(name.strip().lower())


def element_bytes(dtype: str | None) -> int | None:
    return None if dtype is None else ELEM_BYTES.get(dtype)
