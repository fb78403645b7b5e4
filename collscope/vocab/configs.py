"""Config naming shared by every layer: the unset knob value, the name of the all-default configuration, and the
canonical ``K=V;K=V`` string that names every other configuration (the ``config`` column of the results)."""

from __future__ import annotations

from collections.abc import Mapping

from collscope.vocab.ompi import DYNAMIC_RULES

__all__ = ["DEFAULT", "DEFAULT_CONFIG", "NON_TUNING_VARIABLES", "NON_TUNING_PREFIXES", "is_tuning_variable",
           "config_of"]

DEFAULT = ""
"""A knob value that means "not set": the variable is left out of the point's environment."""

DEFAULT_CONFIG = "default"
"""The configuration name of the point with every knob unset (always measured, the baseline)."""

NON_TUNING_VARIABLES = frozenset({
    # logging and dumps: what NCCL prints, not what it does
    "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_FORMAT",
    "NCCL_DEBUG_TIMESTAMP_LEVELS", "NCCL_WARN_ENABLE_DEBUG_INFO", "NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_DUMP_FILE",
    "NCCL_PROFILER_PLUGIN", "NCCL_RAS_ENABLE",
    # plumbing: which interface / address bootstrap uses, not a tuning choice
    "NCCL_SOCKET_IFNAME", "NCCL_COMM_ID", "NCCL_HOSTID", "OMPI_MCA_btl_tcp_if_include",
    "OMPI_MCA_btl_tcp_if_exclude", "OMPI_MCA_oob_tcp_if_include", "OMPI_MCA_oob_tcp_if_exclude",
    "OMPI_MCA_rmaps_base_oversubscribe",
    # implied by an Open MPI algorithm setting (vocab.knobs.requires adds it)
    DYNAMIC_RULES,
})
"""Variables that never define a configuration: the deny list (exact names)."""

NON_TUNING_PREFIXES = ("OMPI_ALLOW_RUN_AS_ROOT", "PMIX_", "PRTE_", "SLURM_")
"""Name prefixes that never define a configuration (permission to run as root, launcher internals)."""


def is_tuning_variable(name: str) -> bool:
    """Whether setting ``name`` defines a configuration: everything except :data:`NON_TUNING_VARIABLES` and
    names starting with :data:`NON_TUNING_PREFIXES` (the allow list is "all other variables", so a knob the
    registry does not know yet still separates configurations)."""
    return name not in NON_TUNING_VARIABLES and not name.startswith(NON_TUNING_PREFIXES)


def config_of(settings: Mapping[str, object]) -> str:
    """The canonical configuration name: tuning settings as sorted ``K=V`` joined by ``;``, or
    :data:`DEFAULT_CONFIG` when none is set."""
    items = sorted((str(k), str(v)) for k, v in settings.items() if is_tuning_variable(str(k)))
    return ";".join(f"{k}={v}" for k, v in items) or DEFAULT_CONFIG
