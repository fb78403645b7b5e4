"""Anomalies as a person reads them: one row per configuration and run of adjacent sizes, the worst first.

:func:`~.compare.analyze` finds anomalies per size (a 2-rank demo sweep has 40-odd sizes with a run-to-run
spread above 10%). A report lists groups instead: the anomalies of one kind and configuration at sizes that are
adjacent among the sizes measured for that collective form one group, shown with its size range, how many sizes
it holds and the detail of its worst member (the largest spread; for other kinds the first size). The groups
of a kind are ordered worst first and the first few are shown; the rest are counted (:func:`shown_groups`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from collscope.analysis.compare import Analysis, Anomaly
from collscope.analysis.crossovers import sample
from collscope.analysis.noise import relative_spread
from collscope.units import format_size

__all__ = ["AnomalyGroup", "group_anomalies", "shown_groups", "MAX_GROUPS_PER_KIND"]

MAX_GROUPS_PER_KIND = 5
"""Groups shown per kind of anomaly; the others are counted in one line."""

_SAME_CONFIG = ("kind", "op", "config", "backend", "nranks", "nnodes", "in_place", "input")
"""The anomaly fields that name one configuration (``input`` where the analysis has it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AnomalyGroup:
    """Anomalies of one kind and configuration at adjacent measured sizes."""

    kind: str
    op: str
    config: str
    min_bytes: int | None
    """Smallest size of the group; None for an anomaly of the whole configuration (a failure)."""
    max_bytes: int | None
    sizes: int
    """How many sizes the group holds."""
    worst: float
    """What orders the groups of a kind: the largest run-to-run spread (a fraction) for ``spread``, else the
    number of sizes."""
    detail: str
    """The detail of the worst member (spread) or the first (other kinds)."""

    @property
    def size_range(self) -> str:
        """``8..64K (14 sizes)``, ``1M``, or ``-`` for a whole configuration."""
        if self.min_bytes is None or self.max_bytes is None:
            return "-"
        if self.min_bytes == self.max_bytes:
            return format_size(self.min_bytes)
        return f"{format_size(self.min_bytes)}..{format_size(self.max_bytes)} ({self.sizes} sizes)"


def _spreads(analysis: Analysis) -> dict[tuple[Any, ...], float]:
    """(op, config, nranks, nnodes, size) -> the largest run-to-run spread measured there."""
    out: dict[tuple[Any, ...], float] = {}
    sizes = analysis.sizes
    if sizes.empty:
        return out
    for row in sizes[sizes["n"] > 0].to_dict(orient="records"):
        nnodes = None if pd.isna(row.get("nnodes")) else int(row["nnodes"])
        key = (str(row["op"]), str(row["config"]), int(row["nranks"]), nnodes, int(row["size_bytes"]))
        out[key] = max(out.get(key, 0.0), relative_spread(sample(row)))
    return out


def _measured_sizes(analysis: Analysis) -> dict[str, list[int]]:
    sizes = analysis.sizes
    if sizes.empty:
        return {}
    return {str(op): sorted({int(s) for s in part["size_bytes"]}) for op, part in sizes.groupby("op", observed=True)}


def group_anomalies(analysis: Analysis) -> list[AnomalyGroup]:
    """The anomalies of ``analysis`` grouped (module doc), by kind in analyze's order, worst first in a kind."""
    spreads = _spreads(analysis)
    ladder = _measured_sizes(analysis)
    by_config: dict[tuple[Any, ...], list[Anomaly]] = {}
    for a in analysis.anomalies:
        by_config.setdefault(tuple(getattr(a, f, None) for f in _SAME_CONFIG), []).append(a)
    groups: list[AnomalyGroup] = []
    kinds: list[str] = []
    for members in by_config.values():
        if members[0].kind not in kinds:
            kinds.append(members[0].kind)
        whole = [a for a in members if a.size_bytes is None]
        groups += [_group([a], None) for a in whole]
        sized = sorted((a for a in members if a.size_bytes is not None), key=lambda a: int(a.size_bytes or 0))
        index = {s: i for i, s in enumerate(ladder.get(members[0].op, []))}
        run: list[Anomaly] = []
        for a in sized:
            if run and index.get(int(a.size_bytes or 0), -2) != index.get(int(run[-1].size_bytes or 0), -9) + 1:
                groups.append(_group(run, spreads))
                run = []
            run.append(a)
        if run:
            groups.append(_group(run, spreads))
    order = {k: i for i, k in enumerate(kinds)}
    return sorted(groups, key=lambda g: (order[g.kind], -g.worst, g.op, g.config, g.min_bytes or 0))


def _group(run: Sequence[Anomaly], spreads: dict[tuple[Any, ...], float] | None) -> AnomalyGroup:
    first = run[0]
    worst_member, worst = first, float(len(run))
    if first.kind == "spread" and spreads is not None:
        scored = [(spreads.get((a.op, a.config, a.nranks, a.nnodes, a.size_bytes), 0.0), a) for a in run]
        worst, worst_member = max(scored, key=lambda pair: pair[0])
    sizes = [a.size_bytes for a in run if a.size_bytes is not None]
    detail = worst_member.detail
    if len(run) > 1 and worst_member.size_bytes is not None:
        detail = f"worst at {format_size(worst_member.size_bytes)}: {detail}"
    return AnomalyGroup(kind=first.kind, op=first.op, config=first.config,
                        min_bytes=min(sizes) if sizes else None, max_bytes=max(sizes) if sizes else None,
                        sizes=len(sizes), worst=worst, detail=detail)


def shown_groups(groups: Sequence[AnomalyGroup], per_kind: int = MAX_GROUPS_PER_KIND
                 ) -> tuple[list[AnomalyGroup], list[str]]:
    """The first ``per_kind`` groups of each kind, and one line per kind that has more: how many groups and sizes
    are not shown."""
    shown: list[AnomalyGroup] = []
    left: dict[str, list[AnomalyGroup]] = {}
    for g in groups:
        if sum(1 for s in shown if s.kind == g.kind) < per_kind:
            shown.append(g)
        else:
            left.setdefault(g.kind, []).append(g)
    lines = []
    for kind, rest in left.items():
        sizes = sum(max(g.sizes, 1) for g in rest)
        worst = (f", spread up to {max(g.worst for g in rest):.0%}" if kind == "spread" else "")
        lines.append(f"{len(rest)} more {kind} group(s) ({sizes} size(s){worst}) not shown: "
                     "`collscope analyze --json` lists every one")
    return shown, lines
