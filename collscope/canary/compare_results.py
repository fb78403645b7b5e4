"""Judging two existing result sets (``collscope canary --from-results A B``): the canary frame of two sides that
were NOT interleaved, and its verdict.

Each side is anything :func:`collscope.analysis.load.load_results` reads (results directories, Measurement JSONL,
nccl-tests text or ``-J`` JSON). A side's **runs** become its blocks, numbered 0..n-1 over its inputs in the order
given:

* a results directory or a JSONL file: one run per ``repeat`` of the records (a sweep's repeats);
* an nccl-tests output: one run per table. Several runs pasted into one file are read as one part each by
  ``load_results`` but come back without a run label, so a run is found here as a row order: a new run starts where
  an (op, size, in-place, dtype) cell that the current run already holds comes again (the next run's first row, or
  the next cycle of ``-N``). The rows of an input keep the order of its text.

Blocks of A and B are paired by index only for the frame's shape: the two sides ran on other nodes or at other
times, so the verdict carries that caveat (:data:`NOT_INTERLEAVED`) and cannot tell the change from a node or
time-of-day effect.

Refusals (ConfigError naming what is missing and what would supply it): the sides measured other ops (``--op``
picks one both measured), other rank or node counts (a change of geometry is not a canary), times reduced
otherwise over ranks (nccl-tests ``-a``), or no common size. A side holding several configurations of one op (a
sweep) is refused: which one is the side is not said. Only the cells (op, dtype, in-place, size) both sides
measured are kept; the ones dropped are named in ``frame.attrs["canary_notes"]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collscope.analysis.formats import size_text
from collscope.analysis.load import load_results
from collscope.analysis.recommend.workload import Workload
from collscope.canary.verdict import Verdict, judge
from collscope.errors import ConfigError

__all__ = ["results_frame", "judge_results", "NOT_INTERLEAVED", "CELL_KEYS"]

NOT_INTERLEAVED = ("the two sides were not interleaved (judged from existing results): they ran on other nodes or "
                   "at other times, so a node or time-of-day difference can explain the change, and the runs were "
                   "not paired (blocks pair A's and B's runs by index only)")
"""The caveat every verdict of existing results carries."""
CELL_KEYS = ("op", "dtype", "in_place", "size_bytes")
"""What one measured cell is: a run holds each at most once; both sides must have measured it to be compared."""


def _side(paths: Sequence[Path | str], side: str, op: str | None, nranks: int | None) -> pd.DataFrame:
    """One side's records with their ``block`` (its runs numbered over its inputs in order)."""
    given = [Path(p) for p in paths]
    if not given:
        raise ConfigError(f"side {side}: no results given; pass at least one results directory or file for side "
                          f"{side}")
    parts = []
    failures: list[dict[str, Any]] = []
    block = 0
    for path in given:
        frame = load_results([path], op=op, nranks=nranks)
        failures.extend(frame.attrs.get("failures", []))
        if frame.empty:
            continue
        runs = _runs(frame, by_repeat_only=path.is_dir())
        frame = frame.assign(block=runs + block, side=side)
        block += int(runs.max()) + 1
        parts.append(frame)
    if not parts:
        raise ConfigError(f"side {side}: no records in {', '.join(map(str, given))}; pass results that hold "
                          "measurements")
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    out.attrs = {"failures": failures}
    return out


def _runs(frame: pd.DataFrame, *, by_repeat_only: bool) -> np.ndarray:
    """0-based run index per row of one input: its repeats in order; within a repeat of a file, a new run where a
    cell the current run already holds comes again (rows in the order of the input's text)."""
    repeat = pd.factorize(frame["repeat"], sort=True)[0]
    if by_repeat_only:
        return np.asarray(repeat, dtype=np.int64)
    cells = pd.factorize(pd.MultiIndex.from_frame(frame[list(CELL_KEYS)].astype(object)))[0]
    runs = np.empty(len(frame), dtype=np.int64)
    run, last_repeat = -1, None
    seen: set[int] = set()
    for i, (rep, cell) in enumerate(zip(repeat.tolist(), cells.tolist(), strict=True)):
        if rep != last_repeat or cell in seen:
            run, seen, last_repeat = run + 1, set(), rep
        seen.add(cell)
        runs[i] = run
    return runs


