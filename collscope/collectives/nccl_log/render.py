"""A readable summary of a parsed NCCL debug log (what ``collscope nccl-log FILE`` prints)."""

from __future__ import annotations

from collscope.collectives.nccl_log.effects import forced_setting_effects
from collscope.collectives.nccl_log.records import NcclLog
from collscope.units import format_size

__all__ = ["nccl_log_summary_text"]

_MAX_RING_RANKS = 24


def _flag(value: bool | None, yes: str = "yes", no: str = "no") -> str:
    return "?" if value is None else (yes if value else no)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _geometry(log: NcclLog) -> str:
    parts = [f"{log.nranks if log.nranks is not None else '?'} ranks"]
    parts.append(f"on {log.nnodes} node{'s' if log.nnodes != 1 else ''}" if log.nnodes is not None
                 else "on ? nodes (no nNodes line, and its host names do not tell)")
    if log.local_ranks is not None:
        parts.append(f"{log.local_ranks} per node")
    text = " ".join(parts[:2]) + (f", {parts[2]}" if len(parts) > 2 else "")
    if log.inferred:
        text += f"  (inferred: {', '.join(log.inferred)})"
    return text


def _channels(log: NcclLog) -> str:
    text = "?" if log.channels is None else str(log.channels)
    if log.channel_counts:
        text += " (" + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in log.channel_counts.items()) + ")"
    return text


def _rings(log: NcclLog) -> list[str]:
    lines = []
    for ring in log.rings:
        ranks = " ".join(map(str, ring.ranks[:_MAX_RING_RANKS]))
        more = " ..." if len(ring.ranks) > _MAX_RING_RANKS else ""
        lines.append(f"  {'ring ' + str(ring.channel):<15}{ranks}{more}")
    return lines


def _transports(log: NcclLog) -> str:
    if not log.transports:
        return "none seen"
    gdr = sum(1 for c in log.connections if c.gdr)
    proxied = sum(1 for c in log.connections if c.proxy_rank is not None)
    text = ", ".join(f"{name} {n}" for name, n in log.transports.items())
    extra = [f"{gdr} GDRDMA"] if gdr else []
    extra += [f"{proxied} via a PXN proxy rank"] if proxied else []
    return text + (f" ({', '.join(extra)})" if extra else "")


def _network(log: NcclLog) -> str | None:
    net = log.net
    if net.network is None and not net.ib_devices and not net.socket_devices:
        return None
    devices = list(net.ib_devices) or list(net.socket_devices)
    text = net.network or "?"
    if devices:
        text += ": " + ", ".join(devices)
    if net.ib_hca_env:
        text += f"  (NCCL_IB_HCA={net.ib_hca_env})"
    if net.ofi_provider:
        text += f"  (OFI provider {net.ofi_provider})"
    return text


def _tuning(log: NcclLog) -> list[str]:
    table = log.tuning
    if table is None:
        return []
    algorithms = list(dict.fromkeys(a for a, _ in table.columns))
    lines = [f"  tuning         {table.layout} table: {', '.join(algorithms)}"]
    for func, row in table.cells.items():
        best = max(row.items(), key=lambda kv: kv[1][1], default=None)
        if best is None or best[1][1] <= 0:
            lines.append(f"    {func:<13} every cell disabled (bandwidth 0)")
            continue
        (algo, proto), (lat, bw) = best
        lines.append(f"    {func:<13} highest algbw {bw:g} GB/s with {algo}/{proto} (latency {lat:g} us)")
    return lines


def _calls(log: NcclLog) -> list[str]:
    if not log.algo_proto_calls:
        return []
    items = sorted(log.algo_proto_calls.items(), key=lambda kv: (-kv[1], str(kv[0])))
    text = ", ".join(f"{op or '?'} {algo}/{proto} x{n}" for (op, algo, proto), n in items)
    return [f"  algo/proto     {text}"]


