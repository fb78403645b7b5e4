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
* **Baseline.** The default (``config == "default"``, nothing forced) of the same group and size. A group
  without any default cell gets no recommendation (a note says so); a size without one breaks ranges.
* **Winning a size.** ``gain = median / default_median - 1``; a candidate wins when ``gain > min_gain`` and
  ``gain > spread + default spread`` (the combined noise). The winner of a size is the winning candidate with
  the highest median, else the default.
* **Ranges.** Adjacent measured sizes with the same winner merge; a range's edges are **measured sizes**
  (inclusive), never midpoints, so a range covers only sizes between evidence for it. Ranges of one group
  are disjoint by construction; the gaps between them are left to NCCL's own choice.
* **Environment choice** (env variables apply to all sizes). Per ``(backend, op)``: among the configs with a
  usable cell at *every* size where the default was measured (in every group of that op), the one with the
  largest total gain (sum of gains over those sizes), provided the total is positive and it wins at least
  one size. Its costs are the sizes where its median is more than ``min_gain`` below the default's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

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
from collscope.analysis.recommend.tuner import tuner_rules
from collscope.errors import ConfigError
from collscope.vocab.knobs import KNOBS

__all__ = [
    "RecommendOptions", "CellStat", "Candidate", "SizeResult", "SizeRange", "GroupKey", "GroupResult",
    "Excluded", "EnvCandidate", "EnvChoice", "Recommendation", "recommend", "render_json", "DEFAULT_CONFIG",
    "REQUIRED_COLUMNS",
]

REQUIRED_COLUMNS = ("backend", "op", "size_bytes", "nranks", "nnodes", "busbw_gbps", "ok", "in_place", "config")
_RECORD_COLUMNS = frozenset({
    "engine", "backend", "op", "size_bytes", "count", "dtype", "redop", "root", "in_place", "nranks", "nnodes",
    "time_us", "algbw_gbps", "busbw_gbps", "wrong", "error", "ok", "iters", "warmup", "repeat", "point_id",
    "sweep_id", "nccl_version", "engine_version", "source", "timestamp", "hosts", "config", "applied", "failure",
    "settings",
})
_KNOB_NAME = re.compile(r"^(NCCL|OMPI_MCA)_[A-Za-z0-9_]+$")


# ---- the analysis -----------------------------------------------------------------------------------------
def recommend(frame: pd.DataFrame, options: RecommendOptions | None = None) -> Recommendation:
    """Compare every config with the default per group and size; see the module docstring for the rules."""
    opts = options or RecommendOptions()
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(f"the results lack column(s) {', '.join(missing)}; expected the DataFrame of "
                          "collscope.analysis.load.load_results")
    if frame.empty:
        raise ConfigError("no records to recommend from")
    notes: list[str] = []
    work = _select(frame, opts, notes)
    settings = _settings_by_config(work)
    cells, excluded = _cells(work)
    groups = tuple(_group_result(key, by_size, opts.min_gain, notes) for key, by_size in sorted(cells.items()))
    env, env_candidates = _env_choices(groups, settings, opts.min_gain)
    return Recommendation(
        options=opts, groups=groups, env=env, env_candidates=env_candidates, excluded=tuple(excluded),
        settings=settings, notes=tuple(notes), sweep_ids=_distinct(work, "sweep_id"),
        nccl_versions=_distinct(work, "nccl_version"), ops=tuple(sorted({k.op for k in cells})),
        failed_points=_failed_points(frame, opts))


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
    if opts.op is not None:
        ops = sorted(str(o) for o in frame["op"].dropna().unique())
        if opts.op not in ops:
            raise ConfigError(f"no records of op {opts.op!r}; ops in the results: {', '.join(ops) or 'none'}")
        work = work[work["op"] == opts.op]
    modes = _true(work["in_place"])
    if opts.in_place is None:
        if modes.any() and (~modes).any():
            notes.append(f"{int(modes.sum())} in-place record(s) ignored: out-of-place and in-place were both "
                         "measured; pass --in-place to use those instead")
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
        "busbw": busbw, "reason": reason, "bad": reason != ""})
    cols = ["backend", "op", "nranks", "nnodes", "config", "size_bytes"]
    excluded: list[Excluded] = []
    bad = keys[keys["bad"]]
    for vals, rows in bad.groupby([*cols, "reason"], sort=True).size().items():
        *k, config, size, why = _tuple(vals)
        excluded.append(Excluded(key=_key(k), config=str(config), size_bytes=int(size), rows=int(rows),
                                 reason=str(why)))
    stats = keys.groupby(cols, sort=True).agg(median=("busbw", "median"), lo=("busbw", "min"), hi=("busbw", "max"),
                                              n=("busbw", "size"), bad=("bad", "sum"))
    cells: _Cells = {}
    for vals, row in zip(stats.index, stats.itertuples(index=False), strict=True):
        *k, config, size = _tuple(vals)
        by_size = cells.setdefault(_key(k), {}).setdefault(int(size), {})
        if int(row.bad) == 0:
            by_size[str(config)] = CellStat(config=str(config), median_gbps=float(row.median),
                                            min_gbps=float(row.lo), max_gbps=float(row.hi), repeats=int(row.n))
    return cells, excluded