def _values(frame: pd.DataFrame, column: str) -> list[Any]:
    return sorted({v for v in frame[column].tolist() if not pd.isna(v)}, key=str)


def _check_ops(a: pd.DataFrame, b: pd.DataFrame, op: str | None) -> None:
    ops_a, ops_b = _values(a, "op"), _values(b, "op")
    if ops_a == ops_b:
        return
    both = [o for o in ops_a if o in ops_b]
    way = (f"pass --op {both[0]} (one op both measured: {', '.join(both)})" if both and op is None
           else "pass results of the same op for both sides")
    raise ConfigError(f"the sides measured different ops: A {', '.join(ops_a)}; B {', '.join(ops_b)}; {way}")


def _check_one_config(frame: pd.DataFrame, side: str) -> None:
    for op_name, part in frame.groupby("op", observed=True):
        configs = _values(part, "config")
        if len(configs) > 1:
            raise ConfigError(f"side {side} holds {len(configs)} configurations of {op_name} ({'; '.join(configs)}):"
                              " which one is the side is not said; pass one results directory (or file) per "
                              "configuration")


def _check_geometry(a: pd.DataFrame, b: pd.DataFrame, notes: list[str]) -> None:
    for column, option in (("nranks", "--nranks"), ("nnodes", None)):
        known_a, known_b = _values(a, column), _values(b, column)
        if known_a and known_b and known_a != known_b:
            raise ConfigError(f"the sides ran with other {column}: A {known_a}, B {known_b}; a change of geometry "
                              "is not a canary: compare results of the same rank and node counts")
        for side, known in (("A", known_a), ("B", known_b)):
            if not known:
                supply = f" ({option} N if you know it)" if option else ""
                notes.append(f"side {side}'s {column} is unknown{supply}: that both sides ran the same geometry is "
                             "not checked")
    reduce_a, reduce_b = _values(a, "time_over_ranks"), _values(b, "time_over_ranks")
    if reduce_a and reduce_b and reduce_a != reduce_b:
        raise ConfigError(f"the sides' times combine the ranks otherwise: A {', '.join(reduce_a)}, B "
                          f"{', '.join(reduce_b)} over ranks (nccl-tests -a); compare results run with the same -a")


