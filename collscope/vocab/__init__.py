"""The names every layer shares, defined once: collectives (:mod:`.ops`), NCCL's algorithms, protocols and
functions (:mod:`.nccl`), Open MPI's ``coll tuned`` algorithm ids (:mod:`.ompi`), the knobs a sweep may set
(:mod:`.knobs`) and configuration naming (:mod:`.configs`).

Every other module imports these names from here (or from the submodule); none defines its own copy.
The vocabulary imports nothing of collscope but ``errors`` and ``units``.

Names load on first use (:mod:`collscope._lazy`): the per-rank ``collscope bench`` path needs only ``ops``
and ``configs``, not the knob registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.vocab.configs import DEFAULT, DEFAULT_CONFIG, config_of, is_tuning_variable
    from collscope.vocab.knobs import KNOBS, Knob, describe, knob, requires, validate_env, validate_setting
    from collscope.vocab.nccl import ALGORITHMS, FUNCTIONS, OP_FUNC, PROTOCOLS, pair_runs, parse_selection
    from collscope.vocab.ompi import DYNAMIC_RULES, OMPI_ALGORITHMS, OMPI_COLL_OP, ompi_algorithm_knob
    from collscope.vocab.ops import HARNESS_OPS, OPS, SPLIT_OPS, SWEEP_OPS, HarnessOp, Op, SweepOp, busbw_factor

__all__ = [
    "OPS", "Op", "HARNESS_OPS", "HarnessOp", "SWEEP_OPS", "SweepOp", "SPLIT_OPS", "busbw_factor",
    "ALGORITHMS", "PROTOCOLS", "FUNCTIONS", "OP_FUNC", "parse_selection", "pair_runs",
    "OMPI_ALGORITHMS", "OMPI_COLL_OP", "DYNAMIC_RULES", "ompi_algorithm_knob",
    "KNOBS", "Knob", "knob", "validate_setting", "validate_env", "requires", "describe",
    "DEFAULT", "DEFAULT_CONFIG", "config_of", "is_tuning_variable",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.vocab.configs": ["DEFAULT", "DEFAULT_CONFIG", "config_of", "is_tuning_variable"],
        "collscope.vocab.knobs": ["KNOBS", "Knob", "describe", "knob", "requires", "validate_env", "validate_setting"],
        "collscope.vocab.nccl": ["ALGORITHMS", "FUNCTIONS", "OP_FUNC", "PROTOCOLS", "pair_runs", "parse_selection"],
        "collscope.vocab.ompi": ["DYNAMIC_RULES", "OMPI_ALGORITHMS", "OMPI_COLL_OP", "ompi_algorithm_knob"],
        "collscope.vocab.ops": ["HARNESS_OPS", "OPS", "SPLIT_OPS", "SWEEP_OPS", "HarnessOp", "Op", "SweepOp",
                                "busbw_factor"],
    })
