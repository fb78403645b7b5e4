"""The data of a sweep: what to measure (SweepSpec), the planned points, and the points skipped.

Pure data, no I/O: ``specfile.py`` reads a spec file, ``plan.py`` turns a spec into a Plan, ``launchers.py``
turns a point into argv + env, ``runner.py`` runs points and ``store.py`` keeps their records.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from collscope.collectives.measure import MeasureSpec
from collscope.errors import ConfigError
from collscope.sweeps.check import check_knobs
from collscope.vocab.configs import DEFAULT
from collscope.vocab.ops import SWEEP_OPS
from collscope.vocab.secrets import redact_env

__all__ = ["SweepSpec", "SPEC_KEYS", "EngineName", "ENGINES", "Backend", "BACKENDS", "Point", "SkippedPoint",
           "Plan", "point_id_for", "DEFAULT"]

EngineName = Literal["mpi", "torch", "nccl-tests"]
ENGINES: tuple[str, ...] = get_args(EngineName)
Backend = Literal["gloo", "nccl"]
BACKENDS: tuple[str, ...] = get_args(Backend)

SPEC_KEYS = ("name", "engine", "backend", "ops", "min_bytes", "max_bytes", "factor", "iters", "warmup", "check",
             "dtype", "nranks", "nnodes", "grid", "per_op_grid", "fixed_env", "repeats", "timeout_s",
             "nccl_tests_dir", "variants", "collnet_plugin")
"""The keys of a spec file (every SweepSpec field), in the order messages list them and ``to_dict`` writes them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepSpec(MeasureSpec):
    """What a sweep measures. Loaded from YAML/JSON or built by a preset; CLI options override fields through
    ``dataclasses.replace``, which validates again.

    The sizes, iterations, dtype and check are :class:`~collscope.collectives.measure.MeasureSpec`'s fields.
    Construction validates every field and every knob value (ConfigError with the bad value and the valid ones)
    and keeps knob values normalised (``ring`` -> ``4`` for an Open MPI algorithm, ``tree`` -> ``Tree``), so two
    spellings of one sweep are equal and get the same sweep id."""

    name: str
    """Short name, used in the results directory's sweep.json and in point ids."""
    engine: EngineName = "mpi"
    """Which engine measures each point: ``mpi`` (mpi4py), ``torch`` (torch.distributed) or ``nccl-tests``."""
    backend: Backend | None = None
    """torch backend (``gloo`` or ``nccl``); None for the other engines."""
    ops: tuple[str, ...] = ("all_reduce",)
    """Collectives, as in the Measurement record, each at most once: :data:`~collscope.vocab.ops.SweepOp`'s names
    (typed ``str`` so that op-keyed dicts downstream stay ``dict[str, ...]``)."""
    nranks: int = 2
    """Processes per point, over all nodes; a multiple of ``nnodes``."""
    nnodes: int = 1
    """Nodes per point (inter-node knobs are skipped on one node)."""
    grid: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Knob name -> values to try; :data:`DEFAULT` (``""``) means unset. The all-default point is always planned."""
    per_op_grid: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    """Op -> extra knob grid that applies to that op only (e.g. Open MPI's allgather algorithm ids)."""
    fixed_env: dict[str, str] = field(default_factory=dict)
    """Variables set for every point (e.g. ``NCCL_DEBUG=INFO``); part of each point's settings."""
    repeats: int = 3
    """How many times each point is measured (each repeat is a point of its own, ``repeat`` 0..n-1). 3 by default:
    the noise rule of the analysis (:mod:`collscope.analysis.noise`) claims no difference on fewer."""
    timeout_s: float = 600.0
    """Wall-clock limit of one point's launch; the whole process group is killed past it."""
    nccl_tests_dir: str | None = None
    """Directory of the nccl-tests binaries (engine nccl-tests); None: ``NCCL_TESTS_HOME`` or PATH."""
    variants: tuple[dict[str, str], ...] = ()
    """Bundles of settings that go together (e.g. ``NCCL_MIN_CTAS=NCCL_MAX_CTAS=8``), each crossed with the grid;
    an empty bundle stands for "no bundle". Empty tuple: the grid alone."""
    collnet_plugin: bool = False
    """A CollNet (SHARP) plugin is installed where the sweep runs; without it CollNet points are skipped."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"name must be a non-empty text, got {self.name!r}")
        if self.engine not in ENGINES:
            raise ConfigError(f"engine {self.engine!r} is unknown; valid: {', '.join(ENGINES)}")
        if self.backend is not None and self.backend not in BACKENDS:
            raise ConfigError(f"backend {self.backend!r} is unknown; valid: {', '.join(BACKENDS)} (engine torch), "
                              "or null")
        self._check_ops()
        self.check_measure()
        for name, value, low in (("nranks", self.nranks, 1), ("nnodes", self.nnodes, 1),
                                 ("repeats", self.repeats, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.nnodes > self.nranks:
            raise ConfigError(f"nranks={self.nranks}, nnodes={self.nnodes} is invalid; valid: 1 <= nnodes <= nranks")
        if self.nranks % self.nnodes:
            raise ConfigError(f"nranks={self.nranks} is not a multiple of nnodes={self.nnodes}")
        if not self.timeout_s > 0:
            raise ConfigError(f"timeout_s must be positive, got {self.timeout_s}")
        if not isinstance(self.collnet_plugin, bool):
            raise ConfigError(f"collnet_plugin must be true or false, got {self.collnet_plugin!r}")
        for op in self.per_op_grid:
            if op not in self.ops:
                raise ConfigError(f"per_op_grid names op {op!r}, which is not in ops ({', '.join(self.ops)})")
        grid, per_op, variants, fixed = check_knobs(self.grid, self.per_op_grid, self.variants, self.fixed_env)
        # Frozen: the normalised values replace the given ones once, here.
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "per_op_grid", per_op)
        object.__setattr__(self, "variants", variants)
        object.__setattr__(self, "fixed_env", fixed)

    def _check_ops(self) -> None:
        if isinstance(self.ops, str) or not self.ops:
            raise ConfigError(f"ops must be a non-empty list of ops, got {self.ops!r}; valid: "
                              f"{', '.join(SWEEP_OPS)}")
        for op in self.ops:
            if op not in SWEEP_OPS:
                raise ConfigError(f"unknown op {op!r}; valid: {', '.join(SWEEP_OPS)}")
        if len(set(self.ops)) != len(self.ops):
            raise ConfigError(f"ops lists an op twice: {', '.join(self.ops)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (lists for tuples), keys in :data:`SPEC_KEYS` order; the input of the sweep id."""
        return {key: _plain(getattr(self, key)) for key in SPEC_KEYS}

    def recorded_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` as ``sweep.json`` records it: the value of a secret in ``fixed_env``
        (``NCCL_IB_PASSWORD``, ``*TOKEN*``: :mod:`collscope.vocab.secrets`) redacted. The launched ranks still get
        the real value, and the sweep id is still made from it."""
        doc = self.to_dict()
        doc["fixed_env"] = redact_env(doc["fixed_env"])
        return doc


if set(SPEC_KEYS) != {f.name for f in fields(SweepSpec)}:
    raise AssertionError("SPEC_KEYS and the SweepSpec fields disagree")


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


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
