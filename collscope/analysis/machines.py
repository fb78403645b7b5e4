"""Which machine each record was measured on, and the rule that records of two machines never pool.

A machine is its cluster name (else its hosts), GPU model and NCCL version (DESIGN: group by hosts or cluster,
GPU, NCCL version); a sweep ran on one machine whichever of its nodes a point's step used. :func:`one_machine` is
the check :func:`collscope.analysis.load_results` runs on every frame it builds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collscope.errors import ConfigError

__all__ = ["machine_of", "machine_labels", "one_machine"]


def machine_of(cluster: Any, hosts: Any, gpu: Any, nccl_version: Any) -> str:
    """A machine's identity in words: its cluster name (else its hosts), GPU model and NCCL version."""
    where = f"cluster {cluster}" if isinstance(cluster, str) and cluster else (
        f"hosts {hosts}" if isinstance(hosts, str) and hosts else "unnamed hosts")
    parts = [where]
    if isinstance(gpu, str) and gpu:
        parts.append(gpu)
    if isinstance(nccl_version, str) and nccl_version:
        parts.append(f"NCCL {nccl_version}")
    return ", ".join(parts)


def _codes(column: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """Integer codes of a column (-1 where missing) and its distinct values: a categorical's own, else factorized."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64), list(uniques)


_KEY_LIMIT = 2**62
"""Largest mixed-radix key :func:`machine_labels` builds before it renumbers (int64 must not overflow)."""


def machine_labels(frame: pd.DataFrame) -> pd.Categorical:
    """Each record's machine in words (:func:`machine_of`), worked out once per distinct identity, not per row.

    A sweep ran on one machine whichever of its nodes a point's step used: the records of a sweep name the
    union of its points' hosts.
    """
    cols = ["cluster", "hosts", "gpu", "nccl_version", "sweep_id"]
    coded = [_codes(frame[c]) if c in frame else (np.full(len(frame), -1, dtype=np.int64), []) for c in cols]
    key, radix = np.zeros(len(frame), dtype=np.int64), 1  # the codes as one mixed-radix integer per record
    for codes, uniques in coded:
        if radix * (len(uniques) + 1) >= _KEY_LIMIT:  # renumber the combinations so far: 0 .. records - 1
            key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
            radix = len(frame)
        key += (codes + 1) * radix
        radix *= len(uniques) + 1
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    idents = [[None if codes[i] < 0 else uniques[codes[i]] for codes, uniques in coded] for i in first.tolist()]
    union: dict[Any, set[str]] = {}
    for _, hosts, _, _, sweep in idents:
        if sweep is not None and isinstance(hosts, str) and hosts:
            union.setdefault(sweep, set()).update(hosts.split(","))
    joined = {k: ",".join(sorted(v)) for k, v in union.items()}
    labels = [machine_of(cluster, joined.get(sweep, hosts) if sweep is not None else hosts, gpu, version)
              for cluster, hosts, gpu, version, sweep in idents]
    names = list(dict.fromkeys(labels[i] for i in np.argsort(first, kind="stable")))  # in the records' order
    number = {name: i for i, name in enumerate(names)}
    label_codes = np.array([number[label] for label in labels], dtype=np.int64)
    return pd.Categorical.from_codes(label_codes[np.asarray(inverse).reshape(-1)], categories=pd.Index(names),
                                     validate=False)


def one_machine(frame: pd.DataFrame, sources: list[Path]) -> None:
    """Records of different machines never pool (DESIGN: group by hosts or cluster, GPU, NCCL version).

    When the same configuration cell (op, config, nranks, nnodes, in-place, size) holds records of two machines,
    analysing them together would take one machine's results for repeats of the other's: a ConfigError names
    each machine and where its records came from. Machines measured on different cells are kept, with a note
    in ``frame.attrs["notes"]``.
    """
    if frame.empty:
        return
    machines = machine_labels(frame)
    distinct = [str(label) for label in machines.categories]
    if len(distinct) < 2:
        return
    cell = ["backend", "op", "config", "nranks", "nnodes", "in_place", "size_bytes"]
    keyed = pd.DataFrame({c: _codes(frame[c])[0] for c in cell}).assign(machine=machines.codes)
    per_cell = keyed.drop_duplicates().groupby(cell, sort=False)["machine"].nunique()
    lines = []
    for code, label in enumerate(distinct):
        mask = machines.codes == code
        origin = sorted({str(v) for v in frame.loc[mask, "source"].dropna().unique()})[:2]
        lines.append(f"  {label}: {int(mask.sum())} records (e.g. {', '.join(origin) or '?'})")
    if (per_cell > 1).any():
        raise ConfigError(f"{', '.join(str(s) for s in sources)}: records from {len(distinct)} different machines "
                          "measure the same configurations; collscope never pools them as repeats of one "
                          "configuration. Analyse each machine's results on its own:\n" + "\n".join(lines))
    frame.attrs["notes"] = [*frame.attrs.get("notes", ()),
                            f"records from {len(distinct)} machines, kept apart (no configuration was measured "
                            "on two of them): " + "; ".join(line.strip() for line in lines)]
