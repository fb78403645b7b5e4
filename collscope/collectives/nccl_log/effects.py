"""Did a forced NCCL setting take effect? Evidence from a parsed log.

DESIGN.md: a sweep must verify from NCCL's debug output that a forced setting took effect (that
``NCCL_ALGO=Tree`` really ran Tree). The evidence is the per-operation choice lines of the TUNING
subsystem (``NCCL_DEBUG_SUBSYS=TUNING`` or ``INIT,TUNING``), the channel count and the NIC list.
``applied`` is ``True`` or ``False`` when the log shows it and ``None`` when the log holds no evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collscope.collectives.nccl_log.records import NcclLog
from collscope.collectives.nccl_log.tuning import normalize_algorithm, normalize_protocol
from collscope.errors import ConfigError
from collscope.vocab.knob_values import ib_hca_permits
from collscope.vocab.nccl import net_gdr_level, pxn_disabled

__all__ = ["algorithms_used", "protocols_used", "ib_devices_used", "forced_setting_effects", "allowed_names"]


def algorithms_used(log: NcclLog) -> set[str]:
    """Algorithms NCCL chose for at least one operation (NCCL's spelling: ``Tree``, ``Ring``, ``NVLSTree``)."""
    return {algo for (_, algo, _), n in log.algo_proto_calls.items() if n > 0}


def protocols_used(log: NcclLog) -> set[str]:
    """Protocols NCCL chose for at least one operation (``LL``, ``LL128``, ``Simple``)."""
    return {proto for (_, _, proto), n in log.algo_proto_calls.items() if n > 0}


def ib_devices_used(log: NcclLog) -> list[str]:
    """IB devices as ``name:port`` from ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/IB ...``, in NCCL's order."""
    return list(log.net.ib_devices)


def allowed_names(value: str, normalize: Callable[[str], str]) -> dict[str | None, set[str]]:
    """What ``NCCL_ALGO``/``NCCL_PROTO`` allow: function (lower case; ``None`` for every function) -> names.

    Forms: ``Tree``, ``Ring,Tree``, ``^Tree`` (everything but Tree; kept as ``{"^Tree"}``) and the
    per-function ``allreduce:tree;broadcast:ring`` of NCCL 2.24+.
    """
    rules: dict[str | None, set[str]] = {}
    for part in filter(None, (p.strip() for p in value.split(";"))):
        func, _, names = part.rpartition(":")
        names = names.strip()
        exclude = names.startswith("^")
        items = {normalize(n.strip()) for n in names.lstrip("^").split(",") if n.strip()}
        rules[func.strip().lower() or None] = {"^" + n for n in items} if exclude else items
    return rules


def _permits(rule: set[str], name: str) -> bool:
    excluded = {r[1:] for r in rule if r.startswith("^")}
    return name not in excluded if excluded else name in rule


def _choice_effect(log: NcclLog, var: str, position: int, normalize: Callable[[str], str]) -> dict[str, Any]:
    value = log.env[var]
    rules = allowed_names(value, normalize)
    used: set[str] = set()
    outside: list[dict[str, Any]] = []
    for key, n in log.algo_proto_calls.items():
        op, algo, proto = key
        name = algo if position == 1 else proto
        if op is not None and op.lower() in rules:
            rule = rules[op.lower()]
        elif None in rules:
            rule = rules[None]
        else:
            continue
        used.add(name)
        if not _permits(rule, name):
            outside.append({"op": op, "algo": algo, "proto": proto, "calls": n})
    return {"forced": value, "used": sorted(used), "applied": (not outside) if used else None, "outside": outside}


def forced_setting_effects(log: NcclLog) -> dict[str, dict[str, Any]]:
    """For every forced setting the log echoes and this check knows, what NCCL did with it.

    Returns ``{"NCCL_ALGO": {"forced": "Tree", "used": ["Tree"], "applied": True, "outside": []}, ...}``;
    ``NCCL_IB_HCA`` compares the NIC list, ``NCCL_PXN_DISABLE`` and ``NCCL_NET_GDR_LEVEL`` the network connections
    (:func:`_pxn_effect`, :func:`_gdr_effect`), ``NCCL_MIN_NCHANNELS``/``NCCL_MAX_NCHANNELS`` the channel count, and
    ``NCCL_MIN_CTAS``/``NCCL_MAX_CTAS`` the count of ``N coll channels, ...`` only: NCCL prints it after
    capping the channels by them (src/graph/connect.cc ``ncclTopoPostset``: ``min(..., config.maxCTAs)``, copies
    up to ``max(minNchannels, config.minCTAs)``; src/init.cc prints the line), and echoes them as
    ``NCCL_MAX_CTAS set by environment to 8.`` (src/misc/param.cc). A variable the log does not echo, or a count
    it does not print, has no entry or ``applied`` None: unchecked, never applied.
    """
    effects: dict[str, dict[str, Any]] = {}
    if "NCCL_ALGO" in log.env:
        effects["NCCL_ALGO"] = _choice_effect(log, "NCCL_ALGO", 1, normalize_algorithm)
    if "NCCL_PROTO" in log.env:
        effects["NCCL_PROTO"] = _choice_effect(log, "NCCL_PROTO", 2, normalize_protocol)
    hca = log.env.get("NCCL_IB_HCA") or log.net.ib_hca_env
    if hca:
        devices = ib_devices_used(log)
        outside = [d for d in devices if not ib_hca_permits(hca, d)]
        effects["NCCL_IB_HCA"] = {"forced": hca, "used": devices, "applied": (not outside) if devices else None,
                                  "outside": outside}
    if "NCCL_PXN_DISABLE" in log.env:
        effects["NCCL_PXN_DISABLE"] = _pxn_effect(log.env["NCCL_PXN_DISABLE"], log.pxn)
    if "NCCL_NET_GDR_LEVEL" in log.env:
        effects["NCCL_NET_GDR_LEVEL"] = _gdr_effect(log.env["NCCL_NET_GDR_LEVEL"], log.gdr)
    for var, ok in (("NCCL_MAX_NCHANNELS", _at_most), ("NCCL_MIN_NCHANNELS", _at_least)):
        if var in log.env:
            effects[var] = _channel_effect(log.env[var], log.channels, ok)
    coll = (log.channel_counts or {}).get("coll")
    for var, ok in (("NCCL_MAX_CTAS", _at_most), ("NCCL_MIN_CTAS", _at_least)):
        if var in log.env:  # only the count NCCL prints after applying them (never Channel/ring lines)
            effects[var] = _channel_effect(log.env[var], coll, ok)
    return effects


def _pxn_effect(value: str, pxn: int | None) -> dict[str, Any]:
    """NCCL_PXN_DISABLE=1 against the log's PXN use (``Connected all rings, use ring PXN 1``, or a network
    connection through a proxy rank, ``via NET/IB/0(1)/...``): applied when none is seen, not when one is. Only 1
    disables it (:func:`collscope.vocab.nccl.pxn_disabled`), and whether a node uses PXN at all depends on its
    GPU-NIC paths: any other value, or no such line, is unchecked."""
    used = None if pxn is None else ("PXN" if pxn else "no PXN")
    applied = None if pxn is None or not pxn_disabled(value) else pxn == 0
    return {"forced": value, "used": used, "applied": applied, "outside": []}


def _gdr_effect(value: str, gdr: bool | None) -> dict[str, Any]:
    """NCCL_NET_GDR_LEVEL against GPUDirect RDMA on the log's network connections (``via NET/IB/0/GDRDMA``, or
    ``use ring PXN 0 GDR 1``): a level that turns it off everywhere (LOC, 0) is applied when no connection uses it.
    Whether another level takes effect depends on each GPU's distance to its NIC, which an INFO log does not print
    (paths.cc logs it at TRACE): unchecked, with what the connections used."""
    used = None if gdr is None else ("GDRDMA" if gdr else "no GDRDMA")
    try:
        off = net_gdr_level(value) == "LOC"  # no GPU-NIC path is that close: GPUDirect RDMA off for every GPU
    except ConfigError:
        off = False  # a value NCCL does not read leaves its default
    applied = None if gdr is None or not off else not gdr
    return {"forced": value, "used": used, "applied": applied, "outside": []}


def _at_most(have: int, want: int) -> bool:
    return have <= want


def _at_least(have: int, want: int) -> bool:
    return have >= want


def _channel_effect(value: str, channels: int | None, ok: Callable[[int, int], bool]) -> dict[str, Any]:
    """A bound on channels against the count NCCL reports; ``applied`` None without a count (unchecked)."""
    wanted = int(value) if value.strip().isdigit() and len(value) < 10 else None
    applied = None if wanted is None or channels is None else ok(channels, wanted)
    return {"forced": value, "used": channels, "applied": applied, "outside": []}
