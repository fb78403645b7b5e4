"""Config naming shared by every layer: the unset knob value, the name of the all-default configuration, and the
canonical ``K=V;K=V`` string that names every other configuration (the ``config`` column of the results)."""

from __future__ import annotations

from collections.abc import Mapping

from collscope.vocab.engines import ENGINE_ROWS
from collscope.vocab.ompi import DYNAMIC_RULES
from collscope.vocab.secrets import redacted

__all__ = ["DEFAULT", "OMPI_ASYNC_MODEX", "DEFAULT_CONFIG", "NON_TUNING_VARIABLES", "NON_TUNING_PREFIXES",
           "LAUNCHER_VARIABLES", "LAUNCHER_PREFIXES", "RAIL_VARIABLES", "RAIL_KEY", "is_tuning_variable",
           "is_launcher_variable", "rail_of", "config_of"]

DEFAULT = ""
"""A knob value that means "not set": the variable is left out of the point's environment."""

DEFAULT_CONFIG = "default"
"""The configuration name of the point with every knob unset (always measured, the baseline)."""

OMPI_ASYNC_MODEX = "OMPI_MCA_pmix_base_async_modex"
"""Open MPI's asynchronous modex: peers' connection data fetched when first needed instead of exchanged in a
fence inside MPI_Init. ``collscope locate`` sets it to 1 for its mpi-engine srun steps unless the user did:
Open MPI 5.0's fence lets a rank send before a slower peer has set MPI_COMM_WORLD up, and the peer dies with
SIGSEGV (open-mpi/ompi#11438; seen in 3 of 15 4-node steps, 0 of 15 with it). Sweeps do not set it: on the
one-node Slurm here (22.05, Open MPI 5.0.11) a sweep of Open MPI's algorithms with it hung in 6 of 27 points
(ring and algorithm 6; the default algorithm, which locate uses, never), none without it. It is launcher
plumbing: not a recorded setting, not part of a configuration's name."""

LAUNCHER_VARIABLES = frozenset({
    "OMPI_MCA_PREFIXES", "OMPI_MCA_cpu_type", "OMPI_MCA_initial_wdir", "OMPI_MCA_num_procs",
    "OMPI_MCA_mpi_oversubscribe", "OMPI_MCA_ess", "OMPI_MCA_pmix", "OMPI_MCA_shmem_RUNTIME_QUERY_hint",
    "OMPI_MCA_mpi_yield_when_idle", OMPI_ASYNC_MODEX,
})
"""What mpirun/prterun/orted (or collscope's own launch) export to every rank as bookkeeping: never a setting,
never part of a record's inherited ``environment``."""

LAUNCHER_PREFIXES = ("OMPI_ALLOW_RUN_AS_ROOT", "PMIX_", "PRTE_", "SLURM_", "OMPI_MCA_orte_", "OMPI_MCA_ess_base_",
                     "OMPI_MCA_prte_", "OMPI_MCA_ras_", "OMPI_MCA_rmaps_")
"""Name prefixes of the launcher's internals and per-rank bookkeeping (permission to run as root, PMIx, PRRTE,
Slurm, Open MPI's runtime): never a setting, never part of a record's ``environment``."""

NON_TUNING_VARIABLES = frozenset({
    # logging and dumps: what NCCL prints, not what it does
    "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_FORMAT",
    "NCCL_DEBUG_TIMESTAMP_LEVELS", "NCCL_WARN_ENABLE_DEBUG_INFO", "NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_DUMP_FILE",
    "NCCL_PROFILER_PLUGIN", "NCCL_RAS_ENABLE",
    # plumbing: which interface / address bootstrap uses, not a tuning choice
    "NCCL_SOCKET_IFNAME", "NCCL_COMM_ID", "NCCL_HOSTID", "OMPI_MCA_btl_tcp_if_include",
    "OMPI_MCA_btl_tcp_if_exclude", "OMPI_MCA_oob_tcp_if_include", "OMPI_MCA_oob_tcp_if_exclude",
    "OMPI_MCA_rmaps_base_oversubscribe", OMPI_ASYNC_MODEX,
    # implied by an Open MPI algorithm setting (vocab.knobs.requires adds it)
    DYNAMIC_RULES,
    *LAUNCHER_VARIABLES,
})
"""Variables that never define a configuration: the deny list (exact names)."""

