"""Size-0 rows: records of a call that moved no data, kept as records and left out of every statistic.

nccl-tests splits the requested size among the ranks of alltoall, all_gather and reduce_scatter and rounds down
to whole elements per rank, 16 bytes per rank since nccl-tests 2.17 (nccl-tests src/all_gather.cu,
src/alltoall.cu, src/reduce_scatter.cu: getCollByteCount): a ``-b`` smaller than that per rank prints rows
``0  0  float  none  -1  0.42  0.00  0.00 ...``, one per requested size that rounded to 0 (``-b 8`` on 16 ranks
with nccl-tests 2.19: 8, 16, 32, 64 and 128 B all become 0). Such a row is a real measurement of an empty
call (the launch latency), so ingest keeps it as a record of ``size_bytes`` 0. Nothing that divides by the size
or by the bandwidth can use it: busbw is 0.00, its spread over repeats would be (max - min) / 0, a log2 size
axis has no place for it and a line fit of time against size would read its launch time as the latency of a
real transfer. So every statistic of the analysis (the aggregate that fits, spreads, the noise rule, anomalies,
crossovers, plots and recommendations all read) leaves these rows out, and the text of analyze, report and
recommend says how many and why (:func:`size_zero_note`). They are never an anomaly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["size_zero_mask", "without_size_zero", "size_zero_note"]


def size_zero_mask(df: pd.DataFrame) -> np.ndarray:
    """True for the rows of ``df`` (records or an aggregate) whose ``size_bytes`` is 0."""
    if "size_bytes" not in df.columns or df.empty:
        return np.zeros(len(df), dtype=bool)
    sizes = pd.to_numeric(df["size_bytes"], errors="coerce")
    return (sizes == 0).fillna(False).to_numpy(dtype=bool)


def without_size_zero(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without its size-0 rows (``df`` itself when it has none; ``attrs`` kept)."""
    mask = size_zero_mask(df)
    if not mask.any():
        return df
    kept = df[~mask]
    kept.attrs = dict(df.attrs)
    return kept


def size_zero_note(df: pd.DataFrame) -> str | None:
    """One sentence for the text of analyze, report and recommend: how many size-0 records were left out, of
    which ops, and why; None when there are none."""
    mask = size_zero_mask(df)
    count = int(mask.sum())
    if not count:
        return None
    ops = df["op"][mask].astype(str).value_counts().sort_index() if "op" in df.columns else pd.Series(dtype=int)
    per_op = ", ".join(f"{op} {n}" for op, n in ops.items())
    return (f"{count} record(s) of size 0 B ({per_op}) left out of fits, spreads, anomalies, plots and "
            "recommendations: nccl-tests rounds a requested size down to whole elements per rank (16 B per rank "
            "since 2.17), so a size below that runs an empty call (busbw 0); they stay in the records")
