"""Accumulate facts from NCCL debug lines in log order; ``LogBuilder.finish()`` resolves them.

Messages are recognised by their start (``comm 0x.. rank 6 nRanks 16 ...``, ``NCCL_X set by environment
to V``, ``Connected all rings, use ring PXN 0 GDR 1``, ...). Several ranks and several communicators may
print the same fact; the first value wins and a disagreement becomes a warning. ``finish(source)``
returns the typed :class:`~collscope.collectives.nccl_log.records.NcclLog`.
"""

from __future__ import annotations

import re
from collections import Counter

from collscope.collectives.nccl_log.choices import ChoiceKey, channel_warnings, rank_nics, size_choices
from collscope.collectives.nccl_log.lines import LogLine
from collscope.collectives.nccl_log.messages import (
    Connection,
    RingOrder,
    TreeLink,
    parse_connection,
    parse_env_message,
    parse_ib_devices,
    parse_ring_order,
    parse_socket_devices,
    parse_tree_graph,
    parse_trees,
)
from collscope.collectives.nccl_log.records import NcclLog, NetInfo
from collscope.collectives.nccl_log.tuning import TuningCollector, parse_algo_choice

__all__ = ["LogBuilder"]

_N = r"\d{1,9}"
_VERSION = re.compile(r"\bNCCL version (\d+\.\d+\.\d+[^\s,;]*)")
_GEOMETRY = re.compile(rf"^\s*comm (\S+) rank ({_N}) nRanks ({_N}) nNodes ({_N}) localRanks ({_N}) localRank ({_N})")
_INIT = re.compile(rf"\bcomm (0x[0-9a-fA-F]+) rank ({_N}) nranks ({_N})\b")
_NRANKS_ONLY = re.compile(rf"^\s*nranks ({_N})\s*$")  # NCCL 2.3 ncclCommInitAll
_OPCOUNT = re.compile(rf"^\s*([A-Za-z]+): opCount [0-9a-fA-F]+ sendbuff .*?\[nranks=({_N})\]")
_CONNECTED_RINGS = re.compile(rf"^\s*Connected all rings(?:, use ring PXN ({_N}) GDR ({_N}))?")
_NVLS_SUPPORT = re.compile(r"^\s*NVLS multicast support is (not )?available")
_NVLS_ACTIVE = re.compile(r"^\s*(?:NVLS (?:Head|comm|Trees|tuning|Creat|Bind|Mapped|group)|Connected NVLS)")
_COLLNET_ON = re.compile(r"^\s*(?:rank \d+ Connected CollNet|Connected [Cc]ollnet|Collnet Chains|Using CollNet)")
_COLLNET_OFF = re.compile(r"disabling CollNet|CollNet (?:is )?disabled")
_CHANNEL_COUNTS = re.compile(
    rf"^\s*({_N}) coll channels, (?:({_N}) collnet channels, )?(?:({_N}) nvls channels, )?({_N}) p2p channels, "
    rf"({_N}) p2p channels per peer"
)
_RING_NEIGHBOURS = re.compile(rf"^\s*Ring ({_N}) : (-?{_N}) -> ({_N}) -> (-?{_N})\s*$")
_USING_NETWORK = re.compile(r"^\s*Using network (.+?)\s*$")
_PLUGIN = re.compile(r"^\s*NET/Plugin ?: Loaded (net|collnet) plugin (.+?)\s*$")
_OFI_PROVIDER = re.compile(r"^\s*NET/OFI Selected [Pp]rovider is (\S+)")
_GDR_HCA = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA \d+ '([^']+)'")
_TESTS_RANK = re.compile(rf"^#?\s*Rank\s+({_N})\s+(?:Group\s+{_N}\s+)?Pid\s+{_N}\s+on\s+(\S+)\s+device\s+{_N}")
_MAX_WARNINGS = 20