def _tuple(vals: Hashable) -> list[Any]:
    return list(vals) if isinstance(vals, tuple) else [vals]


def _key(parts: Sequence[Any]) -> GroupKey:
    backend, op, nranks, nnodes = parts
    return GroupKey(str(backend), str(op), int(nranks), None if int(nnodes) < 0 else int(nnodes))


def _judge(stat: CellStat, base: CellStat, min_gain: float) -> Candidate:
    gain = stat.median_gbps / base.median_gbps - 1 if base.median_gbps > 0 else math.inf
    noise = stat.spread + base.spread
    if gain > min_gain and gain > noise:
        verdict: Verdict = "wins"
    elif gain > min_gain:
        verdict = "within noise"
    elif gain < -min_gain:
        verdict = "loses"
    else:
        verdict = "below min gain"
    return Candidate(stat=stat, gain=gain, noise=noise, verdict=verdict)


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
    ranges = tuple(_ranges([(s.size_bytes, s.winner, s) for s in sizes]))
    return GroupResult(key=key, default_measured=default_measured, sizes=tuple(sizes), ranges=ranges)


def _ranges(items: Iterable[tuple[int, str | None, SizeResult]]) -> list[SizeRange]:
    """Merge runs of adjacent sizes with the same label (None breaks a run) into SizeRanges."""
    out: list[SizeRange] = []
    run: list[tuple[int, str, SizeResult]] = []

    def close() -> None:
        if run:
            out.append(_range_of(run[0][1], [s for _, _, s in run]))
            run.clear()

    for size, label, result in items:
        if label is None or (run and run[-1][1] != label):
            close()
        if label is not None:
            run.append((size, label, result))
    close()
    return out


def _range_of(config: str, results: list[SizeResult]) -> SizeRange:
    gains, repeats, noises = [], [], []
    for r in results:
        assert r.baseline is not None
        cand = r.candidate(config)
        repeats.append(r.baseline.repeats if cand is None else min(r.baseline.repeats, cand.stat.repeats))
        gains.append(0.0 if cand is None else cand.gain)
        noises.append(r.baseline.spread if cand is None else cand.noise)
    return SizeRange(config=config, min_bytes=results[0].size_bytes, max_bytes=results[-1].size_bytes,
                     sizes=tuple(r.size_bytes for r in results), gain_min=min(gains), gain_max=max(gains),
                     repeats_min=min(repeats), noise_max=max(noises))


def _env_choices(groups: tuple[GroupResult, ...], settings: dict[str, dict[str, str]],
                 min_gain: float) -> tuple[tuple[EnvChoice, ...], tuple[EnvCandidate, ...]]:
    by_op: dict[tuple[str, str], list[GroupResult]] = {}
    for g in groups:
        if g.default_measured:
            by_op.setdefault((g.key.backend, g.key.op), []).append(g)
    choices: list[EnvChoice] = []
    considered: list[EnvCandidate] = []
    for (backend, op), gs in sorted(by_op.items()):
        based = [(g, s) for g in gs for s in g.sizes if s.baseline is not None]
        configs = sorted({c.stat.config for _, s in based for c in s.candidates})
        scored: list[tuple[float, str]] = []
        for config in configs:
            cands = [s.candidate(config) for _, s in based]
            present = [c for c in cands if c is not None]
            if len(present) < len(cands):
                considered.append(EnvCandidate(
                    backend=backend, op=op, config=config, total_gain=math.nan, sizes=len(based),
                    reason=f"not usable at {len(cands) - len(present)} of {len(cands)} default-measured sizes "
                           "(not measured or excluded), so not safe for all sizes"))
                continue
            total = sum(c.gain for c in present)
            if not any(c.verdict == "wins" for c in present):
                why = "wins at no size beyond noise"
            elif total <= 0:
                why = "its losses outweigh its gains over the measured sizes"
            else:
                scored.append((total, config))
                continue
            considered.append(EnvCandidate(backend=backend, op=op, config=config, total_gain=total,
                                           sizes=len(based), reason=why))
        scored.sort(key=lambda t: (-t[0], t[1]))
        for rank, (total, config) in enumerate(scored):
            considered.append(EnvCandidate(
                backend=backend, op=op, config=config, total_gain=total, sizes=len(based),
                reason="chosen" if rank == 0 else f"a smaller total gain than {scored[0][1]}"))
        if scored:
            total, config = scored[0]
            choices.append(EnvChoice(backend=backend, op=op, config=config, settings=settings.get(config, {}),
                                     total_gain=total, sizes=len(based), wins=_spans(gs, config, "win", min_gain),
                                     losses=_spans(gs, config, "loss", min_gain)))
    return tuple(choices), tuple(considered)


def _spans(groups: list[GroupResult], config: str, kind: Literal["win", "loss"],
           min_gain: float) -> tuple[tuple[GroupKey, SizeRange], ...]:
    out: list[tuple[GroupKey, SizeRange]] = []
    for g in groups:
        items: list[tuple[int, str | None, SizeResult]] = []
        for s in g.sizes:
            c = s.candidate(config)
            hit = c is not None and (c.verdict == "wins" if kind == "win" else c.gain < -min_gain)
            items.append((s.size_bytes, config if hit else None, s))
        out.extend((g.key, r) for r in _ranges(items))
    return tuple(out)
