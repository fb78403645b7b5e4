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

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from collscope.analysis.point_evidence import checked_algorithms, point_logs
from collscope.vocab.nccl import OP_FUNC

__all__ = ["logged_algorithms"]

def _from_logs(points_dir: Path, point_id: str, op: str) -> set[str] | None:
    func = OP_FUNC.get(op, "").lower()
    for log in point_logs(points_dir, point_id):
        used = {algo for (f, algo, _), n in log.algo_proto_calls.items() if n > 0 and (f or "").lower() == func}
        if used:
            return used
    return None


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
            checked = checked_algorithms(root / "points", point_id)
            used = set(checked) if checked else _from_logs(root / "points", point_id, op)
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