class LogBuilder:
    """Mutable accumulator; one per parse."""

    def __init__(self) -> None:
        self.nccl_lines = 0
        self.versions: list[str] = []
        self.hosts: set[str] = set()
        self.rank_hosts: dict[str, set[int]] = {}
        self.tests_ranks: set[int] = set()
        self.nranks: list[int] = []
        self.nnodes: list[int] = []
        self.local_ranks: list[int] = []
        self.channel_counts: dict[str, int] | None = None
        self.ring_totals: list[int] = []
        self.rings: dict[tuple[int, tuple[int, ...]], RingOrder] = {}
        self.neighbours: dict[tuple[int, int, int, int], None] = {}
        self.trees: dict[tuple[int, int, int | None, tuple[int, ...]], TreeLink] = {}
        self.connections: list[Connection] = []
        self.pxn_gdr: list[tuple[int, int]] = []
        self.nvls: set[str] = set()
        self.collnet: set[str] = set()
        self.env: dict[str, str] = {}
        self.env_conflicts: dict[str, set[str]] = {}
        self.tuning = TuningCollector()
        self.choices: Counter[tuple[str | None, str, str]] = Counter()
        self.traced: Counter[tuple[str | None, str, str]] = Counter()
        self.size_lines: Counter[ChoiceKey] = Counter()
        """Per-size choice lines (``AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}``)."""
        self.size_times: dict[ChoiceKey, float] = {}
        self.connection_hosts: list[str | None] = []
        """The host that printed each of ``connections`` (same order)."""
        self.ib_by_host: dict[str, tuple[str, ...]] = {}
        self.calls: Counter[str] = Counter()
        # network facts, first value wins (None: not seen yet)
        self.ib: tuple[tuple[str, ...], bool, str | None] | None = None
        """(devices, relaxed ordering, OOB) from the first ``NET/IB : Using ...`` line."""
        self.ib_hca_env: str | None = None
        self.socket_devices: tuple[str, ...] | None = None
        self.network: str | None = None
        self.ofi_provider: str | None = None
        self.plugins: dict[str, str] = {}
        """``net`` / ``collnet`` -> plugin name."""
        self.gdr_hcas: dict[str, bool] = {}
        self.nccl_warnings: dict[str, None] = {}

    # --- feeding -------------------------------------------------------------------------------------

    def feed(self, line: LogLine) -> None:
        if line.level is not None and line.host is not None:
            self.hosts.add(line.host)
        tests_rank = _TESTS_RANK.match(line.message)
        if tests_rank:
            self.hosts.add(tests_rank.group(2))
            self.rank_hosts.setdefault(tests_rank.group(2), set()).add(int(tests_rank.group(1)))
            self.tests_ranks.add(int(tests_rank.group(1)))
            return
        if line.level in ("WARN", "ERROR", "ABORT"):
            self.nccl_warnings.setdefault(f"NCCL WARN {line.message.strip()}", None)
        recognised = self._message(line)
        if line.level is not None or recognised:
            self.nccl_lines += 1

    def _message(self, line: LogLine) -> bool:
        msg = line.message
        if self.tuning.feed(line.stream, msg):
            return True
        conn = parse_connection(msg, line.lineno)
        if conn is not None:
            self.connections.append(conn)
            self.connection_hosts.append(line.host)
            return True
        ring = parse_ring_order(msg)
        if ring is not None:
            order, total = ring
            self.rings.setdefault((order.channel, order.ranks), order)
            if total is not None:
                self.ring_totals.append(total)
            return True
        links = parse_trees(msg)
        if links is None:
            graph = parse_tree_graph(msg)
            links = [graph] if graph is not None else None
        if links is not None:
            for link in links:
                self.trees.setdefault((link.rank, link.channel, link.parent, link.children), link)
            return True
        return self._init_message(line) or self._net_message(msg, line.host) or self._feature_message(line)

    def _init_message(self, line: LogLine) -> bool:
        msg = line.message
        m = _VERSION.search(msg)
        if m:
            if m.group(1) not in self.versions:
                self.versions.append(m.group(1))
            return True
        m = _GEOMETRY.match(msg)
        if m:
            self.nranks.append(int(m.group(3)))
            self.nnodes.append(int(m.group(4)))
            self.local_ranks.append(int(m.group(5)))
            self._rank_on_host(line, int(m.group(2)))
            return True
        m = _INIT.search(msg)
        if m:
            self.nranks.append(int(m.group(3)))
            self._rank_on_host(line, int(m.group(2)))
            return True
        m = _NRANKS_ONLY.match(msg)
        if m:
            self.nranks.append(int(m.group(1)))
            return True
        m = _OPCOUNT.match(msg)
        if m:
            self.calls[m.group(1)] += 1
            self.nranks.append(int(m.group(2)))
            return True
        env = parse_env_message(msg)
        if env is not None:
            name, value = env
            old = self.env.setdefault(name, value)
            if old != value:
                self.env_conflicts.setdefault(name, {old}).add(value)
            if name == "NCCL_IB_HCA" and self.ib_hca_env is None:
                self.ib_hca_env = value
            return True
        choice = parse_algo_choice(msg)
        if choice is not None:
            counter = self.traced if choice.kind == "trace" or line.level == "TRACE" else self.choices
            counter[(choice.op, choice.algorithm, choice.protocol)] += 1
            if choice.size_bytes is not None:
                key = (choice.op, choice.size_bytes, choice.algorithm, choice.protocol, choice.channel_lo,
                       choice.channel_hi)
                self.size_lines[key] += 1
                if choice.time_us is not None:
                    self.size_times.setdefault(key, choice.time_us)
            return True
        return False

    def _rank_on_host(self, line: LogLine, rank: int) -> None:
        if line.host is not None:
            self.rank_hosts.setdefault(line.host, set()).add(rank)

    def _net_message(self, msg: str, host: str | None) -> bool:
        ib = parse_ib_devices(msg)
        if ib is not None:
            devices, relaxed, oob = ib
            if self.ib is None:
                self.ib = (tuple(devices), relaxed, oob)
            if host is not None:
                self.ib_by_host.setdefault(host, tuple(devices))
            return True
        sockets = parse_socket_devices(msg)
        if sockets is not None:
            if self.socket_devices is None:
                self.socket_devices = tuple(sockets)
            return True
        m = _USING_NETWORK.match(msg)
        if m:
            self.network = self.network if self.network is not None else m.group(1)
            return True
        m = _OFI_PROVIDER.match(msg)
        if m:
            self.ofi_provider = self.ofi_provider if self.ofi_provider is not None else m.group(1)
            return True
        m = _PLUGIN.match(msg)
        if m:
            self.plugins.setdefault(m.group(1), m.group(2))
            return True
        m = _GDR_HCA.search(msg)
        if m:
            self.gdr_hcas.setdefault(m.group(2), m.group(1) == "Enabled")
            return True
        return False

    def _feature_message(self, line: LogLine) -> bool:
        msg = line.message
        m = _CONNECTED_RINGS.match(msg)
        if m:
            if m.group(1) is not None:
                self.pxn_gdr.append((int(m.group(1)), int(m.group(2))))
            return True
        m = _NVLS_SUPPORT.match(msg)
        if m:
            self.nvls.add("not available" if m.group(1) else "available")
            return True
        if _NVLS_ACTIVE.match(msg):
            self.nvls.add("active")
            return True
        if _COLLNET_ON.match(msg):
            self.collnet.add("on")
            return True
        if _COLLNET_OFF.search(msg):
            self.collnet.add("off")
            return True
        m = _CHANNEL_COUNTS.match(msg)
        if m:
            if self.channel_counts is None:
                coll, collnet, nvls, p2p, per_peer = m.groups()
                counts = {"coll": coll, "collnet": collnet, "nvls": nvls, "p2p": p2p, "p2p_per_peer": per_peer}
                self.channel_counts = {k: int(v) for k, v in counts.items() if v is not None}
            return True
        m = _RING_NEIGHBOURS.match(msg)
        if m:
            channel, prev, rank, nxt = (int(g) for g in m.groups())
            self.neighbours.setdefault((channel, prev, rank, nxt), None)
            return True
        return False

    # --- resolving -----------------------------------------------------------------------------------

    def finish(self, source: str = "<text>") -> NcclLog:
        """The facts fed so far, resolved (largest communicator, first value, inferred fields) into a record."""
        warnings: list[str] = []
        inferred: list[str] = []
        if len(self.versions) > 1:
            warnings.append(f"several NCCL versions in one log: {', '.join(self.versions)}")
        nranks = self._largest(self.nranks, "nranks", warnings)
        if nranks is None and (self.rings or self.tests_ranks):
            # rank 0 prints whole rings; nccl-tests lists every rank under "Using devices"
            nranks = max([len(ring.ranks) for ring in self.rings.values()] + [len(self.tests_ranks)])
            inferred.append("nranks")
        nnodes = self._largest(self.nnodes, "nnodes", warnings)
        local_ranks = self._largest(self.local_ranks, "localRanks", warnings)
        known = set().union(*self.rank_hosts.values()) if self.rank_hosts else set()
        if nnodes is None and self.hosts and (len(self.hosts) > 1 or (nranks is not None and len(known) >= nranks)):
            nnodes = len(self.hosts)
            inferred.append("nnodes")
        if local_ranks is None and self.rank_hosts and (nnodes == len(self.rank_hosts) or len(known) > 1):
            local_ranks = max(len(ranks) for ranks in self.rank_hosts.values())
            inferred.append("local_ranks")
        for name, values in sorted(self.env_conflicts.items()):
            warnings.append(f"{name} differs between ranks: {', '.join(sorted(values))} (showing the first)")
        if self.tuning.conflicts:
            warnings.append("several TUNING tables with different values (several communicators?); "
                            "showing the first value of each cell")
        channels = self._channels()
        tuning = self.tuning.table()
        ranks = rank_nics(zip(self.connections, self.connection_hosts, strict=True), self.ib_by_host,
                          self.ib[0] if self.ib is not None else ())
        warnings += channel_warnings(nnodes=nnodes, local_ranks=local_ranks, channels=channels, ranks=ranks,
                                     devices_by_host=self.ib_by_host, env=self.env)
        notes = list(self.nccl_warnings)
        if len(notes) > _MAX_WARNINGS:
            notes = notes[:_MAX_WARNINGS] + [f"... and {len(notes) - _MAX_WARNINGS} more NCCL warnings"]
        return NcclLog(
            source=source,
            nccl_version=self.versions[0] if self.versions else None,
            hosts=tuple(sorted(self.hosts)),
            nranks=nranks,
            nnodes=nnodes,
            local_ranks=local_ranks,
            channels=channels,
            channel_counts=self.channel_counts,
            rings=tuple(sorted(self.rings.values(), key=lambda r: r.channel)),
            ring_neighbours=tuple(self.neighbours),
            trees=tuple(sorted(self.trees.values(), key=lambda t: (t.rank, t.channel))),
            connections=tuple(self.connections),
            gdr=self._gdr(),
            pxn=self._pxn(),
            nvls=self._nvls(),
            collnet=self._collnet(),
            env=dict(self.env),
            tuning=tuning,
            algo_proto_calls=dict(self.choices or self.traced),
            size_choices=size_choices(self.size_lines, self.size_times, tuning, nranks),
            rank_nics=ranks,
            calls_logged=dict(self.calls),
            net=self._net(),
            inferred=tuple(inferred),
            warnings=tuple(warnings + notes),
            nccl_lines=self.nccl_lines,
        )

    def _net(self) -> NetInfo:
        devices, relaxed, oob = self.ib if self.ib is not None else ((), None, None)
        return NetInfo(network=self.network, ib_devices=devices, ib_hca_env=self.ib_hca_env,
                       relaxed_ordering=relaxed, oob=oob, socket_devices=self.socket_devices or (),
                       net_plugin=self.plugins.get("net"), collnet_plugin=self.plugins.get("collnet"),
                       ofi_provider=self.ofi_provider, gdr_hcas=dict(self.gdr_hcas))

    @staticmethod
    def _largest(values: list[int], name: str, warnings: list[str]) -> int | None:
        if not values:
            return None
        distinct = sorted(set(values))
        if len(distinct) > 1:
            warnings.append(f"several communicators: {name} {', '.join(map(str, distinct))} (showing the largest)")
        return distinct[-1]

    def _channels(self) -> int | None:
        if self.channel_counts is not None and "coll" in self.channel_counts:
            return self.channel_counts["coll"]
        if self.ring_totals:
            return max(self.ring_totals)
        if self.rings:
            return len({channel for channel, _ in self.rings})
        per_rank: Counter[int] = Counter(link.rank for link in self.trees.values())
        return max(per_rank.values()) if per_rank else None

    def _gdr(self) -> bool | None:
        if self.pxn_gdr:
            return any(gdr for _, gdr in self.pxn_gdr)
        net = [c for c in self.connections if c.transport.startswith(("NET/", "COLLNET/"))]
        return any(c.gdr for c in net) if net else None

    def _pxn(self) -> int | None:
        if self.pxn_gdr:
            return max(pxn for pxn, _ in self.pxn_gdr)
        if any(c.proxy_rank is not None for c in self.connections):
            return 1
        return None

    def _nvls(self) -> bool | None:
        if self.nvls & {"available", "active"}:
            return True
        if self.channel_counts is not None and self.channel_counts.get("nvls", 0) > 0:
            return True
        if self.nvls or (self.channel_counts is not None and "nvls" in self.channel_counts):
            return False
        return None

    def _collnet(self) -> bool | None:
        if "on" in self.collnet or any(c.transport.startswith("COLLNET/") for c in self.connections):
            return True
        if "off" in self.collnet or self.env.get("NCCL_COLLNET_ENABLE") == "0":
            return False
        return None
