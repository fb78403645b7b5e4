"""Structural and value checks of a SweepSpec, shared by presets, YAML loading and planning."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, get_args

from collscope.errors import ConfigError
from collscope.sweeps.spec import DEFAULT, EngineName, SweepSpec
from collscope.vocab.knobs import validate_env, validate_setting

__all__ = ["check_spec", "grid_values", "grid_from", "KNOWN_OPS"]

KNOWN_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce")
_ENGINES: tuple[str, ...] = get_args(EngineName)


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


def grid_from(raw: Mapping[str, Any], where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of knob -> values, got {type(raw).__name__}")
    return {str(k): grid_values(str(k), v) for k, v in raw.items()}


def check_spec(spec: SweepSpec) -> SweepSpec:
    """Validate a spec's structure and every knob value; returns an equal spec with normalised values."""
    if spec.engine not in _ENGINES:
        raise ConfigError(f"engine {spec.engine!r} is unknown; valid: {', '.join(_ENGINES)}")
    if not spec.ops:
        raise ConfigError("ops is empty; give at least one of " + ", ".join(KNOWN_OPS))
    for op in spec.ops:
        if op not in KNOWN_OPS:
            raise ConfigError(f"unknown op {op!r}; valid: {', '.join(KNOWN_OPS)}")
    if len(set(spec.ops)) != len(spec.ops):
        raise ConfigError(f"ops lists an op twice: {', '.join(spec.ops)}")
    if not 0 < spec.min_bytes <= spec.max_bytes:
        raise ConfigError(f"sizes must satisfy 0 < min_bytes <= max_bytes, got {spec.min_bytes}..{spec.max_bytes}")
    if spec.factor <= 1:
        raise ConfigError(f"factor must be > 1, got {spec.factor}")
    for field, value, low in (("iters", spec.iters, 1), ("warmup", spec.warmup, 0), ("nranks", spec.nranks, 1),
                              ("nnodes", spec.nnodes, 1), ("repeats", spec.repeats, 1)):
        if value < low:
            raise ConfigError(f"{field} must be >= {low}, got {value}")
    if spec.nranks % spec.nnodes:
        raise ConfigError(f"nranks={spec.nranks} is not a multiple of nnodes={spec.nnodes}")
    if spec.timeout_s <= 0:
        raise ConfigError(f"timeout_s must be positive, got {spec.timeout_s}")
    for op in spec.per_op_grid:
        if op not in spec.ops:
            raise ConfigError(f"per_op_grid names op {op!r}, which is not in ops ({', '.join(spec.ops)})")
    grid = grid_from(spec.grid, "grid")
    per_op = {op: grid_from(g, f"per_op_grid.{op}") for op, g in spec.per_op_grid.items()}
    for op, g in per_op.items():
        both = sorted(set(g) & set(grid))
        if both:
            raise ConfigError(f"{both[0]} is in both grid and per_op_grid.{op}; keep it in one place")
    variants = []
    for i, bundle in enumerate(spec.variants):
        if not isinstance(bundle, Mapping):
            raise ConfigError(f"variants[{i}]: expected a mapping of knob -> value, got {type(bundle).__name__}")
        clash = sorted(set(bundle) & (set(grid) | {k for g in per_op.values() for k in g}))
        if clash:
            raise ConfigError(f"variants[{i}] sets {clash[0]}, which the grid sweeps too")
        variants.append({str(k): validate_setting(str(k), v) for k, v in bundle.items() if not _is_default(v)})
    fixed = validate_env(spec.fixed_env)
    return dataclasses.replace(spec, grid=grid, per_op_grid=per_op, variants=tuple(variants), fixed_env=fixed)
