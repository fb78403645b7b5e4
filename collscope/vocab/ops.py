"""The collectives collscope knows (:data:`OP_TABLE`: one row of facts per op) and the element types.

Every layer names a collective the same way (``all_reduce``, ``all_gather``, ...) and asks the op's row for its
facts: nccl-tests' binary and busbw factor, whether its size is the total over ranks, the elements a rank sends and
receives, rooted or not, reducing or not, NCCL's function and kernel names, the tuner plugin's and Open MPI's names,
the names traces give it. Nothing outside this module decides by an op's name (``tests/test_op_table.py`` searches
the package); adding an op is one row here plus its harness bindings (``collectives/harness``).

Element types likewise: a record's ``dtype`` is collscope's name (:data:`DTYPES`: ``float32``, as torch names it),
whichever engine measured it; :data:`DTYPE_TABLE` maps nccl-tests' names (``float``, ``half``, and the pre-2.10
``char``/``int``) to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple, get_args

__all__ = ["Op", "OPS", "OpFacts", "OP_TABLE", "OP_FACTS", "op_facts", "ops_where", "elements_per_rank",
           "OP_BY_NCCL_FUNC", "OP_BY_KERNEL", "OP_BY_TRACE_NAME", "OP_BY_NCCL_TESTS_BINARY", "REDUCING_OPS",
           "ROOTED_OPS", "HarnessOp", "HARNESS_OPS", "SweepOp", "SWEEP_OPS", "SPLIT_OPS", "busbw_factor",
           "DtypeName", "DTYPE_TABLE", "DTYPE_NAMES", "DTYPE_ALIASES", "canonical_dtype", "NCCL_TESTS_TYPE_BYTES",
           "ELEM_BYTES", "DTYPE_SPELLINGS",
           "SPLIT_GRANULE_BYTES"]

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv", "gather",
             "scatter", "hypercube"]
"""Every collective a Measurement may name: nccl-tests builds a ``<op>_perf`` binary for each (``src/*.cu``)."""


def _factor_2(n: int) -> float:
    return 2.0 * (n - 1) / n


def _factor_1(n: int) -> float:
    return (n - 1) / n


def _factor_one(n: int) -> float:
    return 1.0


class OpFacts(NamedTuple):
    """Everything collscope knows about one collective; every layer asks this row, never compares op names.

    Element counts are per rank, in units of the call's ``count`` (NCCL's count argument: one rank's share for
    split ops): ``send_blocks`` / ``recv_blocks`` is 1 or ``nranks`` blocks of ``count`` elements (a rooted op's
    root side: gather receives, scatter sends ``nranks`` blocks; the other ranks 1, or none for broadcast's
    receive-only non-roots, which use the receive buffer in place).
    """

    name: str
    """collscope's name (records, CLI)."""
    nccl_tests_binary: str
    """nccl-tests' binary (``src/<op>.cu`` builds ``<binary>``)."""
    busbw: Callable[[int], float]
    """busbw / algbw as a function of the ranks (nccl-tests ``src/<op>.cu`` ``*GetBw``, relative to the printed
    size over the time)."""
    size_is_total: bool
    """nccl-tests' "size" is the total over ranks, each rank holding size / nranks rounded down to 16 bytes
    (``*GetCollByteCount``: ``(count/nranks) & ~(16/eltSize - 1)``); False: one rank's buffer."""
    send_blocks_nranks: bool
    """The send buffer holds nranks blocks of ``count`` (reduce_scatter, alltoall, scatter at the root)."""
    recv_blocks_nranks: bool
    """The receive buffer holds nranks blocks of ``count`` (all_gather, alltoall, gather at the root)."""
    rooted: bool
    """A root rank is named (``-r``/``root``): broadcast, reduce, gather, scatter."""
    reduces: bool
    """Elements are combined with a reduction operator (``redop``)."""
    nccl_func: str | None
    """NCCL's collective function (``ncclFuncStr``: logs ``AllReduce: opCount``, NCCL_ALGO ``allreduce:ring``);
    None: NCCL runs it as grouped point-to-point sends and receives (no algorithm/protocol choice)."""
    tuner_collective: str | None
    """The tuner plugin's ``collective_type`` (``plugins/tuner/example`` nccl_tuner.conf), None when it has none."""
    kernel_names: tuple[str, ...]
    """NCCL's names of its function: the function part of kernel names (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``)
    and ``ncclFuncToString`` as NCCL Inspector writes it (``SendRecv``, ``Send``, ``Recv``)."""
    trace_names: tuple[str, ...]
    """Names traces give it (PyTorch ``c10d::*``/``nccl:*``/``gloo:*`` titles, Flight Recorder
    ``profiling_name``, Inspector ``coll``), lower case, after the ``c10d::`` prefix is dropped."""
    ompi_coll: str | None
    """Open MPI's ``coll tuned`` collective name (``OMPI_MCA_coll_tuned_<name>_algorithm``), None: none."""
    harness: bool = False
    """The mpi4py and torch harnesses (``collscope bench``) measure it."""
    sweep: bool = False
    """A sweep may name it (the harnesses' ops and nccl-tests' ``reduce``)."""
    one_peer: bool = False
    """Each rank exchanges with one peer only (sendrecv: sends to rank + 1, receives from rank - 1, nccl-tests
    ``src/sendrecv.cu``): one message's latency, not ceil(lg p)."""
    nccl_symmetric_kernel: bool = False
    """NCCL (>= 2.27) has symmetric-memory kernels for it (``src/device/symmetric/<op>.cuh``), which run on buffers
    registered as symmetric windows (nccl-tests ``-R 2``) inside one NVLink domain whose GPUs all reach each other
    directly (``src/sym_kernels.cc`` ``ncclSymkAvailable``: ``isAllDirectNvlink``)."""


OP_TABLE: tuple[OpFacts, ...] = (
    # busbw factors: nccl-tests src/all_reduce.cu 2(n-1)/n; all_gather.cu, reduce_scatter.cu, alltoall.cu,
    # gather.cu, scatter.cu (n-1)/n; broadcast.cu, reduce.cu, sendrecv.cu 1; hypercube.cu algbw counts
    # count x (n-1) of the n x count printed (so (n-1)/n of size/time) and busbw = algbw.
    OpFacts("all_reduce", "all_reduce_perf", _factor_2, False, False, False, False, True, "AllReduce", "allreduce",
            ("AllReduce",), ("allreduce", "allreduce_coalesced", "allreduce_sparse", "all_reduce",
                             "all_reduce_coalesced"), "allreduce", harness=True, sweep=True,
            nccl_symmetric_kernel=True),
    OpFacts("all_gather", "all_gather_perf", _factor_1, True, False, True, False, False, "AllGather", "allgather",
            ("AllGather",), ("allgather", "all_gather", "_allgather_base", "allgather_base",
                             "allgather_into_tensor_coalesced", "all_gather_into_tensor", "allgather_coalesced",
                             "all_gather_into_tensor_coalesced"), "allgather", harness=True, sweep=True,
            nccl_symmetric_kernel=True),
    OpFacts("reduce_scatter", "reduce_scatter_perf", _factor_1, True, True, False, False, True, "ReduceScatter",
            "reducescatter", ("ReduceScatter",),
            ("reduce_scatter", "_reduce_scatter_base", "reduce_scatter_base", "reduce_scatter_tensor",
             "reduce_scatter_tensor_coalesced", "reducescatter"), "reduce_scatter", harness=True, sweep=True,
            nccl_symmetric_kernel=True),
    OpFacts("alltoall", "alltoall_perf", _factor_1, True, True, True, False, False, None, None, ("AllToAll",),
            ("alltoall", "all_to_all", "alltoall_base", "all_to_allv"), "alltoall", harness=True, sweep=True),
    OpFacts("broadcast", "broadcast_perf", _factor_one, False, False, False, True, False, "Broadcast", "broadcast",
            ("Broadcast",), ("broadcast",), "bcast", harness=True, sweep=True),
    OpFacts("reduce", "reduce_perf", _factor_one, False, False, False, True, True, "Reduce", "reduce", ("Reduce",),
            ("reduce",), "reduce", sweep=True),
    OpFacts("sendrecv", "sendrecv_perf", _factor_one, False, False, False, False, False, None, None,
            ("SendRecv", "Send", "Recv"), ("send", "recv", "sendrecv", "recv_any_source"), None, one_peer=True),
    OpFacts("gather", "gather_perf", _factor_1, True, False, True, True, False, None, None, (), ("gather",), None),
    OpFacts("scatter", "scatter_perf", _factor_1, True, True, False, True, False, None, None, (), ("scatter",), None),
    OpFacts("hypercube", "hypercube_perf", _factor_1, True, False, True, False, False, None, None, (), (), None),
)
"""One row per collective, in nccl-tests' order: adding an op is one row here and its harness bindings."""

OPS: tuple[str, ...] = get_args(Op)
"""The names of :data:`Op`, in nccl-tests' order."""
OP_FACTS: dict[str, OpFacts] = {row.name: row for row in OP_TABLE}
"""collscope op name -> its row."""
if tuple(OP_FACTS) != OPS:
    raise AssertionError(f"OP_TABLE {tuple(OP_FACTS)} disagrees with Op {OPS}")


def op_facts(op: str) -> OpFacts:
    """The row of ``op``; ValueError naming the known ops when it is none of them."""
    try:
        return OP_FACTS[op]
    except (KeyError, TypeError):
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}") from None


def ops_where(**facts: object) -> tuple[str, ...]:
    """The ops whose rows have every given field value, in OPS order (``ops_where(reduces=True)``)."""
    return tuple(row.name for row in OP_TABLE if all(getattr(row, k) == v for k, v in facts.items()))


def elements_per_rank(op: str, count: int, nranks: int) -> tuple[int, int]:
    """(send, receive) elements a rank's buffers hold for a call of ``count`` (the root's side of rooted ops)."""
    row = op_facts(op)
    return (count * (nranks if row.send_blocks_nranks else 1), count * (nranks if row.recv_blocks_nranks else 1))


OP_BY_NCCL_FUNC: dict[str, str] = {row.nccl_func: row.name for row in OP_TABLE if row.nccl_func}
"""NCCL collective function (``AllReduce``) -> collscope op."""
OP_BY_KERNEL: dict[str, str] = {k: row.name for row in OP_TABLE for k in row.kernel_names}
"""NCCL's name of a function (a kernel name's ``AllReduce``, Inspector's ``SendRecv``/``Send``) -> collscope op."""
OP_BY_TRACE_NAME: dict[str, str] = {t: row.name for row in OP_TABLE for t in row.trace_names}
"""A trace's collective name (lower case, prefix dropped) -> collscope op."""
OP_BY_NCCL_TESTS_BINARY: dict[str, str] = {row.nccl_tests_binary: row.name for row in OP_TABLE}
"""nccl-tests binary (``all_reduce_perf``) -> collscope op."""

HarnessOp = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"]
"""The collectives the mpi4py and torch harnesses (``collscope bench``) measure."""
HARNESS_OPS: tuple[str, ...] = get_args(HarnessOp)

SweepOp = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce"]
"""The collectives a sweep may name: the harnesses' and nccl-tests' ``reduce`` (which engine runs which op is
checked when a point is launched)."""
SWEEP_OPS: tuple[str, ...] = get_args(SweepOp)

# The Literal types (for mypy and click choices) must say what the table says: checked once, at import.
if HARNESS_OPS != ops_where(harness=True) or SWEEP_OPS != ops_where(sweep=True):
    raise AssertionError(f"HarnessOp/SweepOp {HARNESS_OPS}/{SWEEP_OPS} disagree with OP_TABLE")

SPLIT_OPS = frozenset(ops_where(size_is_total=True))
"""Collectives whose nccl-tests "size" is the total over ranks, each rank holding size / nranks."""
REDUCING_OPS = frozenset(ops_where(reduces=True))
"""Collectives that combine elements with a reduction operator."""
ROOTED_OPS = frozenset(ops_where(rooted=True))
"""Collectives with a root rank."""

SPLIT_GRANULE_BYTES = 16
"""nccl-tests rounds each rank's share of a split op down to a multiple of 16 bytes (``(count/nranks) &
~(16/eltSize - 1)`` in ``src/all_gather.cu``, ``reduce_scatter.cu``, ``alltoall.cu``, ``gather.cu``,
``scatter.cu``, ``hypercube.cu``): sizes are multiples of 16 x nranks bytes, and a size below that is a size-0 row."""


class DtypeName(NamedTuple):
    """One element type: collscope's name (the one records carry), its width, and nccl-tests' names."""

    name: str
    """collscope's name, as torch names the type (``float32``, ``bfloat16``)."""
    elem_bytes: int
    nccl_tests: str | None
    """nccl-tests' ``-d`` name and "type" column (``src/common.cu`` test_typenames); None: nccl-tests has none."""
    nccl_tests_old: tuple[str, ...] = ()
    """Names of the same type in nccl-tests built against NCCL < 2.10 (``char``, ``int``)."""
    trace_names: tuple[str, ...] = ()
    """Other spellings traces use (matched without case): PyTorch profiler / Flight Recorder ``c10::`` and C type
    names, NCCL's ``ncclDataType_t`` names (``ncclFloat32``) as NCCL Inspector writes them."""


DTYPE_TABLE: tuple[DtypeName, ...] = (
    DtypeName("int8", 1, "int8", ("char",), ("signed char", "ncclInt8")),
    DtypeName("uint8", 1, "uint8", (), ("byte", "unsigned char", "ncclUint8")),
    DtypeName("int16", 2, None, (), ("short",)),
    DtypeName("int32", 4, "int32", ("int",), ("ncclInt32",)),
    DtypeName("uint32", 4, "uint32"),
    DtypeName("int64", 8, "int64", (), ("long", "long int", "ncclInt64")),
    DtypeName("uint64", 8, "uint64"),
    DtypeName("float16", 2, "half", (), ("c10::Half", "ncclFloat16", "ncclHalf")),
    DtypeName("float32", 4, "float", (), ("c10::float", "ncclFloat32", "ncclFloat")),
    DtypeName("float64", 8, "double", (), ("ncclFloat64",)),
    DtypeName("bfloat16", 2, "bfloat16", (), ("c10::BFloat16", "ncclBfloat16")),
    DtypeName("float8_e4m3fn", 1, "f8e4m3", (), ("c10::Float8_e4m3fn",)),
    DtypeName("float8_e5m2", 1, "f8e5m2", (), ("c10::Float8_e5m2",)),
    DtypeName("bool", 1, None),
)
"""Every element type a record may name, once (the harnesses' ``--dtype`` names are a part of it)."""
DTYPE_NAMES: tuple[str, ...] = tuple(d.name for d in DTYPE_TABLE)

DTYPE_ALIASES: dict[str, str] = {d.name: d.name for d in DTYPE_TABLE}
"""Every name of an element type (collscope's, nccl-tests' current and old) -> collscope's name."""
for _d in DTYPE_TABLE:
    for _alias in (_d.nccl_tests, *_d.nccl_tests_old):
        if _alias is not None:
            DTYPE_ALIASES[_alias] = _d.name
NCCL_TESTS_TYPE_BYTES: dict[str, int] = {alias: d.elem_bytes for d in DTYPE_TABLE
                                         for alias in (d.nccl_tests, *d.nccl_tests_old) if alias is not None}
"""nccl-tests' type names (current and pre-2.10) -> bytes per element: what its "type" column may hold."""
ELEM_BYTES: dict[str, int] = {d.name: d.elem_bytes for d in DTYPE_TABLE}
"""collscope's element type name -> bytes per element."""
DTYPE_SPELLINGS: dict[str, str] = {name.lower(): d.name for d in DTYPE_TABLE
                                   for name in (d.name, d.nccl_tests, *d.nccl_tests_old, *d.trace_names) if name}
"""Every spelling of an element type, lower case (traces: ``c10::BFloat16``, ``ncclFloat32``, ``float``) ->
collscope's name; records and nccl-tests tables use :data:`DTYPE_ALIASES`, which is exact."""


def canonical_dtype(name: str) -> str:
    """collscope's name of an element type named by any engine (``float`` -> ``float32``); ValueError naming the
    known names when it is none of them."""
    try:
        return DTYPE_ALIASES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown element type {name!r}; known: {', '.join(DTYPE_ALIASES)}") from None

def busbw_factor(op: str, nranks: int) -> float:
    """busbw = algbw x factor (nccl-tests' ``*GetBw``, :attr:`OpFacts.busbw`); the factor assumes point-to-point
    algorithms (not NVLS/CollNet wire rates)."""
    if op not in OP_FACTS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
    if nranks < 1:
        raise ValueError(f"nranks must be >= 1, got {nranks}")
    return float(OP_FACTS[op].busbw(nranks))
