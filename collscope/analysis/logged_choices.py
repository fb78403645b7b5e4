"""What NCCL says it ran, per configuration and size, from a results directory's own evidence.

Per point of the frame (its evidence beside the records: :mod:`~collscope.analysis.point_evidence`):

* the log's TUNING choice lines (NCCL >= 2.21: ``AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE ...``):
  the (algorithm, protocol) for each size the log names; a size logged with several choices (ranks or calls
  that differ) keeps the one with the most lines;
* else ``points/<id>.check.json``: ``effects.NCCL_ALGO.used`` when it names exactly one algorithm (the protocol
  is then left to NCCL's model, ``""``).

The result feeds :func:`~.compare.analyze` (``logged=``). Unreadable or damaged evidence is skipped: it can only
withhold a fact, never invent one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from collscope.analysis.efficiency import Logged
from collscope.analysis.point_evidence import checked_algorithms, point_logs
from collscope.collectives.nccl_log.choices import SizeChoice
from collscope.vocab.nccl import OP_FUNC

__all__ = ["logged_choices"]

def _log_choices(points_dir: Path, point_id: str, op: str) -> list[SizeChoice]:
    """The choices for ``op`` of the first of the point's logs that has any, the most-logged one per size."""
    func = OP_FUNC.get(op, "").lower()
    for log in point_logs(points_dir, point_id):
        best: dict[tuple[int, bool], SizeChoice] = {}
        for c in log.size_choices:
            if c.op is not None and c.op.lower() != func:
                continue
            key = (c.size_bytes, c.counts_one_rank)
            if key not in best or c.calls > best[key].calls:
                best[key] = c
        if best:
            return list(best.values())
    return []


def _choice_at(choices: list[SizeChoice], size_bytes: int, nranks: int) -> tuple[str, str] | None:
    """The (algorithm, protocol) logged for a record's size: the log's size counted as the records count it
    (:meth:`SizeChoice.op_size_bytes`: one rank's share of an all_gather in NCCL >= 2.24 lines, the total before)."""
    for c in choices:
        if c.op_size_bytes(nranks if nranks > 0 else None) == size_bytes:
            return c.algorithm, c.protocol
    return None


def _check_algorithm(points_dir: Path, point_id: str) -> str | None:
    used = checked_algorithms(points_dir, point_id)
    return used[0] if used is not None and len(used) == 1 else None


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
            choices = _log_choices(root, str(point_id), str(op))
            algo = None if choices else _check_algorithm(root, str(point_id))
            if not choices and algo is None:
                continue
            for size, nranks in zip(group["size_bytes"], group["nranks"], strict=True):
                size = int(size)
                found = _choice_at(choices, size, int(nranks))
                if found is None and algo is not None:
                    found = (algo, "")
                if found is not None:
                    out[(str(config), str(op), size)] = found
            break
    return out
