"""Which configuration to use per collective and message-size range, decided from measured sweeps.

Input: the DataFrame of :func:`collscope.analysis.load.load_results` (one row per record, a ``config`` column
holding ``"default"`` or the canonical ``K=V;K=V`` string, one column per knob, ``applied`` and ``failure``).

The rules, in the order they are applied:

* **Groups.** Records are compared within one ``(backend, op, nranks, nnodes)`` group, and only records of
  one buffer mode: ``in_place`` chosen by the caller, else out-of-place when both were measured (nccl-tests
  prints both; the in-place ones are then ignored and a note says so).
* **Cells.** A cell is one ``(config, size_bytes)`` of a group. Its statistic is the **median busbw over its
  repeats** and its **spread is the relative range** ``(max - min) / median``: with the 3-5 repeats sweeps
  take, an IQR would be as wide as the range or unstable, and the range is the conservative choice. One
  repeat gives spread 0; the evidence then says "1 repeat" so that nobody mistakes it for a quiet machine.
* **Exclusions.** A cell with any row ``ok == False`` (wrong values, out of bounds), ``applied == False``
  (NCCL did not run the forced setting) or without busbw is excluded whole, reported with the reason and
  never wins. The same holds for a default cell: that size then has no baseline.
* **Comparable.** Configurations measured on other hosts than the ones they are compared with, or one
  configuration from two inputs, are refused (:mod:`.refusals`): a node or an input difference is no setting
  difference.
* **Baseline.** The default (``config == "default"``, nothing forced) of the same group and size. A group
  without any default cell gets no recommendation (a note says so); a size without one breaks ranges.
* **Winning a size** (:mod:`collscope.analysis.noise`, the one noise rule): ``gain = median / default_median - 1``;
  a candidate wins when both cells have >= 3 repeats, ``gain > min_gain`` and ``gain > spread + default
  spread`` (the combined noise), at >= 2 adjacent measured sizes (a lone winning size is ``single size``).
  The winner of a size is the winning candidate with the highest median, else the default.
* **Ranges.** Adjacent measured sizes with the same winner merge; a range's edges are **measured sizes**
  (inclusive), never midpoints, so a range covers only sizes between evidence for it. Ranges of one group
  are disjoint by construction; the gaps between them are left to NCCL's own choice.
* **Workload.** Settings are judged by the **time they save on a workload**, never by a mean of per-size
  percentages: ``--workload F`` (the job's calls per step), else one call per measured size, so that the
  large sizes weigh by their time (:mod:`.workload`, :mod:`.timing`).
* **Environment choice** (env variables apply to all sizes). Per ``(backend, op)``: among the configs with a
  usable cell at *every* size where the default was measured (in every group of that op), the one that
  saves the most time per step on the workload, provided it saves time, wins at least one range beyond noise,
  and loses beyond noise at no measured size carrying more than 5% of the workload's time
  (:data:`SHARE_LIMIT`). Otherwise no single setting fits every size: the tuner rules (per size range) do.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from collscope.analysis.noise import beyond_noise, cell_verdict
from collscope.analysis.recommend.choice import SHARE_LIMIT, env_choices
from collscope.analysis.recommend.ranges import merge_ranges
from collscope.analysis.recommend.records import (
    DEFAULT_CONFIG,
    Candidate,
    CellStat,
    EnvCandidate,
    EnvChoice,
    Excluded,
    GroupKey,
    GroupResult,
    Recommendation,
    RecommendOptions,
    SizeRange,
    SizeResult,
    Verdict,
)
from collscope.analysis.recommend.refusals import refuse_incomparable
from collscope.analysis.recommend.timing import evaluate
from collscope.analysis.recommend.tuner import tuner_rules
from collscope.analysis.recommend.workload import Workload, per_measured_size
from collscope.analysis.size_zero import size_zero_note, without_size_zero
from collscope.errors import ConfigError
from collscope.units import format_size
from collscope.vocab.knobs import KNOBS

__all__ = [
    "RecommendOptions", "CellStat", "Candidate", "SizeResult", "SizeRange", "GroupKey", "GroupResult",
    "Excluded", "EnvCandidate", "EnvChoice", "Recommendation", "recommend", "render_json", "DEFAULT_CONFIG",
    "REQUIRED_COLUMNS", "SHARE_LIMIT",
]


REQUIRED_COLUMNS = ("backend", "op", "size_bytes", "nranks", "nnodes", "busbw_gbps", "ok", "in_place", "config")
_RECORD_COLUMNS = frozenset({
    "engine", "backend", "op", "size_bytes", "count", "dtype", "redop", "root", "in_place", "nranks", "nnodes",
    "time_us", "algbw_gbps", "busbw_gbps", "wrong", "error", "ok", "iters", "warmup", "repeat", "point_id",
    "sweep_id", "nccl_version", "engine_version", "source", "timestamp", "hosts", "config", "applied", "failure",
    "settings", "input",
})
_KNOB_NAME = re.compile(r"^(NCCL|OMPI_MCA)_[A-Za-z0-9_]+$")


# ---- the analysis -----------------------------------------------------------------------------------------
def recommend(frame: pd.DataFrame, options: RecommendOptions | None = None, *, workload: Workload | None = None,
              algorithms: dict[str, dict[str, str]] | None = None) -> Recommendation:
    """Compare every config with the default per group and size; see the module docstring for the rules.

    ``workload``: the job's calls per step (None: one call per measured size); ``algorithms``: config -> op ->
    the algorithm NCCL logged for it (:func:`.logged.logged_algorithms`), used by protocol-only tuner rules."""
    opts = options or RecommendOptions()
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(f"the results lack column(s) {', '.join(missing)}; expected the DataFrame of "
                          "collscope.analysis.load.load_results")
    if frame.empty:
        raise ConfigError("no records to recommend from")
    notes: list[str] = list(frame.attrs.get("notes", ()))  # what the readers said of the inputs (load_results)
    work = _select(frame, opts, notes)
    refuse_incomparable(work)  # a comparison of nodes or of inputs, not of settings
    settings = _settings_by_config(work)
    cells, excluded = _cells(work)
    groups = tuple(_group_result(key, by_size, opts.min_gain, notes)
                   for key, by_size in sorted(cells.items(), key=lambda kv: _key_order(kv[0])))
    if workload is None:
        workload = per_measured_size([(g.key.op, g.key.nranks, [s.size_bytes for s in g.sizes if s.baseline])
                                      for g in groups])
    else:
        notes.extend(_coverage_notes(groups, workload))
    env, env_candidates = env_choices(groups, settings, opts.min_gain, workload)
    return Recommendation(
        options=opts, groups=groups, env=env, env_candidates=env_candidates, excluded=tuple(excluded),
        settings=settings, notes=tuple(notes), sweep_ids=_distinct(work, "sweep_id"),
        nccl_versions=_distinct(work, "nccl_version"), ops=tuple(sorted({k.op for k in cells})),
        failed_points=_failed_points(frame, opts), workload=workload, algorithms=dict(algorithms or {}))


def _coverage_notes(groups: tuple[GroupResult, ...], workload: Workload) -> list[str]:
    """What of a workload file the measurements do not cover, and which sizes were interpolated."""
    notes: list[str] = []
    keys = {(g.key.op, g.key.nranks) for g in groups}
    for op, nranks in sorted({(e.op, e.nranks) for e in workload.entries} - keys):
        n = len(workload.for_group(op, nranks))
        notes.append(f"workload {workload.source}: {n} entr{'y' if n == 1 else 'ies'} of {op} on {nranks} ranks "
                     "not covered: no such measurements")
    for g in groups:
        entries = workload.for_group(g.key.op, g.key.nranks)
        if not entries or not g.default_measured:
            continue
        ev = evaluate(g, entries, DEFAULT_CONFIG)
        measured = [s.size_bytes for s in g.sizes if s.baseline is not None]
        if ev.interpolated:
            notes.append(f"workload {workload.source}: {ev.interpolated} {g.key.label} size(s) between measured "
                         "sizes: time interpolated linearly in log2(size) between the two measured neighbours")
        if ev.uncovered:
            shown = ", ".join(f"{format_size(e.size_bytes)} x {e.calls}" for e in ev.uncovered[:5])
            more = "" if len(ev.uncovered) <= 5 else f" and {len(ev.uncovered) - 5} more"
            notes.append(f"workload {workload.source}: {len(ev.uncovered)} {g.key.label} size(s) not covered "
                         f"(outside the measured {min(measured)}..{max(measured)} B or next to a size without a "
                         f"usable default): {shown}{more}; they count in no time figure")
    return notes


def _failed_points(frame: pd.DataFrame, opts: RecommendOptions) -> tuple[dict[str, Any], ...]:
    lost = frame.attrs.get("failures") or []
    return tuple({k: (None if v is None else str(v)) for k, v in entry.items()} for entry in lost
                 if isinstance(entry, dict) and (opts.op is None or entry.get("op") in (None, opts.op)))


def render_json(rec: Recommendation) -> str:
    """Everything as one JSON document: :meth:`Recommendation.to_dict` plus the tuner rules it yields."""
    rules, skipped = tuner_rules(rec)
    doc = {**rec.to_dict(), "tuner_rules": [r.line() for r in rules], "tuner_not_expressible": skipped}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def _select(frame: pd.DataFrame, opts: RecommendOptions, notes: list[str]) -> pd.DataFrame:
    work = frame
    zero = size_zero_note(work)
    if zero:  # records of an empty call: no busbw to compare (analysis.size_zero)
        notes.append(zero)
        work = without_size_zero(work)
    if opts.op is not None:
        ops = sorted(str(o) for o in frame["op"].dropna().unique())
        if opts.op not in ops:
            raise ConfigError(f"no records of op {opts.op!r}; ops in the results: {', '.join(ops) or 'none'}")
        work = work[work["op"] == opts.op]
    modes = _true(work["in_place"])
    if opts.in_place is None:
        if modes.any() and (~modes).any():
            notes.append(f"{int(modes.sum())} in-place record(s) ignored: out-of-place and in-place were both "
                         "measured; `collscope recommend --in-place` uses those instead")
            work = work[~modes]
    else:
        kept = work[modes] if opts.in_place else work[~modes]
        if kept.empty:
            mode = "in-place" if opts.in_place else "out-of-place"
            raise ConfigError(f"no {mode} records{'' if opts.op is None else f' of op {opts.op!r}'}")
        work = kept
    return work


def _true(series: pd.Series) -> pd.Series:
    return series.astype("boolean").fillna(False).astype(bool)


def _false(series: pd.Series) -> pd.Series:
    return (~series.astype("boolean").fillna(True)).astype(bool)


def _knob_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns
            if isinstance(c, str) and c not in _RECORD_COLUMNS and (c in KNOBS or _KNOB_NAME.match(c))]


def _settings_by_config(frame: pd.DataFrame) -> dict[str, dict[str, str]]:
    knobs = _knob_columns(frame)
    firsts = frame.drop_duplicates("config")
    out: dict[str, dict[str, str]] = {}
    for _, row in firsts.iterrows():
        out[str(row["config"])] = {k: str(row[k]) for k in knobs if not _is_na(row[k])}
    return out


def _is_na(value: object) -> bool:
    try:
        return bool(pd.isna(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return False


def _distinct(frame: pd.DataFrame, column: str) -> tuple[str, ...]:
    if column not in frame.columns:
        return ()
    return tuple(sorted({str(v) for v in frame[column].dropna().unique()}))


_Cells = dict[GroupKey, dict[int, dict[str, CellStat]]]


def _cells(frame: pd.DataFrame) -> tuple[_Cells, list[Excluded]]:
    """Aggregate rows into cells; cells with a bad row are reported and left out."""
    busbw = pd.to_numeric(frame["busbw_gbps"], errors="coerce")
    bad_applied = _false(frame["applied"]) if "applied" in frame.columns else pd.Series(False, index=frame.index)
    failure = (frame["failure"] if "failure" in frame.columns else pd.Series(pd.NA, index=frame.index)).astype(object)
    applied_reason = failure.where(failure.notna(), "setting not applied").astype(str)
    reason = pd.Series(np.select(
        [bad_applied.to_numpy(), _false(frame["ok"]).to_numpy(), busbw.isna().to_numpy()],
        [applied_reason.to_numpy(dtype=object), "ok=false (wrong values or out of bounds)", "no busbw value"],
        default=""), index=frame.index)
    keys = pd.DataFrame({
        "backend": frame["backend"].astype(str), "op": frame["op"].astype(str),
        "nranks": pd.to_numeric(frame["nranks"], errors="coerce").fillna(-1).astype(int),
        "nnodes": pd.to_numeric(frame["nnodes"], errors="coerce").fillna(-1).astype(int),
        "config": frame["config"].astype(str), "size_bytes": pd.to_numeric(frame["size_bytes"]).astype("int64"),
        "busbw": busbw, "time": pd.to_numeric(frame["time_us"], errors="coerce") if "time_us" in frame.columns
        else np.nan, "reason": reason, "bad": reason != ""})
    cols = ["backend", "op", "nranks", "nnodes", "config", "size_bytes"]
    excluded: list[Excluded] = []
    bad = keys[keys["bad"]]
    for vals, rows in bad.groupby([*cols, "reason"], sort=True).size().items():
        *k, config, size, why = _tuple(vals)
        excluded.append(Excluded(key=_key(k), config=str(config), size_bytes=int(size), rows=int(rows),
                                 reason=str(why)))
    stats = keys.groupby(cols, sort=True).agg(median=("busbw", "median"), lo=("busbw", "min"), hi=("busbw", "max"),
                                              n=("busbw", "size"), bad=("bad", "sum"), time=("time", "median"))
    cells: _Cells = {}
    for vals, row in zip(stats.index, stats.itertuples(index=False), strict=True):
        *k, config, size = _tuple(vals)
        by_size = cells.setdefault(_key(k), {}).setdefault(int(size), {})
        if int(row.bad) == 0:
            by_size[str(config)] = CellStat(config=str(config), median_gbps=float(row.median),
                                            min_gbps=float(row.lo), max_gbps=float(row.hi), repeats=int(row.n),
                                            time_us=float(row.time))
    return cells, excluded


def _tuple(vals: Hashable) -> list[Any]:
    return list(vals) if isinstance(vals, tuple) else [vals]


def _key_order(key: GroupKey) -> tuple[str, str, int, int]:
    """Groups in order; nodes unknown (None) before any count, as GroupKey's own order cannot compare them."""
    return key.backend, key.op, key.nranks, -1 if key.nnodes is None else key.nnodes


