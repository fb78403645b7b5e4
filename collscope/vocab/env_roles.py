"""What an inherited variable does to a collective, for the inherited-environment audit of a sweep
(:mod:`collscope.sweeps.inherited_env`): it picks the algorithm (``selection``), it is the site's configuration
(``plumbing``: NICs, interfaces, plugins, logging, kept by every sweep) or it may change what NCCL or Open MPI's
collective components do (``tuning``).

Plumbing extends :data:`collscope.vocab.configs.NON_TUNING_VARIABLES` (the variables that never name a
configuration); the knobs a sweep sets are in :data:`collscope.vocab.knobs.KNOBS`.
"""

from __future__ import annotations

from typing import Literal

from collscope.vocab.configs import NON_TUNING_PREFIXES, NON_TUNING_VARIABLES
from collscope.vocab.ompi import DYNAMIC_RULES

__all__ = ["EnvRole", "env_role"]

EnvRole = Literal["selection", "tuning", "plumbing"]

_SELECTION = frozenset({"NCCL_ALGO", "NCCL_PROTO", "NCCL_TUNER_PLUGIN", "NCCL_TUNER_CONFIG_FILE", DYNAMIC_RULES,
                        "OMPI_MCA_coll_tuned_dynamic_rules_filename"})
"""Variables that pick the algorithm or protocol (or the plugin that picks them): NCCL's selection (NCCL_ALGO,
NCCL_PROTO, a tuner plugin and its rules file) and Open MPI's coll tuned forcing (dynamic rules, a rules file,
every ``*_algorithm``)."""
_PLUMBING = frozenset({
    "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_IB_SL", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT",
    "NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_DISABLE", "NCCL_SOCKET_FAMILY",
    "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_COLLNET_PLUGIN", "NCCL_TOPO_FILE", "NCCL_CONF_FILE", "NCCL_CUMEM_ENABLE",
    "NCCL_MNNVL_ENABLE", "NCCL_MNNVL_CLIQUE_ID", "NCCL_NO_CACHE", "NCCL_TESTS_SPLIT_MASK", "GLOO_SOCKET_IFNAME",
})
"""Which NICs, interfaces, network plugin and topology a job may use, and how NCCL reads its settings: the site's
configuration, which a sweep keeps (besides :data:`collscope.vocab.configs.NON_TUNING_VARIABLES`)."""


def env_role(name: str) -> EnvRole | None:
    """What an inherited variable does to a collective: ``selection`` (picks the algorithm/protocol),
    ``plumbing`` (NICs, interfaces, plugins, logging: the site's configuration, kept), ``tuning`` (any other
    variable of NCCL or of Open MPI, whose collective components run over its point-to-point layer: ``OMPI_MCA_pml``
    and ``OMPI_MCA_btl`` change what they measure), None (neither)."""
    if name in _SELECTION or (name.startswith("OMPI_MCA_coll_tuned_") and name.endswith("_algorithm")):
        return "selection"
    if name in _PLUMBING or name in NON_TUNING_VARIABLES or name.startswith(NON_TUNING_PREFIXES):
        return "plumbing"
    if name.startswith(("NCCL_", "OMPI_MCA_")):  # OMPI_MCA_pml/btl/mtl: the transport every coll algorithm uses
        return "tuning"
    return None
