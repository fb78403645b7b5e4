"""Which knobs a running job can switch (persistent sweep workers): one row per knob of
:data:`collscope.vocab.knobs.KNOBS`, each with the source that says how NCCL, nccl-tests, gloo or Open MPI reads it.

A ``communicator`` knob changes with a new process group, an ``mpi_t`` one through Open MPI's MPI_T control
variable, a ``launch`` one only with a fresh launch; ``NCCL_NO_CACHE`` (NCCL >= 2.30.3) turns some cached NCCL
parameters into ``communicator`` ones (:func:`switch_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from collscope.vocab.knobs import KNOBS
from collscope.vocab.ompi import DYNAMIC_RULES, OMPI_ALGORITHMS, ompi_algorithm_knob

__all__ = ["Switch", "SwitchKind", "SWITCHES", "switch_of", "NO_CACHE_SINCE"]

SwitchKind = Literal["mpi_t", "communicator", "launch"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Switch:
    """How a knob's value can change inside a running job."""

    kind: SwitchKind
    """``mpi_t``: write the MPI_T control variable, then create a communicator; ``communicator``: read again at
    every communicator creation (a new process group per point); ``launch``: read once per process, so a new
    value needs a fresh launch."""
    source: str
    """Where that behaviour is stated or was seen."""
    no_cache: bool = False
    """A cached NCCL parameter read while a communicator is set up: with NCCL >= 2.30.3 and ``NCCL_NO_CACHE``
    naming it (or ``ALL``) NCCL reads it again at every use, so it switches per communicator
    (:func:`switch_of`)."""


NO_CACHE_SINCE = (2, 30, 3)
"""The first NCCL with ``NCCL_NO_CACHE`` (src/param/param.cc: ``ncclParamIsCacheDisabled``;
``reference/nccl-2025-2026.md``, 2.30.3)."""

_OMPI_FORCED = ("Open MPI 5.0.11 coll/tuned: the forced algorithm is copied into a communicator's module when the "
                "communicator is created (tuned_module_enable -> ompi_coll_tuned_forced_getvalues); MPI_T scope "
                "'all' (writable after MPI_Init), seen here with MPI_T_cvar_get_info; algorithms measured both ways "
                "by tests/sweeps/test_persistent_agreement.py")
_NCCL_PER_COMM = ("NCCL reads NCCL_ALGO/NCCL_PROTO with ncclGetEnv while tuning each new communicator "
                  "(src/graph/tuning.cc, ncclTopoTuneModel)")
_NCCL_COLLNET = ("NCCL 2.30: 'NCCL_COLLNET_ENABLE needs to be reloaded each time for comm init': read with "
                 "ncclGetEnv, not cached, in every communicator's config override (src/init.cc, envConfigOverride)")
_NCCL_CACHED = ("NCCL_PARAM(...) variables are read once and cached for the life of the process "
                "(src/include/param.h, src/misc/param.cc ncclLoadParam; reference/nccl-facts.md section 2)")
_NCCL_CACHED_AT_INIT = (_NCCL_CACHED + "; read while each communicator is set up (src/init.cc, src/graph/connect.cc, "
                        "tuning.cc, search.cc, paths.cc, src/transport/*), so NCCL_NO_CACHE naming it makes it "
                        "per communicator from NCCL 2.30.3 (src/param/param.cc)")
_AT_INIT = ("NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE",
            "NCCL_NTHREADS", "NCCL_NVLS_ENABLE", "NCCL_CROSS_NIC", "NCCL_PXN_DISABLE", "NCCL_SHM_DISABLE",
            "NCCL_IB_QPS_PER_CONNECTION")
"""Cached NCCL parameters read during a communicator's setup (init.cc envConfigOverride: MIN/MAX_CTAS;
connect.cc: MIN/MAX_NCHANNELS; init.cc computeBuffSizes: BUFFSIZE; tuning.cc: NTHREADS; nvls.cc ncclNvlsInit:
NVLS_ENABLE; search.cc: CROSS_NIC; paths.cc: PXN_DISABLE; shm.cc: SHM_DISABLE; net_ib connect: QPS)."""


def _switches() -> dict[str, Switch]:
    table = {name: Switch(kind="launch", source=_NCCL_CACHED) for name, k in KNOBS.items() if k.family == "nccl"}
    for name in _AT_INIT:
        table[name] = Switch(kind="launch", source=_NCCL_CACHED_AT_INIT, no_cache=True)
    table["NCCL_ALGO"] = Switch(kind="communicator", source=_NCCL_PER_COMM)
    table["NCCL_PROTO"] = Switch(kind="communicator", source=_NCCL_PER_COMM)
    table["NCCL_COLLNET_ENABLE"] = Switch(kind="communicator", source=_NCCL_COLLNET)
    table["NCCL_NO_CACHE"] = Switch(kind="launch", source="read once per process (std::call_once in "
                                    "ncclParamIsCacheDisabled, src/param/param.cc); NCCL before 2.30.3 ignores it")
    table["NCCL_TESTS_SPLIT_MASK"] = Switch(kind="launch", source="nccl-tests reads it once at start; nccl-tests "
                                            "points are always one launch each")
    table[DYNAMIC_RULES] = Switch(kind="launch", source="Open MPI coll/tuned reads it at MPI_Init (component "
                                  "registration); a persistent Open MPI worker is launched with it set to 1")
    for coll in OMPI_ALGORITHMS:
        table[ompi_algorithm_knob(coll)] = Switch(kind="mpi_t", source=_OMPI_FORCED)
    for rail in ("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include"):
        table[rail] = Switch(kind="launch", source="Open MPI's TCP BTL/OOB pick their interfaces when the "
                             "components open at MPI_Init")
    table["GLOO_SOCKET_IFNAME"] = Switch(kind="launch", source="read when a gloo process group's device is created; "
                                         "collscope runs torch points as one launch each")
    return table


SWITCHES: dict[str, Switch] = _switches()
"""Knob -> how a running job can switch it. Every knob of :data:`KNOBS` is listed; any other variable (a spec's
``fixed_env``) counts as ``launch``."""


def switch_of(name: str, *, no_cache: str | None = None,
              nccl_version: tuple[int, int, int] | None = None) -> Switch:
    """How ``name`` can change inside a running job (``launch`` for a variable the registry does not know).

    ``no_cache``: the job's ``NCCL_NO_CACHE`` value and ``nccl_version`` its NCCL: a cached parameter read at
    communicator setup that ``NCCL_NO_CACHE`` names (or ``ALL``) is ``communicator`` on NCCL >= 2.30.3; an
    unknown version counts as older (NCCL before 2.30.3 ignores the variable)."""
    found = SWITCHES.get(name) or Switch(kind="launch", source="not in the knob registry: assumed read once")
    if not found.no_cache or not no_cache or nccl_version is None or nccl_version < NO_CACHE_SINCE:
        return found
    keys = {item.strip() for item in no_cache.split(",")}
    if "ALL" not in keys and name not in keys:
        return found
    return Switch(kind="communicator", source=f"NCCL_NO_CACHE={no_cache} on NCCL "
                  f"{'.'.join(map(str, nccl_version))}: {_NCCL_CACHED_AT_INIT}")
