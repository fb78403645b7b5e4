"""The data of a sweep: what to measure (SweepSpec), the planned points, and the points skipped.

Pure data, no I/O: ``plan.py`` turns a spec into a Plan, ``launchers.py`` turns a point into argv + env,
``runner.py`` runs points and ``store.py`` keeps their records.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from collscope.vocab.configs import DEFAULT

__all__ = ["SweepSpec", "Point", "SkippedPoint", "Plan", "point_id_for", "DEFAULT"]

EngineName = Literal["mpi", "torch", "nccl-tests"]

"""A grid value meaning "leave this variable unset" (NCCL's/Open MPI's own choice)."""


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """What a sweep measures. Loaded from YAML or built by a preset; CLI options override fields."""

    name: str
    """Short name, used in the results directory's sweep.json and in point ids."""
    engine: EngineName = "mpi"
    """Which engine measures each point: ``mpi`` (mpi4py), ``torch`` (torch.distributed) or ``nccl-tests``."""
    backend: str | None = None
    """torch backend (``gloo`` or ``nccl``); None for the other engines."""
    ops: tuple[str, ...] = ("all_reduce",)
    """Collectives, as in the Measurement record (``all_reduce``, ``all_gather``, ...)."""
    min_bytes: int = 8
    max_bytes: int = 1 << 20
    factor: float = 2.0
    iters: int = 20
    warmup: int = 5
    check: bool = True
    """Verify result values; a point with wrong values is recorded as a failure."""
    dtype: str = "float32"
    nranks: int = 2
    nnodes: int = 1
    grid: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Knob name -> values to try; :data:`DEFAULT` (``""``) means unset. The all-default point is always planned."""
    per_op_grid: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    """Op -> extra knob grid that applies to that op only (e.g. Open MPI's allgather algorithm ids)."""
    fixed_env: dict[str, str] = field(default_factory=dict)
    """Variables set for every point (e.g. ``NCCL_DEBUG=INFO``); part of each point's settings."""
    repeats: int = 1
    """How many times each point is measured (each repeat is a point of its own, ``repeat`` 0..n-1)."""
    timeout_s: float = 600.0
    """Wall-clock limit of one point's launch; the whole process group is killed past it."""
    nccl_tests_dir: str | None = None
    variants: tuple[dict[str, str], ...] = ()
    """Bundles of settings that go together (e.g. ``NCCL_MIN_CTAS=NCCL_MAX_CTAS=8``), each crossed with the grid;
    an empty bundle stands for "no bundle". Empty tuple: the grid alone."""
    collnet_plugin: bool = False
    """A CollNet (SHARP) plugin is installed where the sweep runs; without it CollNet points are skipped."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "engine": self.engine, "backend": self.backend, "ops": list(self.ops),
            "min_bytes": self.min_bytes, "max_bytes": self.max_bytes, "factor": self.factor, "iters": self.iters,
            "warmup": self.warmup, "check": self.check, "dtype": self.dtype, "nranks": self.nranks,
            "nnodes": self.nnodes, "grid": {k: list(v) for k, v in self.grid.items()},
            "per_op_grid": {op: {k: list(v) for k, v in g.items()} for op, g in self.per_op_grid.items()},
            "fixed_env": dict(self.fixed_env), "repeats": self.repeats, "timeout_s": self.timeout_s,
            "nccl_tests_dir": self.nccl_tests_dir, "variants": [dict(v) for v in self.variants],
            "collnet_plugin": self.collnet_plugin,
        }


@dataclass(frozen=True)
class Point:
    """One launch: an op, the knob settings that are forced (unset knobs are absent), and a repeat index."""

    point_id: str
    op: str
    settings: dict[str, str]
    """Forced knobs only (env var -> value); empty for the default point."""
    repeat: int = 0
    sizes: tuple[int, ...] | None = None
    """Explicit sizes of this launch (adaptive sweeps); None: the spec's ladder (min..max by factor)."""

    @property
    def is_default(self) -> bool:
        return not self.settings

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"point_id": self.point_id, "op": self.op, "settings": dict(self.settings),
                               "repeat": self.repeat}
        if self.sizes is not None:
            out["sizes"] = list(self.sizes)
        return out


@dataclass(frozen=True)
class SkippedPoint:
    """A grid combination that is not run, and why (an impossible combination, not a failure)."""

    op: str
    settings: dict[str, str]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "settings": dict(self.settings), "reason": self.reason}


@dataclass(frozen=True)
class Plan:
    spec: SweepSpec
    points: tuple[Point, ...]
    skipped: tuple[SkippedPoint, ...] = ()
    strategy: dict[str, Any] | None = None
    """How the points were chosen beyond the grid (``{"strategy": "adaptive", "min_gain": ...}``); None: the grid.
    Part of the sweep id, so that a grid and an adaptive sweep never share a results directory."""

    @property
    def sweep_id(self) -> str:
        """Stable id of the whole plan: the same spec (and strategy) gives the same id."""
        doc = self.spec.to_dict() if self.strategy is None else {**self.spec.to_dict(), "strategy": self.strategy}
        blob = json.dumps(doc, sort_keys=True)
        return f"{_slug(self.spec.name)}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sweep_id": self.sweep_id, "points": [p.to_dict() for p in self.points],
                               "skipped": [s.to_dict() for s in self.skipped]}
        if self.strategy is not None:
            out["strategy"] = dict(self.strategy)
        return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:40] or "x"


def point_id_for(spec: SweepSpec, op: str, settings: dict[str, str], repeat: int, *,
                 sizes: tuple[int, ...] | None = None, round_index: int | None = None) -> str:
    """A stable, file-name-safe id: readable prefix + hash of everything that defines the measurement.

    ``sizes`` and ``round_index`` (adaptive sweeps) enter the hash and the name (``-k<round>``) only when given,
    so grid ids never change.
    """
    what: dict[str, Any] = {
        "engine": spec.engine, "backend": spec.backend, "op": op, "settings": dict(sorted(settings.items())),
        "repeat": repeat, "sizes": [spec.min_bytes, spec.max_bytes, spec.factor], "dtype": spec.dtype,
        "iters": spec.iters, "warmup": spec.warmup, "nranks": spec.nranks, "nnodes": spec.nnodes,
        "fixed_env": dict(sorted(spec.fixed_env.items())),
    }
    if sizes is not None:
        what["point_sizes"] = list(sizes)
    if round_index is not None:
        what["round"] = round_index
    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]
    label = "default" if not settings else "-".join(
        f"{_short(k)}{_slug(v)}" for k, v in sorted(settings.items()))[:48]
    stage = "" if round_index is None else f"-k{round_index}"
    return f"{_slug(op)}-{label}-r{repeat}{stage}-{digest}"


def _short(name: str) -> str:
    parts = [p for p in name.lower().split("_") if p not in ("nccl", "ompi", "mca", "coll", "tuned")]
    return "".join(p[:4] for p in parts) or "k"
