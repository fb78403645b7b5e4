"""Which NICs NCCL would use for inter-node traffic: the node's active compute NICs, and why others are left out.

A compute NIC has a port that is Active at the node's fastest rate, InfiniBand or RoCE (Ethernet link layer at
that rate). A NIC whose ports are all down is left out (NCCL's IB transport skips ports that are not Active);
an active NIC slower than the fastest is a front-end NIC (Ethernet) or a slower NIC (InfiniBand) and is left out
of the nearest-NIC choice too, although NCCL would still use it unless ``NCCL_IB_HCA`` excludes it. A NIC the
captures say nothing about (no port state, no rate: ``nvidia-smi topo -m`` alone) is kept: ``unknown``.

Reads the graph's NIC nodes (``ports`` from ibstat/ibdev2netdev, ``speed_gbps`` from an NCCL XML ``<net>``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from collscope.topo.bonded import bond_statement, is_bonded
from collscope.topo.naming import natural_key

__all__ = ["NicRole", "NicChoice", "classify_nics", "exclude_hca_value"]

NicRole = Literal["compute", "front-end", "slower", "down", "unknown"]
LEFT_OUT_ROLES: tuple[str, ...] = ("front-end", "slower", "down")


@dataclass(frozen=True, slots=True)
class NicChoice:
    """One NIC's role for NCCL and, when it is left out, why."""

    name: str
    role: NicRole
    why: str
    """Empty for ``compute`` and ``unknown``; else e.g. ``"port 1 Down"``."""
    rate_gbps: float | None
    """Fastest rate of its usable (Active or state-unknown) ports, Gb/s (bits)."""
    link_layer: str | None
    active: bool
    """True when a port is Active (or its state is not captured but its rate is): NCCL would open it."""
    bond: str = ""
    """For bonded ports (``mlx5_bond_0``): what the bond is (RoCE LAG compute NIC, front-end/storage bond, or
    unclear) with the rule's evidence (:mod:`collscope.topo.bonded`); empty for other NICs."""

    @property
    def left_out(self) -> bool:
        return self.role in LEFT_OUT_ROLES

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "reason": self.role, "why": self.why, "rate_gbps": self.rate_gbps,
               "link_layer": self.link_layer}
        return {**out, "bond": self.bond} if self.bond else out


def _ports(node: dict[str, Any]) -> list[dict[str, Any]]:
    ports = list(node.get("ports") or [])
    if not ports and node.get("speed_gbps") is not None:  # NCCL XML <net speed=...>: rate, no state
        ports = [{"port": node.get("port"), "state": None, "rate_gbps": node["speed_gbps"], "link_layer": None}]
    return ports


def _usable(port: dict[str, Any]) -> bool:
    """Active, or state not captured (kept: the captures do not say it is down)."""
    return port.get("state") in (None, "Active")


def _best(ports: Iterable[dict[str, Any]]) -> tuple[float | None, str | None]:
    rated = [(float(p["rate_gbps"]), p.get("link_layer")) for p in ports if p.get("rate_gbps") is not None]
    return max(rated, key=lambda r: r[0]) if rated else (None, None)


def fastest_rate_gbps(graph: Any, nics: Iterable[str]) -> float | None:
    """The node's fastest rate among usable ports (Gb/s), ``None`` when no rate is known."""
    rates = [_best(p for p in _ports(graph.nodes[n]) if _usable(p))[0] for n in nics]
    known = [r for r in rates if r is not None]
    return max(known) if known else None


def _choose(name: str, node: dict[str, Any], fastest: float | None) -> NicChoice:
    ports = _ports(node)
    usable = [p for p in ports if _usable(p)]
    if ports and not usable:
        why = ", ".join(f"port {p.get('port')} {p.get('state')}"
                        + (f", rate {p['rate_gbps']:g} Gb/s" if p.get("rate_gbps") is not None else "")
                        for p in ports)
        return NicChoice(name, "down", why, None, _best(ports)[1], False)
    rate, layer = _best(usable)
    active = any(p.get("state") == "Active" for p in usable) or rate is not None
    if rate is None or fastest is None or rate >= fastest:
        role: NicRole = "compute" if rate is not None else "unknown"
        return NicChoice(name, role, "", rate, layer, active)
    if layer == "Ethernet":
        why = f"front-end: Ethernet {rate:g} Gb/s, slower than the node's {fastest:g} Gb/s compute NICs"
        return NicChoice(name, "front-end", why, rate, layer, active)
    why = f"slower: {layer or 'link layer ?'} {rate:g} Gb/s, below the node's fastest {fastest:g} Gb/s"
    return NicChoice(name, "slower", why, rate, layer, active)


def classify_nics(graph: Any, nics: Iterable[str], *, gpus: Iterable[str] = (),
                  distance: Callable[[str, str], str] | None = None) -> dict[str, NicChoice]:
    """Every NIC's :class:`NicChoice`, in the order given. Bonded ports (``mlx5_bond_0``) also get their
    :attr:`NicChoice.bond` statement, from their rate and ``distance(gpu, nic)`` (a path class) to ``gpus``."""
    names = list(nics)
    gpu_names = list(gpus)
    fastest = fastest_rate_gbps(graph, names)
    choices = {n: _choose(n, graph.nodes[n], fastest) for n in names}
    for name, choice in choices.items():
        if is_bonded(name):
            distances = {g: distance(g, name) for g in gpu_names} if distance is not None else {}
            choices[name] = dataclasses.replace(choice, bond=bond_statement(
                name, rate_gbps=choice.rate_gbps, fastest_gbps=fastest, down=choice.role == "down",
                distances=distances))
    return choices


def exclude_hca_value(choices: Iterable[NicChoice]) -> str | None:
    """``NCCL_IB_HCA`` excluding the active left-out NICs by exact name (``^=mlx5_8,mlx5_9``), else ``None``.

    ``^`` makes the list an exclude list and ``=`` an exact match (without it ``mlx5_1`` is a prefix that also
    matches ``mlx5_10``..``mlx5_19``); NCCL env docs, reference/nccl-facts.md section 2. Down NICs are not named:
    NCCL skips ports that are not Active.
    """
    items = [c.name for c in sorted(choices, key=lambda c: natural_key(c.name)) if c.left_out and c.active]
    return "^=" + ",".join(items) if items else None
