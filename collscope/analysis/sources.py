"""One configuration read from two inputs, side by side: do they differ beyond noise?

:func:`~.load.load_results` tags every record with the path it was read from (``input``), and a configuration's
identity includes it (:data:`~.fit.CONFIG_KEYS`): a sweep's ``default`` and a check run's ``default`` are two
configurations, never repeats of one. :func:`compare_sources` then holds each later input's configuration
against the first input's (the order the caller named them: ``collscope analyze results/ check.jsonl`` holds
the check against the sweep) with the one noise rule (:func:`~.noise.beyond_noise`, as crossovers and
recommend use it), at the sizes both measured:

* ``differ``: one side beats the other beyond noise over >= 2 adjacent sizes; ``detail`` names the sizes and
  which side is slower (a regression between a sweep and its check shows here);
* ``within noise``: at every size both measured with >= 3 repeats, neither beats the other beyond noise;
* ``noise unknown``: no common size has >= 3 repeats on both sides, so no difference is claimed either way
  (a check run of one nccl-tests pass has one repeat per size: ``-N 3`` gives three);
* ``no common size``: the two never measured the same size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from collscope.analysis.crossovers import sample
from collscope.analysis.formats import size_text
from collscope.analysis.noise import MIN_REPEATS, Sample, beyond_noise

__all__ = ["SourceComparison", "SourceVerdict", "compare_sources", "IDENTITY_KEYS"]

IDENTITY_KEYS = ("backend", "op", "config", "nranks", "nnodes", "in_place")
"""A configuration apart from where it was read from."""

SourceVerdict = Literal["differ", "within noise", "noise unknown", "no common size"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceComparison:
    """``config`` as ``first`` and ``second`` (two inputs) measured it."""

    backend: str | None
    op: str
    config: str
    nranks: int | None
    nnodes: int | None
    in_place: bool | None
    first: str
    """The input named first (the reference)."""
    second: str
    verdict: SourceVerdict
    common_sizes: int
    """Sizes both inputs measured with usable records."""
    change: float | None
    """Median over the common sizes of ``median busbw(second) / median busbw(first) - 1`` (None: no common size)."""
    slower_sizes: tuple[int, ...] = ()
    """Sizes where ``second`` is slower than ``first`` beyond noise."""
    faster_sizes: tuple[int, ...] = ()
    """Sizes where ``second`` is faster than ``first`` beyond noise."""
    detail: str = ""

    def label(self) -> str:
        nodes = "" if self.nnodes is None else f"/{self.nnodes}n"
        ranks = "" if self.nranks is None else f" {self.nranks}r{nodes}"
        return f"{self.op} {self.config}{ranks}{' in-place' if self.in_place else ''}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["slower_sizes"] = list(self.slower_sizes)
        out["faster_sizes"] = list(self.faster_sizes)
        return out


def _spans(sizes: Sequence[int], hits: Sequence[bool]) -> str:
    """``1M-4M, 64M``: the runs of adjacent measured sizes where ``hits`` holds."""
    out: list[str] = []
    start: int | None = None
    for i, hit in enumerate([*hits, False]):
        if hit and start is None:
            start = i
        elif not hit and start is not None:
            lo, hi = size_text(sizes[start]), size_text(sizes[i - 1])
            out.append(lo if lo == hi else f"{lo}-{hi}")
            start = None
    return ", ".join(out)


def _plain(value: Any) -> Any:
    return None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else value


def _compare(key: dict[str, Any], first: str, second: str, a: dict[int, Sample], b: dict[int, Sample],
             min_gain: float) -> SourceComparison:
    order = sorted(set(a) | set(b))
    slower = beyond_noise([(a.get(s), b.get(s)) for s in order], min_gain)  # first beats second: second slower
    faster = beyond_noise([(b.get(s), a.get(s)) for s in order], min_gain)
    common = [s for s in order if s in a and s in b]
    changes = [b[s].median_gbps / a[s].median_gbps - 1 for s in common if a[s].median_gbps > 0]
    change = float(np.median(changes)) if changes else None
    testable = [s for s in common if min(a[s].repeats, b[s].repeats) >= MIN_REPEATS]
    moved = "median busbw change unknown" if change is None else f"median busbw change {change:+.0%}"
    verdict: SourceVerdict
    if not common:
        verdict, detail = "no common size", "no size measured by both: nothing to compare"
    elif any(slower) or any(faster):
        verdict = "differ"
        parts = [f"{second} slower at {_spans(order, slower)}"] if any(slower) else []
        parts += [f"{second} faster at {_spans(order, faster)}"] if any(faster) else []
        detail = f"differ beyond noise: {'; '.join(parts)} ({moved} over {len(common)} common size(s))"
    elif not testable:
        fewest = min(min(a[s].repeats, b[s].repeats) for s in common)
        verdict = "noise unknown"
        detail = (f"noise unknown: {fewest} repeat(s) per size on one side, the noise rule needs >= {MIN_REPEATS} "
                  f"on both, so no difference is claimed ({moved}; repeat the run: nccl-tests -N {MIN_REPEATS}, "
                  "or a sweep's --repeats)")
    else:
        verdict = "within noise"
        detail = f"within noise at the {len(testable)} size(s) both measured with >= {MIN_REPEATS} repeats ({moved})"
    nnodes, nranks, in_place, backend = (_plain(key.get(k)) for k in ("nnodes", "nranks", "in_place", "backend"))
    return SourceComparison(
        backend=None if backend is None else str(backend), op=str(key["op"]), config=str(key["config"]),
        nranks=None if nranks is None else int(nranks), nnodes=None if nnodes is None else int(nnodes),
        in_place=None if in_place is None else bool(in_place), first=first, second=second, verdict=verdict,
        common_sizes=len(common), change=change,
        slower_sizes=tuple(s for s, hit in zip(order, slower, strict=True) if hit),
        faster_sizes=tuple(s for s, hit in zip(order, faster, strict=True) if hit), detail=detail)


def compare_sources(sizes: pd.DataFrame, inputs: Sequence[str], min_gain: float) -> list[SourceComparison]:
    """Every configuration that two or more ``inputs`` measured, each later input held against the first that
    measured it (module docstring). ``sizes`` is :func:`~.fit.aggregate`'s table; ``inputs`` the order the
    caller named them in."""
    if "input" not in sizes or sizes.empty:
        return []
    usable = sizes[(sizes["n"] > 0) & np.isfinite(sizes["busbw_gbps"].to_numpy(dtype=float))]
    if usable["input"].nunique(dropna=True) < 2:
        return []
    rank = {name: i for i, name in enumerate(inputs)}
    cells: dict[tuple[Any, ...], dict[str, dict[int, Sample]]] = {}
    keys: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in usable.to_dict(orient="records"):
        source = _plain(row["input"])
        if source is None:
            continue
        ident = tuple(_plain(row[k]) for k in IDENTITY_KEYS)
        keys.setdefault(ident, {k: row[k] for k in IDENTITY_KEYS})
        cells.setdefault(ident, {}).setdefault(str(source), {})[int(row["size_bytes"])] = sample(row)
    out: list[SourceComparison] = []
    for ident, by_input in cells.items():
        if len(by_input) < 2:
            continue
        named = sorted(by_input, key=lambda s: (rank.get(s, len(rank)), s))
        first = named[0]
        for second in named[1:]:
            out.append(_compare(keys[ident], first, second, by_input[first], by_input[second], min_gain))
    return out
