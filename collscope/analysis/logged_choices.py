"""What NCCL says it ran, per configuration and size, from a results directory's own evidence.

Per point of the frame (``points/<id>.log`` beside the records):

* the log's TUNING choice lines (NCCL >= 2.21: ``AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE ...``):
  the (algorithm, protocol) for each size the log names; a size logged with several choices (ranks or calls
  that differ) keeps the one with the most lines;
* else ``points/<id>.check.json``: ``effects.NCCL_ALGO.used`` when it names exactly one algorithm (the protocol
  is then left to NCCL's model, ``""``).

The result feeds :func:`~.compare.analyze` (``logged=``). Unreadable or damaged evidence is skipped: it can only
withhold a fact, never invent one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from collscope.analysis.efficiency import Logged
from collscope.collectives.nccl_log.parse import parse_nccl_log
from collscope.errors import CollscopeError
from collscope.vocab.nccl import OP_FUNC

__all__ = ["logged_choices"]

_MAX_LOG_BYTES = 64 << 20
_SIZE_SCALED = frozenset({"all_gather", "reduce_scatter"})


def _log_choices(path: Path, op: str) -> dict[int, tuple[str, str]]:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_LOG_BYTES:
            return {}
        log = parse_nccl_log(path.read_text(encoding="utf-8", errors="replace"), str(path))
    except (OSError, CollscopeError):
        return {}
    func = OP_FUNC.get(op, "").lower()
    best: dict[int, tuple[int, str, str]] = {}
    for c in log.size_choices:
        if c.op is not None and c.op.lower() != func:
            continue
        if c.size_bytes not in best or c.calls > best[c.size_bytes][0]:
            best[c.size_bytes] = (c.calls, c.algorithm, c.protocol)
    return {size: (algo, proto) for size, (_, algo, proto) in best.items()}


def _check_algorithm(path: Path) -> str | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    effect = doc.get("effects", {}).get("NCCL_ALGO") if isinstance(doc, dict) else None
    used = effect.get("used") if isinstance(effect, dict) else None
    if isinstance(used, list) and len(used) == 1 and isinstance(used[0], str):
        return used[0]
    return None


def logged_choices(directories: Iterable[Path | str], frame: pd.DataFrame) -> Logged:
    """(config, op, size_bytes) -> (algorithm, protocol or ``""``) for the points of ``frame`` (load_results'
    DataFrame) found in ``directories`` (module doc)."""
    if frame.empty or "point_id" not in frame.columns:
        return {}
    dirs = [Path(d) for d in directories if Path(d, "points").is_dir()]
    if not dirs:
        return {}
    cells = frame[["config", "op", "point_id", "size_bytes", "nranks"]].dropna(subset=["point_id"])
    out: dict[tuple[str, str, int], tuple[str, str]] = {}
    for (config, op, point_id), group in cells.groupby(["config", "op", "point_id"], observed=True):
        points = [d / "points" for d in dirs if (d / "points" / f"{point_id}.jsonl").is_file()] or \
            [d / "points" for d in dirs]
        for root in points:
            choices = _log_choices(root / f"{point_id}.log", str(op))
            algo = None if choices else _check_algorithm(root / f"{point_id}.check.json")
            if not choices and algo is None:
                continue
            for size, nranks in zip(group["size_bytes"], group["nranks"], strict=True):
                size = int(size)
                found = choices.get(size)
                if found is None and str(op) in _SIZE_SCALED and int(nranks) > 0:
                    found = choices.get(size // int(nranks))
                if found is None and algo is not None:
                    found = (algo, "")
                if found is not None:
                    out[(str(config), str(op), size)] = found
            break
    return out
