"""A canary's results directory: a sweep results directory (``sweep.json``, ``points/``) plus ``canary.json``.

``canary.json`` says what the two sides were (labels, environment, library directory, command prefix), how the
blocks were planned (fixed, or from a wall-clock budget calibrated on the first block), and which point is which
side of which block. :func:`canary_frame` reads the directory back as the canary frame of the verdict: every
record of :func:`collscope.analysis.load.load_results` with its ``side`` ("A" or "B") and ``block`` (0..n-1).

The side is also in every record: each point's settings carry :data:`SIDE_VAR` (``A`` or ``B``), so two identical
sides (A/A) never share a point id and ``analyze``/``observe ingest`` see two configurations.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from collscope.atomic import write_text_atomic
from collscope.errors import ConfigError, ParseError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CANARY_FILE", "VERDICT_FILE", "SIDE_VAR", "PREFIX_VAR", "SideName", "SideConfig", "PlannedPoint",
           "CanaryMeta", "read_canary", "write_canary", "canary_frame"]

CANARY_FILE = "canary.json"
"""The canary's own file in its results directory."""
VERDICT_FILE = "verdict.json"
"""The verdict (and the why) of the last judgement, beside ``canary.json``."""
SIDE_VAR = "COLLSCOPE_CANARY_SIDE"
"""A point setting naming its side (``A`` or ``B``): it reaches the ranks and every record's settings."""
PREFIX_VAR = "COLLSCOPE_CANARY_PREFIX"
"""A point setting holding the side's command prefix as a JSON list of words (:mod:`.run_prefix` reads it)."""

SideName = Literal["A", "B"]


@dataclass(frozen=True, kw_only=True)
class SideConfig:
    """One side of a canary, as the user gave it."""

    name: SideName
    """``A`` (the baseline: today's configuration) or ``B`` (the candidate)."""
    label: str
    """What reports call it (``--a-label``); default: the side's name."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables this side's ranks get (``--a-env K=V``), over the inherited environment."""
    lib: str | None = None
    """A library directory put first on ``LD_LIBRARY_PATH`` for this side (``--a-lib``): another NCCL build, a
    plugin."""
    cmd_prefix: tuple[str, ...] = ()
    """Words put before this side's per-rank program (``--a-cmd-prefix``, split like a shell but never run by
    one): ``apptainer exec img``, ``numactl -N 0``."""

    def __post_init__(self) -> None:
        if self.name not in ("A", "B"):
            raise ConfigError(f"side {self.name!r} is invalid; valid: A, B")
        for key in (SIDE_VAR, PREFIX_VAR):
            if key in self.env:
                raise ConfigError(f"--{self.name.lower()}-env {key}=...: {key} is the canary's own variable")
        if "LD_LIBRARY_PATH" in self.env and self.lib is not None:
            raise ConfigError(f"side {self.name}: give LD_LIBRARY_PATH through --{self.name.lower()}-env or "
                              f"--{self.name.lower()}-lib, not both")

    def identity(self) -> dict[str, Any]:
        """What the side runs (not its label): part of the sweep id and of every point id."""
        return {"env": dict(sorted(self.env.items())), "lib": self.lib, "cmd_prefix": list(self.cmd_prefix)}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, **self.identity()}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> SideConfig:
        return cls(name=doc["name"], label=str(doc["label"]), env={str(k): str(v) for k, v in doc["env"].items()},
                   lib=doc.get("lib"), cmd_prefix=tuple(str(w) for w in doc.get("cmd_prefix") or ()))


@dataclass(frozen=True)
class PlannedPoint:
    """Which side of which block a point is."""

    point_id: str
    side: SideName
    block: int
    op: str


@dataclass(frozen=True, kw_only=True)
class CanaryMeta:
    """``canary.json``: the two sides, the blocks and the points of each."""

    sweep_id: str
    a: SideConfig
    b: SideConfig
    blocks_planned: int | None
    """Blocks to run; None while a budget's first (calibration) block runs."""
    max_blocks: int
    budget_s: float | None
    """The wall-clock budget (``--budget``); None with ``--blocks``."""
    block_s: float | None
    """The first block's wall clock, the calibration of a budget."""
    max_loss: float
    workload: str | None
    """The workload file (``--workload``); None: one call per measured size."""
    points: tuple[PlannedPoint, ...] = ()

    @property
    def labels(self) -> dict[str, str]:
        return {"A": self.a.label, "B": self.b.label}

    def to_dict(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "sides": {"A": self.a.to_dict(), "B": self.b.to_dict()},
                "blocks_planned": self.blocks_planned, "max_blocks": self.max_blocks, "budget_s": self.budget_s,
                "block_s": self.block_s, "max_loss": self.max_loss, "workload": self.workload,
                "points": [{"point_id": p.point_id, "side": p.side, "block": p.block, "op": p.op}
                           for p in self.points]}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> CanaryMeta:
        sides = doc["sides"]
        return cls(sweep_id=str(doc["sweep_id"]), a=SideConfig.from_dict(sides["A"]),
                   b=SideConfig.from_dict(sides["B"]), blocks_planned=doc.get("blocks_planned"),
                   max_blocks=int(doc["max_blocks"]), budget_s=doc.get("budget_s"), block_s=doc.get("block_s"),
                   max_loss=float(doc["max_loss"]), workload=doc.get("workload"),
                   points=tuple(PlannedPoint(str(p["point_id"]), p["side"], int(p["block"]), str(p["op"]))
                                for p in doc.get("points") or ()))


def read_canary(results_dir: Path | str) -> CanaryMeta:
    """``canary.json`` of ``results_dir``; ParseError naming the file when it is missing or not canary.json."""
    path = Path(results_dir) / CANARY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParseError(str(path), None, "canary.json written by collscope canary (is this a canary's --out?)",
                         found="no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParseError(str(path), None, "a readable canary.json", found=str(exc)) from None
    try:
        doc = json.loads(text)
        return CanaryMeta.from_dict(doc)
    except json.JSONDecodeError as exc:
        raise ParseError(str(path), exc.lineno, "JSON", found=exc.msg) from None
    except (KeyError, TypeError, ValueError, AttributeError, ConfigError) as exc:
        raise ParseError(str(path), None, "canary.json's keys (sweep_id, sides, max_blocks, max_loss, points)",
                         found=f"{type(exc).__name__}: {exc}") from None


def write_canary(results_dir: Path | str, meta: CanaryMeta) -> Path:
    """Write ``canary.json`` atomically (temp file + rename); its path."""
    path = Path(results_dir) / CANARY_FILE
    write_text_atomic(path, json.dumps(meta.to_dict(), indent=2, sort_keys=True) + "\n")
    return path


def canary_frame(results_dir: Path | str) -> pd.DataFrame:
    """The canary frame of ``results_dir``: :func:`~collscope.analysis.load.load_results` with ``side`` and
    ``block`` per record from ``canary.json`` (records of points it does not list are left out)."""
    from collscope.analysis.load import load_results

    meta = read_canary(results_dir)
    frame = load_results(Path(results_dir))
    where = {p.point_id: p for p in meta.points}
    frame = frame[frame["point_id"].isin(list(where))].copy()
    frame["side"] = [where[pid].side for pid in frame["point_id"]]
    frame["block"] = [where[pid].block for pid in frame["point_id"]]
    frame["block"] = frame["block"].astype(int)
    frame.attrs["labels"] = meta.labels
    return frame.reset_index(drop=True)
