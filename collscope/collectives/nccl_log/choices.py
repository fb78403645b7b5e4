"""What NCCL chose per operation size, which NIC each rank's traffic used, and the channel-count checks.

* Per size: NCCL >= 2.21 logs one ``AllReduce: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..1}``
  line per call (2.21-2.23: ``... Algo 1 proto 2 time 12.5``), with ``NCCL_DEBUG_SUBSYS`` including TUNING
  (``shared/reference/nccl-facts.md``). :func:`size_choices` folds them into one :class:`SizeChoice` per
  (function, size, algorithm, protocol, channels), with NCCL's predicted time from the logged time or the
  TUNING table.
* Per rank: network connection lines ``Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0(0)/GDRDMA`` name the
  NIC index (into that host's ``NET/IB : Using [0]mlx5_0:1/IB ...`` list) and, with PXN, the proxy rank whose
  NIC carries the traffic. :func:`rank_nics` maps every rank to the NICs (rails) its channels use.
* :func:`channel_warnings`: too few channels for the GPUs of a node, NICs listed but never used.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from collscope.collectives.nccl_log.messages import Connection
from collscope.collectives.nccl_log.tuning import TuningTable
from collscope.vocab.channel_limits import channel_limits_set
from collscope.vocab.ops import OP_BY_NCCL_FUNC, op_facts

__all__ = ["SizeChoice", "RankNic", "ChoiceKey", "size_choices", "rank_nics", "channel_warnings"]

ChoiceKey = tuple[str | None, int, str, str, int | None, int | None]
"""(function, size_bytes, algorithm, protocol, first channel, last channel) of one choice line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SizeChoice:
    """NCCL's choice for one operation size, as its TUNING lines say."""

    op: str | None
    """NCCL's function name (``AllReduce``); ``None`` where the lines do not name it (2.21-2.22)."""
    size_bytes: int
    """The operation's size as NCCL logs it: NCCL >= 2.24 (``channel{Lo..Hi}`` lines) prints its count argument
    in bytes (``task->count * ncclTypeSize``, src/enqueue.cc), which for AllGather and ReduceScatter is one rank's
    share; 2.21-2.23 print ``nBytes``, for those two functions the count x nRanks (2.21 src/include/info.h
    ``nBytes *= nRanks``; 2.23 src/enqueue.cc ``ncclFuncMaxSendRecvCount``). :meth:`op_size_bytes` gives the
    size as collscope's records count it."""
    algorithm: str
    protocol: str
    channels: int | None
    """Channels the operation ran on (``channel{Lo..Hi}``: Hi - Lo + 1); ``None`` before 2.24."""
    calls: int
    """Lines with this choice (every rank prints one per call)."""
    nccl_time_us: float | None
    """NCCL's own predicted time: the logged ``time`` (2.21-2.23), else latency + size/bandwidth of the
    logged TUNING table for this algorithm and protocol; ``None`` when neither is in the log."""

    @property
    def counts_one_rank(self) -> bool:
        """The logged size of AllGather/ReduceScatter is one rank's share (the NCCL >= 2.24 line, the one that
        names channels); else it is the total."""
        return self.channels is not None

    def op_size_bytes(self, nranks: int | None) -> int | None:
        """The size as nccl-tests and collscope's records count it: the total over ranks for the ops whose size
        is the total (:data:`collscope.vocab.ops.OP_TABLE` ``size_is_total``); None when the logged size is one
        rank's share and ``nranks`` is unknown."""
        op = OP_BY_NCCL_FUNC.get(self.op or "")
        if op is None or not op_facts(op).size_is_total or not self.counts_one_rank:
            return self.size_bytes
        return None if nranks is None else self.size_bytes * nranks

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "size_bytes": self.size_bytes, "algorithm": self.algorithm,
                "protocol": self.protocol, "channels": self.channels, "calls": self.calls,
                "nccl_time_us": self.nccl_time_us}


@dataclass(frozen=True, slots=True, kw_only=True)
class RankNic:
    """The network devices one rank's channels use (from its own connection lines)."""

    rank: int
    host: str | None
    nics: tuple[str, ...]
    """NIC names (``mlx5_0``) in first-use order; ``NET/<n>`` when the host's device list was not logged."""
    channels: tuple[tuple[int, str], ...]
    """(channel, NIC) for every network connection of this rank, sorted by channel."""
    via_proxy: tuple[int, ...] = ()
    """Ranks whose NIC carried this rank's traffic (PXN), sorted."""

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "nics": list(self.nics),
                "channels": [{"channel": c, "nic": n} for c, n in self.channels], "via_proxy": list(self.via_proxy)}


