"""The facts of one NCCL debug log, as :func:`collscope.collectives.nccl_log.parse.parse_nccl_log` returns them.

``LogBuilder.finish()`` builds an :class:`NcclLog` (with its :class:`NetInfo`) from what it accumulated;
the records hold no parsing logic, so the parser, the builder, the forced-setting checks
(``nccl_log.effects``) and the summary (``nccl_log.render``) all import them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collscope.collectives.nccl_log.choices import RankNic, SizeChoice
from collscope.collectives.nccl_log.messages import Connection, RingOrder, TreeLink
from collscope.collectives.nccl_log.tuning import TuningTable

__all__ = ["NcclLog", "NetInfo"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NetInfo:
    """The network NCCL chose and the devices it listed."""

    network: str | None = None
    """``Using network IB`` -> ``IB`` (also ``Socket``, ``IBext_v8``, ``AWS Libfabric``)."""
    ib_devices: tuple[str, ...] = ()
    """``name:port`` in NCCL's order, from ``NET/IB : Using [0]mlx5_0:1/IB ...``."""
    ib_hca_env: str | None = None
    """``NCCL_IB_HCA`` as NCCL echoed it."""
    relaxed_ordering: bool | None = None
    oob: str | None = None
    socket_devices: tuple[str, ...] = ()
    net_plugin: str | None = None
    collnet_plugin: str | None = None
    ofi_provider: str | None = None
    gdr_hcas: dict[str, bool] = field(default_factory=dict)
    """HCA name -> GPU Direct RDMA enabled, from ``NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'``."""

    def to_json(self) -> dict[str, Any]:
        return {"network": self.network, "ib_devices": list(self.ib_devices), "ib_hca_env": self.ib_hca_env,
                "relaxed_ordering": self.relaxed_ordering, "oob": self.oob,
                "socket_devices": list(self.socket_devices), "net_plugin": self.net_plugin,
                "collnet_plugin": self.collnet_plugin, "ofi_provider": self.ofi_provider,
                "gdr_hcas": dict(self.gdr_hcas)}


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclLog:
    """Facts from one NCCL debug log. ``None`` means the log did not say."""

    source: str = "<text>"
    nccl_version: str | None = None
    """As printed: ``2.18.5+cuda12.2``."""
    hosts: tuple[str, ...] = ()
    """Host names from the line prefixes (and nccl-tests' device list), sorted."""
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    channels: int | None = None
    """Collective channels (``N coll channels``, else ``Channel 00/NN``, else the ring or tree lines)."""
    channel_counts: dict[str, int] | None = None
    """``coll``, ``collnet``, ``nvls``, ``p2p``, ``p2p_per_peer`` from ``N coll channels, ...`` (2.12+)."""
    rings: tuple[RingOrder, ...] = ()
    ring_neighbours: tuple[tuple[int, int, int, int], ...] = ()
    """(channel, prev, rank, next) from GRAPH ``Ring 02 : 2 -> 0 -> 1`` lines."""
    trees: tuple[TreeLink, ...] = ()
    connections: tuple[Connection, ...] = ()
    gdr: bool | None = None
    pxn: int | None = None
    nvls: bool | None = None
    """NVLS multicast available (or set up); ``False`` when every rank said it is not available."""
    collnet: bool | None = None
    env: dict[str, str] = field(default_factory=dict)
    """``NCCL_X set by environment to V`` (and ``NCCL_IB_HCA set to V``) echoes; the first value wins."""
    tuning: TuningTable | None = None
    algo_proto_calls: dict[tuple[str | None, str, str], int] = field(default_factory=dict)
    """(function, algorithm, protocol) -> number of choice lines; the function is ``None`` where unnamed."""
    size_choices: tuple[SizeChoice, ...] = ()
    """What NCCL chose per operation size (TUNING lines), with NCCL's predicted time."""
    rank_nics: tuple[RankNic, ...] = ()
    """Which NICs (rails) each rank's network connections use."""
    calls_logged: dict[str, int] = field(default_factory=dict)
    """Function -> number of ``AllReduce: opCount ...`` lines (every rank prints one per call)."""
    net: NetInfo = field(default_factory=NetInfo)
    inferred: tuple[str, ...] = ()
    """Names of fields that were derived rather than printed by NCCL (``nnodes``, ``local_ranks``, ``nranks``)."""
    warnings: tuple[str, ...] = ()
    nccl_lines: int = 0
    """Lines recognised as NCCL output."""

    @property
    def transports(self) -> dict[str, int]:
        """Connection lines per transport class (both ends print a network connection)."""
        counts: dict[str, int] = {}
        for conn in self.connections:
            counts[conn.transport] = counts.get(conn.transport, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def to_json(self) -> dict[str, Any]:
        """The ``nccl-log --json`` document of DESIGN.md, plus a few extra keys."""
        return {
            "nccl_version": self.nccl_version,
            "hosts": list(self.hosts),
            "nranks": self.nranks,
            "nnodes": self.nnodes,
            "local_ranks": self.local_ranks,
            "channels": self.channels,
            "rings": [r.to_json() for r in self.rings],
            "trees": [t.to_json() for t in self.trees],
            "transports": self.transports,
            "gdr": self.gdr,
            "pxn": self.pxn,
            "nvls": self.nvls,
            "collnet": self.collnet,
            "env": dict(self.env),
            "tuning": self.tuning.to_json() if self.tuning is not None else None,
            "warnings": list(self.warnings),
            "source": self.source,
            "channel_counts": dict(self.channel_counts) if self.channel_counts is not None else None,
            "ring_neighbours": [{"channel": c, "prev": p, "rank": r, "next": n}
                                for c, p, r, n in self.ring_neighbours],
            "net_connections": {
                "total": sum(1 for c in self.connections if c.transport.startswith(("NET/", "COLLNET/"))),
                "gdr": sum(1 for c in self.connections if c.gdr),
                "via_proxy": sum(1 for c in self.connections if c.proxy_rank is not None),
            },
            "algo_proto_calls": [{"op": op, "algo": algo, "proto": proto, "calls": n}
                                 for (op, algo, proto), n in self.algo_proto_calls.items()],
            "choices": [c.to_json() for c in self.size_choices],
            "rank_nics": [r.to_json() for r in self.rank_nics],
            "calls_logged": dict(self.calls_logged),
            "net": self.net.to_json(),
            "inferred": list(self.inferred),
        }