def _key(parts: Sequence[Any]) -> GroupKey:
    backend, op, nranks, nnodes = parts
    return GroupKey(str(backend), str(op), int(nranks), None if int(nnodes) < 0 else int(nnodes))


def _judge(stat: CellStat, base: CellStat, min_gain: float) -> Candidate:
    """The verdict at one size; a "wins" that holds at no adjacent size becomes "single size" later."""
    gain = stat.median_gbps / base.median_gbps - 1 if base.median_gbps > 0 else math.inf
    noise = stat.spread + base.spread
    cell = cell_verdict(stat, base, min_gain)
    verdict: Verdict
    if cell == "beats":
        verdict = "wins"
    elif cell != "below min gain":
        verdict = cell
    else:
        verdict = "loses" if gain < -min_gain else "below min gain"
    return Candidate(stat=stat, gain=gain, noise=noise, verdict=verdict)


def _single_sizes(sizes: list[SizeResult], min_gain: float) -> list[SizeResult]:
    """Apply the adjacent-sizes condition of the noise rule: a win at a lone size is "single size"."""
    configs = sorted({c.stat.config for s in sizes for c in s.candidates})
    keep: dict[tuple[int, str], bool] = {}
    for config in configs:
        pairs = [(None if s.baseline is None or s.candidate(config) is None else s.candidate(config).stat,  # type: ignore[union-attr]
                  s.baseline) for s in sizes]
        for s, ok in zip(sizes, beyond_noise(pairs, min_gain), strict=True):
            keep[(s.size_bytes, config)] = ok
    out = []
    for s in sizes:
        cands = tuple(dataclasses.replace(c, verdict="single size")
                      if c.verdict == "wins" and not keep[(s.size_bytes, c.stat.config)] else c for c in s.candidates)
        winners = [c for c in cands if c.verdict == "wins"]
        best = max(winners, key=lambda c: (c.stat.median_gbps, c.stat.config), default=None)
        winner = None if s.baseline is None else (best.stat.config if best else DEFAULT_CONFIG)
        out.append(dataclasses.replace(s, candidates=cands, winner=winner))
    return out