def size_choices(lines: Mapping[ChoiceKey, int], times: Mapping[ChoiceKey, float],
                 table: TuningTable | None, nranks: int | None = None) -> tuple[SizeChoice, ...]:
    """One SizeChoice per distinct choice line, sorted by function then size. NCCL's time from the TUNING table
    is for the total bytes (``nBytes``), so a one-rank size is scaled by ``nranks`` first (unknown: no time)."""
    out = []
    for key, calls in lines.items():
        op, size, algo, proto, lo, hi = key
        choice = SizeChoice(op=op, size_bytes=size, algorithm=algo, protocol=proto,
                            channels=None if lo is None or hi is None else hi - lo + 1, calls=calls,
                            nccl_time_us=times.get(key))
        total = choice.op_size_bytes(nranks)
        if choice.nccl_time_us is None and table is not None and op is not None and total is not None:
            choice = replace(choice, nccl_time_us=table.predicted_time_us(op, algo, proto, total))
        out.append(choice)
    return tuple(sorted(out, key=lambda c: (c.op or "", c.size_bytes, -c.calls)))


def _local_rank(conn: Connection) -> int | None:
    """The rank that printed a network connection line: the sender of [send], the receiver of [receive]."""
    if conn.direction == "receive":
        return conn.dst_rank
    return conn.src_rank


def rank_nics(connections: Iterable[tuple[Connection, str | None]],
              devices_by_host: Mapping[str, Sequence[str]], devices: Sequence[str]) -> tuple[RankNic, ...]:
    """Every rank's NICs, from its network connection lines (each with the host that printed it).

    ``devices_by_host``: the ``NET/IB : Using`` list of each host (``mlx5_0:1``); ``devices``: the first
    list seen, for lines without a host prefix.
    """
    per_rank: dict[int, dict[tuple[int, str], None]] = {}
    hosts: dict[int, str | None] = {}
    proxies: dict[int, set[int]] = {}
    for conn, host in connections:
        if conn.net_device is None:
            continue
        rank = _local_rank(conn)
        if rank is None:
            continue
        listed = devices_by_host.get(host, devices) if host is not None else devices
        nic = listed[conn.net_device].split(":", 1)[0] if conn.net_device < len(listed) else f"NET/{conn.net_device}"
        per_rank.setdefault(rank, {})[(conn.channel, nic)] = None
        hosts.setdefault(rank, host)
        if conn.proxy_rank is not None and conn.proxy_rank != rank:
            proxies.setdefault(rank, set()).add(conn.proxy_rank)
    out = []
    for rank in sorted(per_rank):
        pairs = sorted(per_rank[rank])
        nics = tuple(dict.fromkeys(nic for _, nic in per_rank[rank]))
        out.append(RankNic(rank=rank, host=hosts.get(rank), nics=nics, channels=tuple(pairs),
                           via_proxy=tuple(sorted(proxies.get(rank, ())))))
    return tuple(out)


def channel_warnings(*, nnodes: int | None, local_ranks: int | None, channels: int | None,
                     ranks: Sequence[RankNic], devices_by_host: Mapping[str, Sequence[str]],
                     env: Mapping[str, str]) -> list[str]:
    """What an expert would flag about the channel count and the NICs that carry traffic."""
    warnings = []
    if nnodes is not None and nnodes > 1 and local_ranks and channels is not None and channels < local_ranks:
        forced = channel_limits_set(env)
        why = (f"{', '.join(forced)} is set and limits them" if forced else
               "check NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (NCCL_MIN_CTAS / NCCL_MAX_CTAS), and whether NCCL "
               "saw fewer NICs or a degraded topology")
        warnings.append(
            f"{channels} collective channel{'s' if channels != 1 else ''} for {local_ranks} GPUs per node on "
            f"{nnodes} nodes: each channel crosses the network through one NIC per node, so at most {channels} "
            f"NIC{'s' if channels != 1 else ''} per node carry inter-node traffic (NCCL usually opens at least "
            f"one channel per GPU on such nodes); {why}")
    used: dict[str, Counter[str]] = {}
    for rank in ranks:
        if rank.host is not None:
            used.setdefault(rank.host, Counter()).update(rank.nics)
    for host, listed in sorted(devices_by_host.items()):
        if host not in used:
            continue
        names = [d.split(":", 1)[0] for d in listed]
        idle = [n for n in names if n not in used[host]]
        if idle and len(names) > 1:
            warnings.append(f"{host}: NCCL listed {len(names)} NICs but no rank's network connection uses "
                            f"{', '.join(idle)} (traffic on {len(names) - len(idle)} of {len(names)} rails)")
    return warnings
