"""Which algorithm NCCL ran for a configuration, from a sweep's own evidence (for protocol-only tuner rules).

A config that forces ``NCCL_PROTO`` alone leaves the algorithm to NCCL; a tuner rule needs one. The evidence,
per point of a results directory:

* ``points/<id>.check.json``: ``effects.NCCL_ALGO.used`` when the log echoed NCCL_ALGO;
* else ``points/<id>.verify.log`` (the point's short verification run at NCCL_DEBUG=INFO) or ``points/<id>.log``
  (a timed run that logged at INFO itself), when it holds NCCL's TUNING choice lines: the algorithms NCCL chose
  for the point's collective.

A config gets an algorithm for an op only when all its points agree on exactly one; otherwise none (the tuner
rule then names its assumption). Unreadable or damaged evidence is skipped: it can only withhold a name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from collscope.collectives.nccl_log.parse import parse_nccl_log
from collscope.errors import CollscopeError
from collscope.vocab.nccl import OP_FUNC

__all__ = ["logged_algorithms"]

_MAX_LOG_BYTES = 64 << 20


def _from_check(path: Path) -> set[str] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    effect = doc.get("effects", {}).get("NCCL_ALGO") if isinstance(doc, dict) else None
    used = effect.get("used") if isinstance(effect, dict) else None
    if isinstance(used, list) and used and all(isinstance(u, str) for u in used):
        return set(used)
    return None


def _from_log(path: Path, op: str) -> set[str] | None:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_LOG_BYTES:
            return None
        log = parse_nccl_log(path.read_text(encoding="utf-8", errors="replace"), str(path))
    except (OSError, CollscopeError):
        return None
    func = OP_FUNC.get(op, "").lower()
    used = {algo for (f, algo, _), n in log.algo_proto_calls.items() if n > 0 and (f or "").lower() == func}
    return used or None


def logged_algorithms(directories: Iterable[Path], frame: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Config -> op -> the one algorithm NCCL logged for every point of it that has evidence, over the points of
    ``frame`` (load_results' DataFrame) found in ``directories``; only configs that force NCCL_PROTO and not
    NCCL_ALGO are looked up."""
    if "point_id" not in frame.columns or "NCCL_PROTO" not in frame.columns:
        return {}
    algo = frame["NCCL_ALGO"] if "NCCL_ALGO" in frame.columns else pd.Series(pd.NA, index=frame.index)
    wanted = frame[frame["NCCL_PROTO"].notna() & algo.isna()]
    points = wanted[["config", "op", "point_id"]].astype(str).drop_duplicates()
    seen: dict[tuple[str, str], set[str]] = {}
    dirs = [Path(d) for d in directories if Path(d, "points").is_dir()]
    for config, op, point_id in points.itertuples(index=False):
        used = None
        for root in dirs:
            used = _from_check(root / "points" / f"{point_id}.check.json") or \
                _from_log(root / "points" / f"{point_id}.verify.log", op) or \
                _from_log(root / "points" / f"{point_id}.log", op)
            if used:
                break
        if used is None:
            continue
        seen.setdefault((config, op), set()).update(used)
    out: dict[str, dict[str, str]] = {}
    for (config, op), used in sorted(seen.items()):
        if len(used) == 1:
            out.setdefault(config, {})[op] = next(iter(used))
    return out