def _group_result(key: GroupKey, by_size: dict[int, dict[str, CellStat]], min_gain: float,
                  notes: list[str]) -> GroupResult:
    default_measured = any(DEFAULT_CONFIG in cells for cells in by_size.values())
    if not default_measured:
        notes.append(f"{key.label}: the default (nothing forced) was not measured or every default cell was "
                     "excluded; nothing is recommended for it")
    sizes: list[SizeResult] = []
    no_base: list[int] = []
    for size in sorted(by_size):
        cells = by_size[size]
        base = cells.get(DEFAULT_CONFIG)
        if base is None:
            if default_measured:
                no_base.append(size)
            sizes.append(SizeResult(size_bytes=size, baseline=None, candidates=(), winner=None))
            continue
        cands = tuple(_judge(s, base, min_gain) for c, s in sorted(cells.items()) if c != DEFAULT_CONFIG)
        winners = [c for c in cands if c.verdict == "wins"]
        best = max(winners, key=lambda c: (c.stat.median_gbps, c.stat.config), default=None)
        sizes.append(SizeResult(size_bytes=size, baseline=base, candidates=cands,
                                winner=best.stat.config if best else DEFAULT_CONFIG))
    if no_base:
        notes.append(f"{key.label}: no usable default at {len(no_base)} size(s) ({', '.join(map(str, no_base))} B); "
                     "nothing is recommended there")
    sizes = _single_sizes(sizes, min_gain)
    ranges = tuple(merge_ranges([(s.size_bytes, s.winner, s) for s in sizes]))
    return GroupResult(key=key, default_measured=default_measured, sizes=tuple(sizes), ranges=ranges)
