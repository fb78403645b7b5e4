"""Names as traces spell them, mapped to collscope's: collectives (``Collective name``, ``c10d::*``, ``nccl:*``,
``gloo:*``, NCCL kernel names, Flight Recorder ``profiling_name``, Inspector ``coll``) and dtypes with their sizes.

The op names are the op table's (:data:`collscope.vocab.ops.OP_TABLE` ``trace_names``, ``kernel_names``).
Sources: PyTorch ``ProcessGroupNCCL.cpp`` / ``ProcessGroupGloo`` profiling titles, ``ParamCommsUtils.hpp``
collective names, NCCL ``ncclFunc`` names (``reference/traces.md``).
"""

from __future__ import annotations

import re

from collscope.vocab.ops import DTYPE_SPELLINGS, ELEM_BYTES, OP_BY_KERNEL, OP_BY_TRACE_NAME

__all__ = ["op_of", "dtype_of", "element_bytes", "is_nccl_kernel", "SKIPPED"]

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


def is_nccl_kernel(name: str) -> bool:
    return name.startswith(("ncclKernel", "ncclDevKernel"))


def dtype_of(name: str | None) -> str | None:
    """``Float``, ``float``, ``c10::BFloat16``, ``ncclFloat32`` -> ``float32``...; None when unknown."""
    if not name:
        return None
    return DTYPE_SPELLINGS.get(name.strip().lower())


def element_bytes(dtype: str | None) -> int | None:
    return None if dtype is None else ELEM_BYTES.get(dtype)
