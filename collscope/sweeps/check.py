"""Knob checks of a SweepSpec: its grid, per-op grids, variants and fixed environment, each value validated by
the knob registry (:mod:`collscope.vocab.knobs`) and normalised. ``SweepSpec.__post_init__`` calls
:func:`check_knobs`; the field checks (engine, ops, sizes, counts) are the spec's own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collscope.errors import ConfigError
from collscope.vocab.configs import DEFAULT
from collscope.vocab.knobs import validate_env, validate_setting
from collscope.vocab.ops import SWEEP_OPS

__all__ = ["check_knobs", "grid_values", "grid_from", "KNOWN_OPS"]

KNOWN_OPS = SWEEP_OPS
"""The ops a sweep may name (the vocabulary's :data:`~collscope.vocab.ops.SWEEP_OPS`)."""

Grid = dict[str, tuple[str, ...]]


def _is_default(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "default"))


def grid_values(name: str, raw: object) -> tuple[str, ...]:
    """One grid entry (a scalar or a list) -> normalised values; ``default``, ``""`` and null mean DEFAULT."""
    items = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    if not items:
        raise ConfigError(f"grid {name}: no values (use 'default' to measure the unset value only)")
    out: list[str] = []
    for item in items:
        if isinstance(item, (list, tuple, dict, set)):
            raise ConfigError(f"grid {name}: value {item!r} is a {type(item).__name__}; expected a scalar")
        value = DEFAULT if _is_default(item) else validate_setting(name, item)
        if value not in out:
            out.append(value)
    return tuple(out)


def grid_from(raw: Mapping[str, Any], where: str) -> Grid:
    """A knob -> values mapping with every value normalised; ``where`` names it in messages."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of knob -> values, got {type(raw).__name__}")
    return {str(k): grid_values(str(k), v) for k, v in raw.items()}


def check_knobs(grid: Mapping[str, Any], per_op_grid: Mapping[str, Any], variants: Any,
                fixed_env: Mapping[str, Any]) -> tuple[Grid, dict[str, Grid], tuple[dict[str, str], ...],
                                                       dict[str, str]]:
    """The normalised grid, per-op grids, variants and fixed environment; ConfigError for an unknown knob, a bad
    value (with the valid ones), a knob in two places, or a malformed entry."""
    grid_n = grid_from(grid, "grid")
    if not isinstance(per_op_grid, Mapping):
        raise ConfigError(f"per_op_grid: expected a mapping of op -> grid, got {type(per_op_grid).__name__}")
    per_op = {str(op): grid_from(g, f"per_op_grid.{op}") for op, g in per_op_grid.items()}
    for op, g in per_op.items():
        both = sorted(set(g) & set(grid_n))
        if both:
            raise ConfigError(f"{both[0]} is in both grid and per_op_grid.{op}; keep it in one place")
    if isinstance(variants, (str, Mapping)) or not isinstance(variants, (list, tuple)):
        raise ConfigError(f"variants: expected a list of mappings of knob -> value, got {type(variants).__name__}")
    swept = set(grid_n) | {k for g in per_op.values() for k in g}
    bundles = []
    for i, bundle in enumerate(variants):
        if not isinstance(bundle, Mapping):
            raise ConfigError(f"variants[{i}]: expected a mapping of knob -> value, got {type(bundle).__name__}")
        clash = sorted(set(bundle) & swept)
        if clash:
            raise ConfigError(f"variants[{i}] sets {clash[0]}, which the grid sweeps too")
        bundles.append({str(k): validate_setting(str(k), v) for k, v in bundle.items() if not _is_default(v)})
    if not isinstance(fixed_env, Mapping):
        raise ConfigError(f"fixed_env: expected a mapping of variable -> value, got {type(fixed_env).__name__}")
    return grid_n, per_op, tuple(bundles), validate_env(fixed_env)

