"""Named sweeps, as code: each preset is a function returning a checked SweepSpec.

Keyword overrides replace SweepSpec fields (``preset("demo", nranks=4)``); an unknown override is a ConfigError
listing the fields. Every NCCL preset times its points with ``NCCL_DEBUG=WARN`` (NCCL >= 2.24 logs per call at
INFO, inside the timed loop); the runner verifies each forced setting in a separate short run at INFO with the
INIT, ENV and TUNING subsystems (:data:`collscope.sweeps.runner.VERIFY_ENV`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from collscope.errors import ConfigError
from collscope.sweeps.spec import DEFAULT, SPEC_KEYS, SweepSpec
from collscope.topo.model import NodeTopology
from collscope.vocab.nccl import ALGORITHMS, PROTOCOLS
from collscope.vocab.ompi import ompi_algorithm_knob

__all__ = ["PRESETS", "preset", "NCCL_DEBUG_ENV", "SIMULATED_RAILS", "rail_interfaces"]

RAIL_PRESETS = ("nccl-pxn-rails", "mpi-rails", "gloo-rails")
"""Presets that take ``rails=`` (names, or the topology given with ``--topo``)."""

NCCL_DEBUG_ENV: dict[str, str] = {"NCCL_DEBUG": "WARN"}
"""Fixed environment of every NCCL preset's timed runs: warnings only, so that logging does not change what is
measured (the verification run logs at INFO)."""

_FIELDS = SPEC_KEYS
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def _make(defaults: dict[str, Any], overrides: dict[str, Any]) -> SweepSpec:
    unknown = sorted(set(overrides) - set(_FIELDS))
    if unknown:
        raise ConfigError(f"unknown spec field {unknown[0]!r}; valid: {', '.join(_FIELDS)}")
    fields = {**defaults, **overrides}
    if "fixed_env" in defaults and "fixed_env" in overrides:
        fields["fixed_env"] = {**defaults["fixed_env"], **overrides["fixed_env"]}
    return SweepSpec(**fields)


def mpi_algos(**overrides: Any) -> SweepSpec:
    """Open MPI's allreduce (1 linear, 3 recursive doubling, 4 ring, 6 Rabenseifner) and allgather (2 Bruck,
    3 recursive doubling, 4 ring) algorithms against Open MPI's default choice, 8 B..1 MiB."""
    return _make({
        "name": "mpi-algos", "engine": "mpi", "ops": ("all_reduce", "all_gather"), "min_bytes": 8,
        "max_bytes": MIB,
        "per_op_grid": {
            "all_reduce": {ompi_algorithm_knob("allreduce"): ("1", "3", "4", "6")},
            "all_gather": {ompi_algorithm_knob("allgather"): ("2", "3", "4")},
        },
    }, overrides)


def nccl_algo_proto(**overrides: Any) -> SweepSpec:
    """NCCL_ALGO x NCCL_PROTO (each also left unset) for all_reduce, all_gather and reduce_scatter with nccl-tests;
    pairs NCCL never runs, and hardware the topology lacks, are skipped by the planner.

    The ladder starts at 8 B; all_gather and reduce_scatter start where every rank's share holds data (nccl-tests
    rounds it down to 16 B: 128 B on 8 ranks, 256 B on 16; :func:`collscope.collectives.sizes.first_ladder_size`),
    so no point measures size-0 rows."""
    return _make({
        "name": "nccl-algo-proto", "engine": "nccl-tests", "ops": ("all_reduce", "all_gather", "reduce_scatter"),
        "min_bytes": 8, "max_bytes": GIB, "nranks": 8,
        "grid": {
            "NCCL_ALGO": (DEFAULT, *ALGORITHMS),
            "NCCL_PROTO": (DEFAULT, *PROTOCOLS),
        },
        "fixed_env": dict(NCCL_DEBUG_ENV),
    }, overrides)


def nccl_pxn_rails(*, rails: Sequence[str] | NodeTopology | None = None, **overrides: Any) -> SweepSpec:
    """PXN on/off x NCCL_CROSS_NIC 0/1 x one rail at a time (``NCCL_IB_HCA==<nic>``, when ``rails`` or a
    topology's NICs are given) x rail-isolated communicators (``NCCL_TESTS_SPLIT_MASK`` = ranks per node - 1,
    when that is a power of two), on 2 nodes of 8 GPUs unless overridden.

    A rail-isolated point runs one communicator per local GPU index (GPU i of every node), all at once: its
    records carry that communicator's size (``nnodes`` ranks: 2 on 2 nodes), the n of nccl-tests' busbw, not the
    16 ranks launched (:mod:`collscope.collectives.nccl_tests.launch`). all_gather starts where every rank's share
    holds data (16 B per rank of the launch, as for ``nccl-algo-proto``)."""
    nics = _compute_nics(rails) if isinstance(rails, NodeTopology) else list(rails or ())
    nnodes = int(overrides.get("nnodes", 2))
    nranks = int(overrides.get("nranks", 8 * nnodes))
    ppn = nranks // max(1, nnodes)
    grid: dict[str, tuple[str, ...]] = {"NCCL_PXN_DISABLE": ("0", "1"), "NCCL_CROSS_NIC": ("0", "1")}
    if nics:
        grid["NCCL_IB_HCA"] = (DEFAULT, *(f"={nic}" for nic in nics))
    if ppn > 1 and ppn & (ppn - 1) == 0:
        grid["NCCL_TESTS_SPLIT_MASK"] = (DEFAULT, f"0x{ppn - 1:x}")
    return _make({
        "name": "nccl-pxn-rails", "engine": "nccl-tests", "ops": ("all_reduce", "all_gather"), "min_bytes": 8,
        "max_bytes": GIB, "nnodes": nnodes, "nranks": nranks, "grid": grid, "fixed_env": dict(NCCL_DEBUG_ENV),
    }, overrides)