def _size_choices(log: NcclLog) -> list[str]:
    if not log.size_choices:
        return []
    lines = ["  per size       NCCL's choice (TUNING lines); time: NCCL's own prediction"]
    for c in log.size_choices:
        channels = "?" if c.channels is None else str(c.channels)
        time = "?" if c.nccl_time_us is None else f"{c.nccl_time_us:.1f} us"
        total = c.op_size_bytes(log.nranks)
        share = "" if total == c.size_bytes else (
            f"  (one rank's share of {format_size(total)})" if total is not None else "  (one rank's share)")
        lines.append(f"    {c.op or '?':<13} {format_size(c.size_bytes):>9}  {c.algorithm + '/' + c.protocol:<16} "
                     f"{channels:>3} ch  {time:>12}  x{c.calls}{share}")
    return lines


def _rails(log: NcclLog) -> list[str]:
    if not log.rank_nics:
        return []
    lines = ["  rails          NIC -> ranks (channels) from the network connection lines"]
    per_host: dict[str, dict[str, dict[int, set[int]]]] = {}
    for rank in log.rank_nics:
        for channel, nic in rank.channels:
            per_host.setdefault(rank.host or "?", {}).setdefault(nic, {}).setdefault(rank.rank, set()).add(channel)
    for host, nics in sorted(per_host.items()):
        for nic, ranks in sorted(nics.items()):
            shown = ", ".join(f"{r} (ch {','.join(map(str, sorted(ch)))})" for r, ch in sorted(ranks.items()))
            lines.append(f"    {host:<13} {nic:<10} ranks {shown}")
    proxied = [r for r in log.rank_nics if r.via_proxy]
    if proxied:
        lines.append("    PXN: " + "; ".join(f"rank {r.rank} via rank {','.join(map(str, r.via_proxy))}"
                                           for r in proxied))
    return lines


def _effects(log: NcclLog) -> list[str]:
    lines = []
    for var, effect in forced_setting_effects(log).items():
        verdict = {True: "took effect", False: "DID NOT take effect", None: "no evidence in the log"}
        used = effect["used"]
        shown = ", ".join(map(str, used)) if isinstance(used, list) else ("" if used is None else str(used))
        lines.append(f"    {var}={effect['forced']}: {verdict[effect['applied']]} (seen: {shown or 'nothing'})")
    return ["  forced settings"] + lines if lines else []


def nccl_log_summary_text(log: NcclLog) -> str:
    """Several lines: version, geometry, channels, rings, transports, features, env, tuning, warnings."""
    out = [f"NCCL debug log {log.source}"]
    out.append(f"  NCCL version   {log.nccl_version or '?'}")
    out.append(f"  hosts          {', '.join(log.hosts) if log.hosts else '?'}")
    out.append(f"  geometry       {_geometry(log)}")
    out.append(f"  channels       {_channels(log)}")
    out += _rings(log)
    if log.trees:
        channels = len({t.channel for t in log.trees})
        ranks = len({t.rank for t in log.trees})
        seen = f"{_plural(ranks, 'rank')}, {_plural(channels, 'channel')}"
        out.append(f"  trees          {len(log.trees)} links seen ({seen})")
    out.append(f"  transports     {_transports(log)}")
    network = _network(log)
    if network:
        out.append(f"  network        {network}")
    out.append(f"  features       GDR {_flag(log.gdr)}, PXN {'?' if log.pxn is None else log.pxn}, "
               f"NVLS {_flag(log.nvls, 'available', 'not available')}, CollNet {_flag(log.collnet)}")
    if log.env:
        out.append("  environment    " + ", ".join(f"{k}={v}" for k, v in log.env.items()))
    out += _tuning(log)
    out += _calls(log)
    out += _size_choices(log)
    out += _rails(log)
    out += _effects(log)
    if log.warnings:
        out.append("warnings:")
        out += [f"  - {w}" for w in log.warnings]
    return "\n".join(out)
