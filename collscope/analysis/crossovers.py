"""Crossovers: the sizes where the leading configuration of a group changes **beyond noise**.

Per (backend, op, nranks, nnodes, in_place, input) of :func:`~.fit.aggregate`'s table. At the first size measured
by two or more configurations the leader is the default (else the highest median), unless some configuration beats it
there beyond noise; another configuration takes over at a size only where it beats the leader beyond noise
(:func:`~.noise.beyond_noise`: >= 3 repeats on both sides, gain > ``min_gain`` and > the combined spread, over
>= 2 adjacent measured sizes). A best median that changes within noise is no crossover.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from collscope.analysis.noise import Sample, beyond_noise

__all__ = ["Crossover", "find_crossovers", "sample", "GROUP_KEYS"]

GROUP_KEYS = ("backend", "op", "nranks", "nnodes", "in_place", "input")
"""Configurations compete within one group; ``input`` (where the records were read from) keeps a sweep's
configurations from competing with a check run's (:data:`~.fit.CONFIG_KEYS`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Crossover:
    backend: str
    op: str
    nranks: int
    nnodes: int | None
    in_place: bool
    size_bytes: int
    """The first size at which ``to_config`` is the best."""
    from_config: str
    to_config: str
    from_busbw_gbps: float
    to_busbw_gbps: float
    input: str | None = None
    """The input (results directory or file) both configurations were read from."""
    hosts_differ: str | None = None
    """Set when the two configurations were measured on different hosts (:mod:`.placement`): the sentence that
    says so; the crossover is then a node difference, not a setting difference."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sample(row: Mapping[str, Any]) -> Sample:
    return Sample(median_gbps=float(row["busbw_gbps"]), min_gbps=float(row["busbw_min_gbps"]),
                  max_gbps=float(row["busbw_max_gbps"]), repeats=int(row["n"]))


def find_crossovers(sizes: pd.DataFrame, min_gain: float) -> list[Crossover]:
    out: list[Crossover] = []
    usable = sizes[(sizes["n"] > 0) & np.isfinite(sizes["busbw_gbps"])]
    if "input" not in usable:
        usable = usable.assign(input=None)
    for key, group in usable.groupby(list(GROUP_KEYS), observed=True, dropna=False, sort=True):
        cells: dict[str, dict[int, Sample]] = {}
        for row in group.to_dict(orient="records"):
            cells.setdefault(str(row["config"]), {})[int(row["size_bytes"])] = sample(row)
        order = sorted({s for by_size in cells.values() for s in by_size})
        beats = {(a, b): beyond_noise([(cells[a].get(s), cells[b].get(s)) for s in order], min_gain)
                 for a in cells for b in cells if a != b}
        leader: str | None = None
        for i, size in enumerate(order):
            here = {c: by_size[size] for c, by_size in cells.items() if size in by_size}
            if len(here) < 2:
                continue
            if leader is None or leader not in here:
                # the default leads unless something beats it here; else the best median
                start = "default" if "default" in here else max(here, key=lambda c: (here[c].median_gbps, c))
                over = [c for c in here if c != start and beats[(c, start)][i]]
                leader = max(over, key=lambda c: (here[c].median_gbps, c)) if over else start
                continue
            over = [c for c in here if c != leader and beats[(c, leader)][i]]
            if not over:
                continue
            best = max(over, key=lambda c: (here[c].median_gbps, c))
            k = dict(zip(GROUP_KEYS, key, strict=True))
            nnodes = k["nnodes"]
            out.append(Crossover(backend=str(k["backend"]), op=str(k["op"]), nranks=int(k["nranks"]),
                                 nnodes=None if pd.isna(nnodes) else int(nnodes), in_place=bool(k["in_place"]),
                                 size_bytes=int(size), from_config=leader, to_config=best,
                                 from_busbw_gbps=here[leader].median_gbps, to_busbw_gbps=here[best].median_gbps,
                                 input=None if pd.isna(k["input"]) else str(k["input"])))
            leader = best
    return out