def _compute_nics(node: NodeTopology) -> list[str]:
    """The rails of a node for NCCL: its compute NICs (an Active port at the node's fastest rate; NICs of unknown
    state count), never a down port or a slower front-end NIC (:mod:`collscope.topo.nic_choice`)."""
    choices = node.nic_choices()
    return [nic for nic in node.nics if not choices[nic].left_out] if choices else list(node.nics)


SIMULATED_RAILS: tuple[str, ...] = ("cl0", "cl1")
"""The rail interfaces of ``scripts/local-cluster.sh`` (2 rails), the default of the CPU rail presets."""


def rail_interfaces(rails: Sequence[str] | NodeTopology | None) -> tuple[str, ...]:
    """The rail interfaces: given by name, or a topology's interface NICs that are up (``topo collect`` on a node
    without RDMA NICs, see :mod:`collscope.topo.netif`), else :data:`SIMULATED_RAILS`."""
    if isinstance(rails, NodeTopology):
        g = rails.graph
        found = tuple(n for n in rails.nics if g.nodes[n].get("ifname")
                      and any(p.get("state") == "Active" for p in g.nodes[n].get("ports") or []))
        if not found:
            raise ConfigError(f"the topology of {rails.host} has no network interface that is up to use as a rail "
                              "(capture it with 'collscope topo collect' on the node, or give the interfaces)")
        return found
    return tuple(rails) if rails else SIMULATED_RAILS


def mpi_rails(*, rails: Sequence[str] | NodeTopology | None = None, **overrides: Any) -> SweepSpec:
    """One rail at a time on a CPU cluster: Open MPI's TCP transport (and its runtime) over one interface per
    point (``OMPI_MCA_btl_tcp_if_include=cl<r>``), next to the default; the twin of ``nccl-pxn-rails``'s
    ``NCCL_IB_HCA``. Interfaces from ``rails`` (names or a topology), else the simulated cluster's cl0, cl1."""
    variants = tuple({"OMPI_MCA_btl_tcp_if_include": nif, "OMPI_MCA_oob_tcp_if_include": nif}
                     for nif in rail_interfaces(rails))
    return _make({
        "name": "mpi-rails", "engine": "mpi", "ops": ("all_reduce",), "min_bytes": 64 * KIB, "max_bytes": 16 * MIB,
        "nnodes": 2, "nranks": 2, "variants": ({}, *variants),
    }, overrides)


def gloo_rails(*, rails: Sequence[str] | NodeTopology | None = None, **overrides: Any) -> SweepSpec:
    """One rail at a time for torch's gloo backend (``GLOO_SOCKET_IFNAME=cl<r>``), next to the default."""
    variants = tuple({"GLOO_SOCKET_IFNAME": nif} for nif in rail_interfaces(rails))
    return _make({
        "name": "gloo-rails", "engine": "torch", "backend": "gloo", "ops": ("all_reduce",), "min_bytes": 64 * KIB,
        "max_bytes": 16 * MIB, "nnodes": 2, "nranks": 2, "variants": ({}, *variants),
    }, overrides)


def nccl_channels(**overrides: Any) -> SweepSpec:
    """A forced channel count: NCCL_MIN_CTAS = NCCL_MAX_CTAS in 4, 8, 16, 32, and the same with the older
    NCCL_MIN/MAX_NCHANNELS (for NCCL before 2.17)."""
    counts = ("4", "8", "16", "32")
    variants = tuple({"NCCL_MIN_CTAS": n, "NCCL_MAX_CTAS": n} for n in counts) + tuple(
        {"NCCL_MIN_NCHANNELS": n, "NCCL_MAX_NCHANNELS": n} for n in counts)
    return _make({
        "name": "nccl-channels", "engine": "nccl-tests", "ops": ("all_reduce", "all_gather"), "min_bytes": 8,
        "max_bytes": GIB, "nranks": 8, "variants": variants, "fixed_env": dict(NCCL_DEBUG_ENV),
    }, overrides)


def demo(**overrides: Any) -> SweepSpec:
    """A tiny, fast Open MPI sweep: all_reduce on 2 ranks, default vs recursive doubling vs ring, 8 B..64 KiB."""
    return _make({
        "name": "demo", "engine": "mpi", "ops": ("all_reduce",), "min_bytes": 8, "max_bytes": 64 * KIB,
        "nranks": 2, "iters": 20, "warmup": 5, "timeout_s": 120.0,
        "grid": {ompi_algorithm_knob("allreduce"): ("3", "4")},
    }, overrides)


PRESETS: dict[str, Callable[..., SweepSpec]] = {
    "mpi-algos": mpi_algos,
    "nccl-algo-proto": nccl_algo_proto,
    "nccl-pxn-rails": nccl_pxn_rails,
    "nccl-channels": nccl_channels,
    "mpi-rails": mpi_rails,
    "gloo-rails": gloo_rails,
    "demo": demo,
}
"""Preset name -> function returning its SweepSpec (keyword overrides replace fields)."""


def preset(name: str, **overrides: Any) -> SweepSpec:
    """The SweepSpec of preset ``name`` with ``overrides`` applied; ConfigError lists the presets if unknown."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    return PRESETS[name](**overrides)
