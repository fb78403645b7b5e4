"""Message sizes in nccl-tests' convention, from whatever a trace records: NCCL metadata (``In/Out msg
nelems``) or ``Input Dims`` of ``c10d::*`` / ``nccl:*`` / ``gloo:*`` events.

nccl-tests' "size" (``reference/nccl-facts.md`` 4.1): all_reduce / broadcast / reduce the buffer of one rank;
all_gather / reduce_scatter / alltoall the total over the group (each rank holds size / n).
"""

from __future__ import annotations

from math import prod
from typing import Any

from collscope.traces.names import dtype_of
from collscope.vocab.ops import OP_FACTS

__all__ = ["size_from_nelems", "size_from_dims", "tensor_elems", "dtype_from_types"]


def size_from_nelems(op: str, in_nelems: int, out_nelems: int | None, elem_bytes: int,
                     group_size: int | None) -> int | None:
    """nccl-tests size from the ``In msg nelems`` / ``Out msg nelems`` metadata; the group's size (never the
    world's) multiplies one rank's part when only that is recorded; None when that size is unknown."""
    in_nelems = max(in_nelems, 0)
    out = in_nelems if out_nelems is None else max(out_nelems, 0)
    gathers, scatters = _shape(op)
    if gathers:
        elems = out if out > in_nelems else _times(in_nelems, group_size)
    elif scatters:
        elems = in_nelems if in_nelems > out else _times(in_nelems, group_size)
    else:
        elems = in_nelems
    return None if elems is None else elems * elem_bytes


def _shape(op: str) -> tuple[bool, bool]:
    """(the output is n x the input: all_gather, gather; the input is n x the output: reduce_scatter, scatter), from
    the op table; alltoall (both n blocks) and the rest: neither."""
    facts = OP_FACTS.get(op)
    if facts is None:
        return False, False
    return (facts.recv_blocks_nranks and not facts.send_blocks_nranks,
            facts.send_blocks_nranks and not facts.recv_blocks_nranks)


def _times(elems: int, group_size: int | None) -> int | None:
    if elems == 0:
        return 0
    return None if group_size is None else elems * group_size


def tensor_elems(dims: Any) -> list[int]:
    """Element counts of the tensors in ``Input Dims``, in order; a TensorList argument adds each tensor.

    ``[[1059850]]`` -> ``[1059850]``; ``[[[65792]], [], []]`` -> ``[65792]``; scalars (``[]``) add nothing."""
    out: list[int] = []
    if not isinstance(dims, list):
        return out
    for arg in dims:
        if not isinstance(arg, list) or not arg:
            continue
        if all(_dim(d) for d in arg):
            out.append(prod(arg))
        else:
            out.extend(prod(t) for t in arg if isinstance(t, list) and t and all(_dim(d) for d in t))
    return out


def _dim(d: Any) -> bool:
    return isinstance(d, int) and not isinstance(d, bool) and d >= 0


def size_from_dims(op: str, dims: Any, elem_bytes: int, group_size: int | None) -> int | None:
    """nccl-tests size from ``Input Dims``; None when no tensor is listed (``record_shapes=False``).

    The first tensor is the rank's input (``nccl:*``, ``gloo:*``), except reduce_scatter whose full input is the
    largest tensor listed, and all_gather: the largest tensor when a larger output is listed
    (``c10d::_allgather_base_``: output, input), else n x the input (an output list of n inputs' size)."""
    elems = tensor_elems(dims)
    if not elems:
        return None
    first, largest = elems[0], max(elems)
    total: int | None
    gathers, scatters = _shape(op)
    if gathers:
        total = largest if largest > min(elems) else _times(first, group_size)
    elif scatters:
        total = largest
    else:
        total = first
    return None if total is None else total * elem_bytes


def dtype_from_types(types: Any) -> str | None:
    """The first tensor dtype named in ``Input type`` (``["float"]``, ``["TensorList", "", "Scalar"]``)."""
    if not isinstance(types, list):
        return None
    for t in types:
        if isinstance(t, str):
            d = dtype_of(t)
            if d is not None:
                return d
    return None
