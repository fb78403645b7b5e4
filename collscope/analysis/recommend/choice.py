r"""The one environment setting per op (env variables apply to every size), judged by workload time.

Per ``(backend, op)``: among the configs with a usable cell at *every* size where the default was measured (in
every group of that op), the one that saves the most time per step on the workload, provided it saves time, wins
at least one range beyond noise (:mod:`collscope.analysis.noise`), and loses beyond noise at no measured size
carrying more than :data:`SHARE_LIMIT` of the workload's time. The others are kept as
:class:`EnvCandidate`\ s with the reason, in time figures, why they are not one setting for every size.
"""

from __future__ import annotations

import math
from typing import Literal

from collscope.analysis.noise import beyond_noise
from collscope.analysis.recommend.ranges import merge_ranges
from collscope.analysis.recommend.records import EnvCandidate, EnvChoice, GroupKey, GroupResult, SizeRange, SizeResult
from collscope.analysis.recommend.timing import TimeEval, evaluate, format_us, range_saving
from collscope.analysis.recommend.workload import Workload
from collscope.units import format_size

__all__ = ["SHARE_LIMIT", "env_choices"]

SHARE_LIMIT = 0.05
"""A global setting may lose beyond noise only at sizes carrying at most this share of the workload's time."""


def env_choices(groups: tuple[GroupResult, ...], settings: dict[str, dict[str, str]], min_gain: float,
                 workload: Workload) -> tuple[tuple[EnvChoice, ...], tuple[EnvCandidate, ...]]:
    by_op: dict[tuple[str, str], list[GroupResult]] = {}
    for g in groups:
        if g.default_measured:
            by_op.setdefault((g.key.backend, g.key.op), []).append(g)
    choices: list[EnvChoice] = []
    considered: list[EnvCandidate] = []
    for (backend, op), gs in sorted(by_op.items()):
        based = [(g, s) for g in gs for s in g.sizes if s.baseline is not None]
        configs = sorted({c.stat.config for _, s in based for c in s.candidates})
        scored: list[tuple[float, str, float, float]] = []
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
            evals = [(g, evaluate(g, workload.for_group(g.key.op, g.key.nranks), config)) for g in gs]
            base_us = sum(e.default_us for _, e in evals)
            saved = sum(e.saved_us for _, e in evals)
            blocking = _blocking(evals, config, min_gain)
            if not any(c.verdict == "wins" for c in present):
                why = "wins at no size beyond noise"
            elif base_us <= 0:
                why = f"the workload ({workload.source}) has no covered call of {op}: no time to judge it by"
            elif saved <= 0 or blocking:
                why = _why_not(gs, config, min_gain, workload, saved, base_us, blocking)
            else:
                scored.append((saved, config, total, base_us))
                continue
            considered.append(EnvCandidate(backend=backend, op=op, config=config, total_gain=total,
                                           sizes=len(based), reason=why, time_saved_us=saved,
                                           workload_time_us=base_us))
        scored.sort(key=lambda t: (-t[0], t[1]))
        for rank, (saved, config, total, base_us) in enumerate(scored):
            considered.append(EnvCandidate(
                backend=backend, op=op, config=config, total_gain=total, sizes=len(based),
                reason="chosen" if rank == 0 else f"saves less time on the workload than {scored[0][1]}",
                time_saved_us=saved, workload_time_us=base_us))
        if scored:
            saved, config, total, base_us = scored[0]
            choices.append(EnvChoice(backend=backend, op=op, config=config, settings=settings.get(config, {}),
                                     total_gain=total, sizes=len(based), wins=_spans(gs, config, "win", min_gain),
                                     losses=_spans(gs, config, "loss", min_gain), time_saved_us=saved,
                                     workload_time_us=base_us))
    return tuple(choices), tuple(considered)


def _lost_beyond_noise(group: GroupResult, config: str, min_gain: float) -> list[tuple[int, bool]]:
    """Per measured size: does the default beat ``config`` beyond noise (the noise rule, sides swapped)?"""
    pairs = [(s.baseline, None if s.candidate(config) is None else s.candidate(config).stat)  # type: ignore[union-attr]
             for s in group.sizes]
    return list(zip((s.size_bytes for s in group.sizes), beyond_noise(pairs, min_gain), strict=True))


def _blocking(evals: list[tuple[GroupResult, TimeEval]], config: str,
              min_gain: float) -> list[tuple[GroupResult, int, float]]:
    """Sizes where ``config`` loses beyond noise and that carry more than SHARE_LIMIT of the workload's time."""
    out = []
    for g, ev in evals:
        for size, lost in _lost_beyond_noise(g, config, min_gain):
            share = ev.share_by_size.get(size, 0.0)
            if lost and share > SHARE_LIMIT:
                out.append((g, size, share))
    return out


def _sizes_text(lo: int, hi: int) -> str:
    return format_size(lo) if lo == hi else f"{format_size(lo)}..{format_size(hi)}"


def _span_text(span: SizeRange) -> str:
    return _sizes_text(span.min_bytes, span.max_bytes)


def _why_not(gs: list[GroupResult], config: str, min_gain: float, workload: Workload, saved: float,
             base_us: float, blocking: list[tuple[GroupResult, int, float]]) -> str:
    """Why a config that wins somewhere is not one setting for every size, with the time figures."""
    parts = []
    kinds: tuple[tuple[Literal["win", "loss"], str], ...] = (("win", "saves"), ("loss", "costs"))
    for kind, verb in kinds:
        for g in gs:
            entries = workload.for_group(g.key.op, g.key.nranks)
            for key, span in _spans([g], config, kind, min_gain):
                ev = range_saving(g, entries, span)
                amount = ev.saved_us if kind == "win" else -ev.saved_us
                parts.append(f"{verb} {format_us(amount)} per step at {key.label} {_span_text(span)}")
    net = f"in all it {'saves' if saved > 0 else 'costs'} {format_us(abs(saved))} of the default's " \
          f"{format_us(base_us)} per step ({abs(saved) / base_us * 100:.1f}%)"
    text = "; ".join(parts) + ("; " if parts else "") + net
    if blocking:
        share = sum(sh for _, _, sh in blocking)
        sizes = sorted({s for _, s, _ in blocking})
        text += (f"; it loses beyond noise at {len(sizes)} size(s) ({_sizes_text(sizes[0], sizes[-1])}) that each "
                 f"carry more than {SHARE_LIMIT:.0%} of the workload's time ({share:.1%} together)")
    else:
        text += "; it costs more time than it saves"
    return text


def _spans(groups: list[GroupResult], config: str, kind: Literal["win", "loss"],
           min_gain: float) -> tuple[tuple[GroupKey, SizeRange], ...]:
    out: list[tuple[GroupKey, SizeRange]] = []
    for g in groups:
        items: list[tuple[int, str | None, SizeResult]] = []
        for s in g.sizes:
            c = s.candidate(config)
            hit = c is not None and (c.verdict == "wins" if kind == "win" else c.gain < -min_gain)
            items.append((s.size_bytes, config if hit else None, s))
        out.extend((g.key, r) for r in merge_ranges(items))
    return tuple(out)