NON_TUNING_PREFIXES = LAUNCHER_PREFIXES
"""Name prefixes that never define a configuration (:data:`LAUNCHER_PREFIXES`)."""


def is_tuning_variable(name: str) -> bool:
    """Whether setting ``name`` defines a configuration: everything except :data:`NON_TUNING_VARIABLES` and
    names starting with :data:`NON_TUNING_PREFIXES` (the allow list is "all other variables", so a knob the
    registry does not know yet still separates configurations)."""
    return name not in NON_TUNING_VARIABLES and not name.startswith(NON_TUNING_PREFIXES)


def is_launcher_variable(name: str) -> bool:
    """Whether ``name`` is the launcher's bookkeeping or internals (:data:`LAUNCHER_VARIABLES`,
    :data:`LAUNCHER_PREFIXES`), not something a user or a site set."""
    return name in LAUNCHER_VARIABLES or name.startswith(LAUNCHER_PREFIXES)


RAIL_VARIABLES: tuple[str, ...] = tuple(dict.fromkeys(v for row in ENGINE_ROWS for v in row.rail_variables))
"""The variables that pin a measurement to one rail (an HCA or a network interface), in the order a record's rail
is read from them: each engine's own (:data:`collscope.vocab.engines.ENGINE_ROWS`: ``NCCL_IB_HCA``, Open MPI's
``OMPI_MCA_btl_tcp_if_include`` / ``OMPI_MCA_oob_tcp_if_include``, ``GLOO_SOCKET_IFNAME``: what the rail presets
and ``collscope locate --rails`` set). ``NCCL_SOCKET_IFNAME`` is not one: over InfiniBand it only picks NCCL's
bootstrap interface, plumbing that never names a configuration."""

RAIL_KEY = "rail"
"""The name of the rail in a configuration's name (``rail=cl1``): lower case, so it is never an environment
variable's name and sorts after every variable."""


def rail_of(settings: Mapping[str, object], variables: tuple[str, ...] = RAIL_VARIABLES) -> str | None:
    """The rail ``settings`` pin (the value of the first of ``variables`` set, not blank), None when none is."""
    for name in variables:
        value = settings.get(name)
        if value is not None and str(value).strip():
            return str(value)
    return None


def config_of(settings: Mapping[str, object], rail: str | None = None) -> str:
    """The canonical configuration name: tuning settings as sorted ``K=V`` joined by ``;``, then the rail
    (``rail=<interface or HCA>``), or :data:`DEFAULT_CONFIG` when none is set.

    ``settings`` are a point's forced settings (a record's ``settings``); what the ranks inherited (a record's
    ``environment``) never names a configuration, so one site-wide variable does not rename every configuration,
    "default" included. A secret's value (:func:`collscope.vocab.secrets.is_secret_name`) is written
    :data:`~collscope.vocab.secrets.REDACTED`: the name is printed by every report.

    The rail is part of the name: ``rail`` (a record's ``rail``), else the one ``settings`` pin
    (:func:`rail_of`). A rail variable that is a tuning variable (``NCCL_IB_HCA``, ``GLOO_SOCKET_IFNAME``) names
    it already; one that never names a configuration (``OMPI_MCA_btl_tcp_if_include``: plumbing) is named
    ``rail=<value>``, so points pinned to rail 0, rail 1 or none are three configurations,
    never repeats of one."""
    items = sorted((str(k), redacted(str(k), str(v))) for k, v in settings.items() if is_tuning_variable(str(k)))
    pinned = rail if rail is not None else rail_of(settings)
    if pinned is not None and not any(k in RAIL_VARIABLES for k, _ in items):
        items.append((RAIL_KEY, pinned))
    return ";".join(f"{k}={v}" for k, v in items) or DEFAULT_CONFIG
