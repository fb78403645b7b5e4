"""SweepSpec -> Plan: expand the grid of a (validated) spec, drop impossible combinations with a reason.

``plan_sweep`` is pure apart from reading ``os.environ`` for a CollNet plugin hint when no ``env`` is given.
Points come out in a stable order: for each repeat, for each op, the all-default point first, then the grid in
the order it was written. Ids come from :func:`~collscope.sweeps.spec.point_id_for`, so the same spec always
gives the same ids. ``load_spec`` (:mod:`.specfile`) reads a YAML or JSON file into the same dataclass the
presets build.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Mapping

from collscope.sweeps.check import grid_values
from collscope.sweeps.constraints import PlanContext, collnet_plugin_hint, parse_nccl_version, skip_reason
from collscope.sweeps.presets import PRESETS, preset
from collscope.sweeps.spec import DEFAULT, Plan, Point, SkippedPoint, SweepSpec, point_id_for
from collscope.sweeps.specfile import load_spec, spec_from_dict
from collscope.topo.model import NodeTopology
from collscope.vocab.knobs import requires

__all__ = ["plan_sweep", "load_spec", "spec_from_dict", "check_spec", "grid_values", "PRESETS", "preset"]


def check_spec(spec: SweepSpec) -> SweepSpec:
    """The spec validated again (a SweepSpec is checked when it is built; this rebuilds it); an equal spec."""
    return dataclasses.replace(spec)


def _combos(grid: Mapping[str, tuple[str, ...]], variants: tuple[dict[str, str], ...]) -> list[dict[str, str]]:
    names = list(grid)
    bundles = variants or ({},)
    out = []
    for values in itertools.product(*(grid[n] for n in names)):
        base = {n: v for n, v in zip(names, values, strict=True) if v != DEFAULT}
        for bundle in bundles:
            out.append({**base, **bundle})
    return out


def plan_sweep(spec: SweepSpec, *, topology: NodeTopology | None = None, nccl_version: str | None = None,
               env: Mapping[str, str] | None = None) -> Plan:
    """Every point of the sweep, and the grid combinations that are skipped with their reason.

    ``topology``: the node the sweep runs on; hardware rules (NVLS, CollNetDirect, LL128) apply only when given.
    Without it a point such as ``NCCL_ALGO=NVLS`` is kept; that does not mean it is possible: the sweep checks
    NCCL's log for what really ran. ``nccl_version``: skip knobs and syntax the version lacks. ``env``: where to
    look for a CollNet plugin hint (``NCCL_COLLNET_PLUGIN``/``NCCL_NET_PLUGIN``), ``os.environ`` by default.
    """
    hints = {**(os.environ if env is None else env), **spec.fixed_env}
    ctx = PlanContext(spec=spec, topology=topology,
                      nccl_version=parse_nccl_version(nccl_version) if nccl_version else None,
                      collnet_plugin=spec.collnet_plugin or collnet_plugin_hint(hints))
    runnable: dict[str, list[dict[str, str]]] = {}
    skipped: list[SkippedPoint] = []
    for op in spec.ops:
        seen: set[tuple[tuple[str, str], ...]] = {()}
        runnable[op] = [{}]
        skipped_seen: set[tuple[tuple[str, str], ...]] = set()
        for settings in _combos({**spec.grid, **spec.per_op_grid.get(op, {})}, spec.variants):
            reason = skip_reason(op, settings, ctx)
            full = requires(settings) if reason is None else settings
            key = tuple(sorted(full.items()))
            if reason is not None:
                if key not in skipped_seen:
                    skipped_seen.add(key)
                    skipped.append(SkippedPoint(op=op, settings=dict(settings), reason=reason))
            elif key not in seen:
                seen.add(key)
                runnable[op].append(full)
    points = [Point(point_id=point_id_for(spec, op, s, r), op=op, settings=s, repeat=r)
              for r in range(spec.repeats) for op in spec.ops for s in runnable[op]]
    return Plan(spec=spec, points=tuple(points), skipped=tuple(skipped))