def _common_cells(a: pd.DataFrame, b: pd.DataFrame, notes: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    keys = list(CELL_KEYS)
    cells_a = a[keys].astype(object).drop_duplicates()
    cells_b = b[keys].astype(object).drop_duplicates()
    both = cells_a.merge(cells_b, on=keys)
    if both.empty:
        sizes_a = ", ".join(size_text(s) for s in sorted(a["size_bytes"].unique().tolist())[:12])
        sizes_b = ", ".join(size_text(s) for s in sorted(b["size_bytes"].unique().tolist())[:12])
        dtypes = f" (dtypes A {_values(a, 'dtype')}, B {_values(b, 'dtype')})"
        raise ConfigError(f"the sides have no common size: A measured {sizes_a}; B {sizes_b}{dtypes}; compare "
                          "results that measured the same sizes (nccl-tests -b/-e/-f) and data type (-d)")
    for side, cells in (("A", cells_a), ("B", cells_b)):
        only = cells.merge(both, on=keys, how="left", indicator=True)
        only = only[only["_merge"] == "left_only"]
        if len(only):
            shown = ", ".join(f"{r.op} {size_text(r.size_bytes)}{'' if r.in_place else ' out-of-place'}"
                              for r in only.head(6).itertuples())
            more = f" and {len(only) - 6} more" if len(only) > 6 else ""
            notes.append(f"{len(only)} cell(s) only side {side} measured, left out: {shown}{more}")
    index = pd.MultiIndex.from_frame(both)
    keep_a = pd.MultiIndex.from_frame(a[keys].astype(object)).isin(index)
    keep_b = pd.MultiIndex.from_frame(b[keys].astype(object)).isin(index)
    return a[keep_a], b[keep_b]


def _categories(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """Columns back to categoricals (concatenating two sides' categoricals of other categories gives plain
    string columns)."""
    for name in columns:
        if name in frame and not isinstance(frame[name].dtype, pd.CategoricalDtype):
            frame[name] = frame[name].astype("category")
    return frame


def results_frame(a_paths: Sequence[Path | str], b_paths: Sequence[Path | str], *, op: str | None = None,
                  nranks: int | None = None) -> pd.DataFrame:
    """The canary frame of two existing result sets: every record of both sides (``load_results`` columns) plus
    ``side`` ("A"/"B") and ``block`` (the run index within its side), restricted to the cells both measured.

    ``op``/``nranks``: for nccl-tests tables that do not say them (``load_results``'s own options: an output
    that names another op is a ParseError); ``op`` also picks one op of results directories or JSONL that hold
    several. ``frame.attrs``: ``canary_notes`` (cells left out, unknown
    geometry), ``failures`` (both sides' failed points), ``interleaved`` False, ``inputs`` {"A": [...], "B":
    [...]}. Raises ConfigError as the module says, ParseError as ``load_results``.
    """
    a = _side(a_paths, "A", op, nranks)
    b = _side(b_paths, "B", op, nranks)
    failures = a.attrs["failures"] + b.attrs["failures"]
    if op is not None:
        a, b = a[a["op"] == op], b[b["op"] == op]
        for side, frame in (("A", a), ("B", b)):
            if frame.empty:
                raise ConfigError(f"side {side} has no {op} record; pass --op with an op both sides measured")
    _check_ops(a, b, op)
    _check_one_config(a, "A")
    _check_one_config(b, "B")
    notes: list[str] = []
    _check_geometry(a, b, notes)
    a, b = _common_cells(a, b, notes)
    categorical = [c for c in a.columns if isinstance(a[c].dtype, pd.CategoricalDtype)]
    frame = pd.concat([a, b], ignore_index=True)
    frame = _categories(frame, categorical)
    frame["side"] = frame["side"].astype(str)
    frame["block"] = frame["block"].astype(np.int64)
    if failures:
        notes.append(f"{len(failures)} failed point(s) without records in the results: not judged")
    frame.attrs = {"failures": failures, "canary_notes": notes, "interleaved": False,
                   "inputs": {"A": [str(p) for p in a_paths], "B": [str(p) for p in b_paths]}}
    return frame


def judge_results(a_paths: Sequence[Path | str], b_paths: Sequence[Path | str], *, workload: Workload | None = None,
                  max_loss: float = 0.01, op: str | None = None, nranks: int | None = None,
                  range_share: float = 0.05, confidence: float = 0.95, n_boot: int = 2000,
                  seed: int = 0) -> Verdict:
    """The verdict of B against A from two existing result sets: :func:`results_frame` judged with
    ``interleaved=False`` (:func:`collscope.canary.verdict.judge`). The verdict's caveats hold
    :data:`NOT_INTERLEAVED` and the frame's notes (cells left out, unknown geometry)."""
    frame = results_frame(a_paths, b_paths, op=op, nranks=nranks)
    verdict = judge(frame, workload, max_loss=max_loss, range_share=range_share, confidence=confidence,
                    n_boot=n_boot, seed=seed, interleaved=False)
    caveats = list(verdict.caveats)
    if not any("interleaved" in c for c in caveats):
        caveats.insert(0, NOT_INTERLEAVED)
    caveats.extend(n for n in frame.attrs["canary_notes"] if n not in caveats)
    return replace(verdict, caveats=tuple(caveats))
