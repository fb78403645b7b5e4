"""The names every layer shares, defined once: collectives (:mod:`.ops`), NCCL's algorithms, protocols and
functions (:mod:`.nccl`), Open MPI's ``coll tuned`` algorithm ids (:mod:`.ompi`), the knobs a sweep may set
(:mod:`.knobs`) and configuration naming (:mod:`.configs`).

Every other module imports these names from here (or from the submodule); none defines its own copy.
The vocabulary imports nothing of collscope but ``errors`` and ``units``.
"""

from __future__ import annotations

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
