"""A sweep point's own evidence of what NCCL ran, beside its records in ``points/``: the NCCL log of its
verification run (``<id>.verify.log``, at NCCL_DEBUG=INFO) or of its timed run (``<id>.log``), and the algorithms
its check file names (``<id>.check.json``: ``effects.NCCL_ALGO.used``).

Shared by efficiency (:mod:`~collscope.analysis.logged_choices`) and protocol-only tuner rules
(:mod:`~collscope.analysis.recommend.logged`). Unreadable or damaged evidence reads as ``None``: it can only
withhold a fact, never invent one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collscope.collectives.nccl_log.parse import parse_nccl_log
from collscope.collectives.nccl_log.records import NcclLog
from collscope.errors import CollscopeError

__all__ = ["point_logs", "checked_algorithms"]

_MAX_LOG_BYTES = 64 << 20


def _read_log(path: Path) -> NcclLog | None:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_LOG_BYTES:
            return None
        return parse_nccl_log(path.read_text(encoding="utf-8", errors="replace"), str(path))
    except (OSError, CollscopeError):
        return None


def point_logs(points_dir: Path, point_id: str) -> list[NcclLog]:
    """The point's readable NCCL logs, the verification run's first (it logs at INFO; its own, else the one of
    its configuration that its check file names: a configuration is verified once for all its repeats), then the
    timed run's."""
    names = [f"{point_id}.verify.log"]
    configuration = _check_doc(points_dir, point_id).get("configuration")
    if isinstance(configuration, str) and configuration != point_id and "/" not in configuration \
            and not configuration.startswith("."):
        names.append(f"{configuration}.verify.log")
    names.append(f"{point_id}.log")
    logs = (_read_log(points_dir / name) for name in names)
    return [log for log in logs if log is not None]


def _check_doc(points_dir: Path, point_id: str) -> dict[str, Any]:
    try:
        doc = json.loads((points_dir / f"{point_id}.check.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def checked_algorithms(points_dir: Path, point_id: str) -> list[str] | None:
    """The algorithms the point's check file says NCCL used (``effects.NCCL_ALGO.used``); None without any."""
    doc = _check_doc(points_dir, point_id)
    effects = doc.get("effects")
    effect = effects.get("NCCL_ALGO") if isinstance(effects, dict) else None
    used = effect.get("used") if isinstance(effect, dict) else None
    if isinstance(used, list) and used and all(isinstance(u, str) for u in used):
        return list(used)
    return None
