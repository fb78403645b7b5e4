"""SweepSpec -> Plan: validate every value, expand the grid, drop impossible combinations with a reason.

``plan_sweep`` is pure apart from reading ``os.environ`` for a CollNet plugin hint when no ``env`` is given.
Points come out in a stable order: for each repeat, for each op, the all-default point first, then the grid in
the order it was written. Ids come from :func:`~collscope.sweeps.spec.point_id_for`, so the same spec always
gives the same ids. ``load_spec`` reads a YAML file into the same dataclass the presets build.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from collscope.errors import ConfigError
from collscope.sweeps.check import check_spec, grid_from, grid_values
from collscope.sweeps.constraints import PlanContext, collnet_plugin_hint, parse_nccl_version, skip_reason
from collscope.sweeps.presets import PRESETS, preset
from collscope.sweeps.spec import DEFAULT, Plan, Point, SkippedPoint, SweepSpec, point_id_for
from collscope.topo.model import NodeTopology
from collscope.units import parse_size
from collscope.vocab.knobs import requires, validate_env

__all__ = ["plan_sweep", "load_spec", "spec_from_dict", "check_spec", "grid_values", "PRESETS", "preset"]

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
    spec = check_spec(spec)
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


# ---- YAML -----------------------------------------------------------------------------------------------------
_FIELDS = {f.name: f for f in dataclasses.fields(SweepSpec)}


_TEXT = ("name", "engine", "dtype", "backend", "nccl_tests_dir")
_OPTIONAL = ("backend", "nccl_tests_dir")
_INTS = ("iters", "warmup", "nranks", "nnodes", "repeats")
_FLOATS = ("factor", "timeout_s")
_BOOLS = ("check", "collnet_plugin")


def _conv(key: str, value: Any) -> Any:
    """One YAML value -> the field's type; ConfigError names the key and what was expected."""
    if key in _OPTIONAL and value is None:
        return None
    if key in _TEXT:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected text, got {value!r}")
        return value
    if key in _INTS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if key in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if key in _BOOLS:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if key in ("min_bytes", "max_bytes"):
        return _size(key, value)
    if key == "ops":
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"ops: expected an op or a list of ops, got {value!r}")
        return tuple(value)
    if key == "grid":
        return grid_from(value, "grid")
    if key == "per_op_grid":
        if not isinstance(value, dict):
            raise ConfigError(f"per_op_grid: expected a mapping of op -> grid, got {value!r}")
        return {str(op): grid_from(g, f"per_op_grid.{op}") for op, g in value.items()}
    if key == "fixed_env":
        if not isinstance(value, dict):
            raise ConfigError(f"fixed_env: expected a mapping of variable -> value, got {value!r}")
        return validate_env(value)
    if key == "variants":
        if not isinstance(value, list):
            raise ConfigError(f"variants: expected a list of mappings of knob -> value, got {value!r}")
        return tuple(value)
    raise AssertionError(f"no conversion for spec field {key}")


def _size(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"{key}: expected a size such as 8, '1K' or '1M', got {value!r}")
    try:
        return parse_size(str(value))
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def spec_from_dict(data: Mapping[str, Any], *, source: str = "<spec>") -> SweepSpec:
    """A validated SweepSpec from a mapping (the parsed YAML); errors name ``source`` and the key."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of spec keys, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in _FIELDS)
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r}; valid keys: {', '.join(_FIELDS)}")
    kwargs: dict[str, Any] = {}
    try:
        for key, value in data.items():
            kwargs[str(key)] = _conv(str(key), value)
        kwargs.setdefault("name", Path(source).stem or "sweep")
        return check_spec(SweepSpec(**kwargs))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def load_spec(path: str | os.PathLike[str]) -> SweepSpec:
    """Read a YAML sweep spec (``yaml.safe_load``); ConfigError names the file, the key and the valid values."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read the spec: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    return spec_from_dict({} if data is None else data, source=str(p))
