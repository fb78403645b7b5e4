"""A run's own per-call cost: what every call of a measured run pays beyond NCCL's model.

When a curve measured 3 or more sizes from 64 B to 64 KiB and its fastest call there took longer than NCCL's model
expects at that size, its larger sizes expect the model's time plus that difference (:func:`run_costs_us`,
:func:`with_run_cost`; one process driving all GPUs with ``-g N``, a net plugin's own work: SURF Snellius' H100 node
under ``-g 4`` takes 17-19 us per call from 64 B to 64 KiB where the model gives 10), said in the notes
(:func:`~.efficiency.add_expected`). The cost excuses a slower call only: the ``suspicious`` threshold stays the
model's without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from collscope.analysis.expected import Expected
from collscope.analysis.fit import CONFIG_KEYS
from collscope.collectives.record import busbw_factor

__all__ = ["RUN_FLOOR_MIN_BYTES", "RUN_FLOOR_MAX_BYTES", "RUN_FLOOR_MIN_SIZES", "RunCost", "curve_key",
           "curve_run_cost", "run_costs_us", "model_time_us", "time_busbw_gbps", "slower_busbw", "with_run_cost"]


RUN_FLOOR_MIN_BYTES = 64
RUN_FLOOR_MAX_BYTES = 64 * 1024
"""The sizes whose fastest call gives a run's own per-call cost (:func:`run_costs_us`): from 64 B (below, nccl-tests
prints 0-byte and few-element rows that some ops skip) to 64 KiB, where published curves are still flat (SURF
Snellius' H100 node, one process driving 4 GPUs: 16.7-18.9 us from 64 B to 64 KiB; its 2 nodes: 16-18 us)."""
RUN_FLOOR_MIN_SIZES = 3
"""Sizes in that range a curve needs before its fastest one is taken as its floor (one size could be an outlier of
a warm-up; the fastest of three or more is no longer one call's accident)."""


def curve_key(row: Mapping[Any, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(k)) for k in CONFIG_KEYS)


@dataclass(frozen=True, slots=True)
class RunCost:
    """A curve's own per-call cost beyond the model (:func:`run_costs_us`)."""

    floor_us: float
    """Its fastest median time at :data:`RUN_FLOOR_MIN_BYTES`-:data:`RUN_FLOOR_MAX_BYTES`."""
    floor_size: int
    """The size of that call."""
    extra_us: float
    """``floor_us`` less the model's expected time at ``floor_size`` (> 0)."""


def curve_run_cost(points: Iterable[tuple[int, float]],
                   model_us_at: Callable[[int], float | None]) -> RunCost | None:
    """The rule of :func:`run_costs_us` for one curve, from its (size, measured time) points: with
    :data:`RUN_FLOOR_MIN_SIZES` or more sizes from :data:`RUN_FLOOR_MIN_BYTES` to :data:`RUN_FLOOR_MAX_BYTES`, its
    fastest call there (the first of equal ones) against ``model_us_at`` that size (the model's expected time;
    None: no model there); None when the curve has too few such sizes, no model there, or a call no slower than it.
    ``bench/run_cost_check.py`` holds the same rule against published curves."""
    usable = [(size, time) for size, time in points
              if RUN_FLOOR_MIN_BYTES <= size <= RUN_FLOOR_MAX_BYTES and math.isfinite(time) and time > 0]
    if len(usable) < RUN_FLOOR_MIN_SIZES:
        return None
    size, time = min(usable, key=lambda p: p[1])
    model_us = model_us_at(size)
    if model_us is None or not time > model_us:
        return None
    return RunCost(floor_us=time, floor_size=size, extra_us=time - model_us)


def run_costs_us(records: list[dict[Any, Any]], expected: Mapping[int, Expected]) -> dict[tuple[str, ...], RunCost]:
    """Per curve (:data:`~.fit.CONFIG_KEYS`: configuration, op, ranks, nodes, in-place, input) that measured
    :data:`RUN_FLOOR_MIN_SIZES` sizes or more from :data:`RUN_FLOOR_MIN_BYTES` to :data:`RUN_FLOOR_MAX_BYTES`: its
    fastest call there, and how much longer it took than NCCL's model expects at that size (``expected``: the
    expected measurement per record index), when it did (:func:`curve_run_cost`). Every call of the run pays that
    cost (a launch, a plugin's own work), so a larger size's expected time is the model's plus it
    (:func:`with_run_cost`)."""
    curves: dict[tuple[str, ...], list[int]] = {}
    for i, row in enumerate(records):
        curves.setdefault(curve_key(row), []).append(i)
    out: dict[tuple[str, ...], RunCost] = {}
    for key, members in curves.items():
        at = {int(records[i]["size_bytes"]): i for i in reversed(members)}  # a size's first record

        def model_us(size: int, at: dict[int, int] = at) -> float | None:
            i = at[size]
            exp = expected.get(i)
            if exp is None or exp.kind != "nccl" or not exp.busbw_gbps > 0:
                return None
            return model_time_us(str(records[i]["op"]), int(records[i]["nranks"]), size, exp.busbw_gbps)

        points = [(int(records[i]["size_bytes"]), float(records[i].get("time_us", math.nan))) for i in members]
        cost = curve_run_cost(points, model_us)
        if cost is not None:
            out[key] = cost
    return out


def model_time_us(op: str, nranks: int, size_bytes: int, busbw_gbps: float) -> float:
    """The time of one call of ``op`` at ``size_bytes`` that runs at ``busbw_gbps`` (nccl-tests' busbw factor)."""
    return busbw_factor(op, nranks) * size_bytes / (busbw_gbps * 1e3)


def time_busbw_gbps(op: str, nranks: int, size_bytes: int, time_us: float) -> float:
    """The busbw of one call of ``op`` at ``size_bytes`` that takes ``time_us`` (the inverse of
    :func:`model_time_us`)."""
    return busbw_factor(op, nranks) * size_bytes / (time_us * 1e3)


def slower_busbw(busbw_gbps: float, op: str, nranks: int, size_bytes: int, extra_us: float) -> float:
    """``busbw_gbps`` of a call that takes ``extra_us`` longer."""
    if not busbw_gbps > 0:
        return busbw_gbps
    return time_busbw_gbps(op, nranks, size_bytes, model_time_us(op, nranks, size_bytes, busbw_gbps) + extra_us)


def with_run_cost(expected: Expected, op: str, nranks: int, size_bytes: int, extra_us: float) -> Expected:
    """``expected`` (and its near ties) ``extra_us`` slower per call."""
    def slower(busbw: float) -> float:
        return slower_busbw(busbw, op, nranks, size_bytes, extra_us)

    ties = tuple(replace(t, busbw_gbps=slower(t.busbw_gbps)) for t in expected.near_ties)
    return replace(expected, busbw_gbps=slower(expected.busbw_gbps), near_ties=ties,
                   algo_source=f"{expected.algo_source}; plus the run's own per-call cost")
