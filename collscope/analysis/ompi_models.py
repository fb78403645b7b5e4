"""Open MPI ``coll tuned`` algorithm ids -> the alpha-beta model of :mod:`collscope.analysis.models` that
describes each (``../shared/reference/nccl-facts.md`` section 8, ``sweeps/ompi_algos.py``)."""

from __future__ import annotations

from collections.abc import Mapping

from collscope.vocab.ompi import OP_OMPI_COLL, ompi_algorithm_id, ompi_algorithm_knob, ompi_algorithm_name

__all__ = ["model_for_setting"]

_OMPI_MODEL: dict[str, dict[str, str]] = {
    # 1 basic_linear: linear reduce + linear bcast; 2 nonoverlapping: tuned reduce + tuned bcast ~ binomial;
    # 5 segmented_ring: the ring with segments.
    "allreduce": {"basic_linear": "linear", "nonoverlapping": "binomial", "recursive_doubling": "recursive_doubling",
                  "ring": "ring", "segmented_ring": "ring", "rabenseifner": "rabenseifner"},
    # 5 neighbor exchange moves the ring's volume in p/2 steps of 2 blocks ~ ring; two_proc is p = 2 (any model);
    # 7 sparbit is logarithmic with the (p-1)/p volume ~ Bruck.
    "allgather": {"bruck": "bruck", "recursive_doubling": "recursive_doubling", "ring": "ring",
                  "neighbor": "ring", "two_proc": "ring", "sparbit": "bruck"},
    # 4 butterfly has recursive halving's cost for p = 2^k.
    "reduce_scatter": {"recursive_halving": "recursive_halving", "ring": "ring", "butterfly": "recursive_halving"},
    "bcast": {"binomial": "binomial", "scatter_allgather": "scatter_allgather",
              "scatter_allgather_ring": "scatter_allgather"},
    "reduce": {"binomial": "binomial", "rabenseifner": "rabenseifner"},
}


def model_for_setting(op: str, settings: Mapping[str, str]) -> str | None:
    """The alpha-beta model of the Open MPI algorithm a point forced, e.g. ``"ring"`` for
    ``OMPI_MCA_coll_tuned_allreduce_algorithm=4``; None when nothing is forced, the id is 0 (fixed rules) or the
    algorithm has no model here (linear allgather, chain/pipeline bcast, ...)."""
    coll = OP_OMPI_COLL.get(op)
    if coll is None or coll not in _OMPI_MODEL:
        return None
    value = None
    for key in (ompi_algorithm_knob(coll), f"coll_tuned_{coll}_algorithm"):
        if key in settings:
            value = str(settings[key])
            break
    if value is None:
        return None
    algo_id = ompi_algorithm_id(coll, value)
    if not algo_id:
        return None
    return _OMPI_MODEL[coll].get(ompi_algorithm_name(coll, algo_id))
