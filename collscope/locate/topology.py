"""What locate takes from a cluster topology (``collscope topo cluster DIR --json``): rail NICs and leaf switches.

Pure: it reads the JSON document. A rail that every node has is a rail of the allocation; its NIC name goes to
``NCCL_IB_HCA`` when every node names it alike (``""`` when they differ: one srun environment cannot say
both). A "rail" from the fabric that only some nodes reach is a leaf switch: those nodes are under that leaf,
and bisection keeps them together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collscope.errors import ParseError

__all__ = ["LocateTopology", "topology_from_cluster_json"]


@dataclass(frozen=True, slots=True)
class LocateTopology:
    rail_nics: tuple[str, ...] = ()
    leaf_of: dict[str, str] = field(default_factory=dict)


def topology_from_cluster_json(doc: Mapping[str, Any], nodes: Sequence[str],
                               source: str = "topology") -> LocateTopology:
    rails = doc.get("rails")
    if not isinstance(rails, list):
        raise ParseError(source, None, "the JSON of 'collscope topo cluster DIR --json' (a 'rails' list)")
    wanted = set(nodes)
    nics: list[tuple[int, str]] = []
    leaf_of: dict[str, str] = {}
    for rail in rails:
        if not isinstance(rail, dict) or not isinstance(rail.get("members"), list):
            raise ParseError(source, None, "rails with 'members' lists of [host, nic]")
        members = [(str(m[0]), str(m[1])) for m in rail["members"] if isinstance(m, list) and len(m) == 2]
        hosts = {h for h, _ in members}
        if wanted <= hosts:
            names = {nic for h, nic in members if h in wanted}
            nics.append((int(rail.get("index", len(nics))), names.pop() if len(names) == 1 else ""))
        elif rail.get("switch") and hosts & wanted:
            for h in hosts & wanted:
                leaf_of.setdefault(h, str(rail["switch"]))
    return LocateTopology(rail_nics=tuple(name for _, name in sorted(nics)), leaf_of=leaf_of)
