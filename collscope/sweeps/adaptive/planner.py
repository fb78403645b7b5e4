"""The adaptive planner: which configurations and sizes to measure next, decided from what is measured so far.

Pure functions over :class:`GroupEvidence` (one op: its size ladder and, per configuration, the measured cells
and an alpha-beta fit); :mod:`collscope.sweeps.adaptive.run` reads the evidence from a results directory, runs
the rounds and records them. The rules, per op:

* **Round 1** measures every configuration (the default always) once at a few log-spaced ladder sizes,
  always the smallest and the largest (:func:`first_round_sizes`).
* **Bands.** Each configuration gets a busbw band ``lo <= est <= hi`` at every ladder size. At a measured size:
  the median of its repeats, widened to the repeats' range and to ``noise / sqrt(n)``: one repeat on a noisy
  machine is never taken at face value. ``noise`` is the machine's repeat noise, the median half-range of
  every cell of the op measured at least twice (any configuration), or before any repeat the configuration's
  typical deviation from its fit (``mad_rel``); at least ``noise_floor``. At an unmeasured size: the union
  of the log-log interpolation between the measured neighbours and the fit's 95% interval
  (``alpha_lo + beta_lo * s`` .. ``alpha_hi + beta_hi * s``) widened by ``mad_rel`` (how far the real curve
  strays from a line); the estimate is the interpolation (the fit outside the measured range).
* **Drop.** A forced configuration is dropped when at no ladder size its optimistic busbw (``hi``) beats the
  default's pessimistic one (``lo``) by more than ``min_gain``, or when wherever it could, another
  configuration is surely better (that one's ``lo`` above its ``hi``). A real contender within noise keeps a
  band that overlaps the default's and stays. Dropped configurations are never measured again.
* **Leaders.** At every ladder size the surviving configuration with the highest estimate leads; a size is
  *settled* when no other survivor's ``hi`` exceeds the leader's ``lo`` by more than ``min_gain``.
* **Next round.** (a) At a measured size that is not settled, the leader, the default and every contender
  (``hi`` above the leader's ``lo`` x (1 + min_gain)) get another repeat, up to ``max_repeats``.
  (b) Between two neighbouring measured sizes whose leaders differ, or where another configuration leads
  somewhere in between (a crossover), the middle ladder size in log-size is measured (bisection) for the
  leaders of both ends, the contenders there and the default; with ``fill`` every ladder size in between.
  (c) The default is measured wherever a forced configuration is, at least as often, so that every measured
  size has its baseline.
* The sweep ends when a round requests nothing: every size is settled, or its repeats are used up and no
  crossover interval has an unmeasured ladder size left.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collscope.vocab.configs import DEFAULT_CONFIG

__all__ = ["DEFAULT_CONFIG", "Cell", "LineBand", "ConfigEvidence", "GroupEvidence", "Band", "Decision",
           "first_round_sizes", "band", "repeat_noise", "decide", "size_ranges"]

DEFAULT_NOISE = 0.25
"""Relative noise assumed for a configuration without a usable fit (fewer than 3 measured sizes)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Cell:
    """busbw of one (configuration, size) over its repeats, decimal GB/s."""

    median_gbps: float
    min_gbps: float
    max_gbps: float
    n: int
    """Usable repeats."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LineBand:
    """An alpha-beta fit (:func:`collscope.analysis.fit.fit_line`) with its 95% bounds."""

    alpha_us: float
    alpha_lo_us: float
    alpha_hi_us: float
    beta_us_per_byte: float
    beta_lo: float
    beta_hi: float
    mad_rel: float
    """Median |relative residual| of the measured sizes around the line."""

    @property
    def usable(self) -> bool:
        vals = (self.alpha_us, self.alpha_lo_us, self.alpha_hi_us, self.beta_us_per_byte, self.beta_lo,
                self.beta_hi)
        return all(math.isfinite(v) for v in vals) and self.beta_hi > 0


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigEvidence:
    config: str
    """``"default"`` or the canonical ``K=V;K=V`` name."""
    cells: Mapping[int, Cell]
    """Measured ladder size -> its statistics."""
    fit: LineBand | None = None

    @property
    def is_default(self) -> bool:
        return self.config == DEFAULT_CONFIG


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupEvidence:
    """What is known about one op."""

    op: str
    busbw_factor: float
    """busbw / algbw for this op and rank count."""
    ladder: tuple[int, ...]
    """The spec's sizes for this op, ascending: the sizes the planner may choose from."""
    configs: tuple[ConfigEvidence, ...]


@dataclass(frozen=True, slots=True)
class Band:
    lo: float
    est: float
    hi: float


@dataclass(frozen=True, kw_only=True)
class Decision:
    """The planner's verdict on one op after a round."""

    op: str
    alive: tuple[str, ...]
    """Configurations still in the running, the default first."""
    dropped: dict[str, str] = field(default_factory=dict)
    """Configurations dropped by this decision -> why."""
    leaders: dict[int, str] = field(default_factory=dict)
    """Ladder size -> the survivor with the highest estimate."""
    unsettled: tuple[int, ...] = ()
    """Ladder sizes where another survivor could still beat the leader by more than min_gain."""
    requests: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Configuration -> ladder sizes to measure in the next round (empty: this op is finished)."""

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "alive": list(self.alive), "dropped": dict(self.dropped),
                "unsettled": list(self.unsettled), "requests": {c: list(s) for c, s in self.requests.items()},
                "best": size_ranges(self.leaders)}


def first_round_sizes(ladder: Iterable[int], count: int = 5) -> tuple[int, ...]:
    """``count`` ladder sizes spread evenly in log-size (ladder index), always the first and the last."""
    sizes = sorted(set(ladder))
    if len(sizes) <= count:
        return tuple(sizes)
    last = len(sizes) - 1
    picks = {round(i * last / (count - 1)) for i in range(count)}
    return tuple(sizes[i] for i in sorted(picks))


def _misfit(ev: ConfigEvidence, floor: float) -> float:
    mad = ev.fit.mad_rel if ev.fit is not None and math.isfinite(ev.fit.mad_rel) else DEFAULT_NOISE
    return max(floor, mad)


def repeat_noise(configs: Iterable[ConfigEvidence]) -> float | None:
    """Median relative half-range ``(max - min) / 2 / median`` of the cells measured at least twice; None
    when no cell was."""
    halves = sorted((c.max_gbps - c.min_gbps) / 2 / c.median_gbps for ev in configs for c in ev.cells.values()
                    if c.n >= 2 and c.median_gbps > 0 and math.isfinite(c.max_gbps - c.min_gbps))
    return halves[len(halves) // 2] if halves else None


def _busbw(size: float, time_us: float, factor: float) -> float:
    return factor * size / time_us * 1e-3 if time_us > 0 else math.inf


def _measured_band(cell: Cell, noise: float) -> Band:
    half = noise / math.sqrt(max(cell.n, 1))
    m = cell.median_gbps
    return Band(min(cell.min_gbps, m / (1 + half)), m, max(cell.max_gbps, m * (1 + half)))


def _log_interp(x: float, x0: float, x1: float, y0: float, y1: float) -> float:
    if y0 <= 0 or y1 <= 0 or not (math.isfinite(y0) and math.isfinite(y1)):
        return min(y0, y1) if y0 <= 0 or y1 <= 0 else math.inf
    t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))


def band(ev: ConfigEvidence, size: int, busbw_factor: float, *, noise_floor: float = 0.02,
         noise: float | None = None) -> Band:
    """The busbw band of configuration ``ev`` at ``size`` (module docstring); ``(0, nan, inf)`` without evidence.

    ``noise``: the relative noise of one measurement (:func:`repeat_noise`); None: the fit's ``mad_rel``.
    """
    misfit = _misfit(ev, noise_floor)
    noise = misfit if noise is None else max(noise, noise_floor)
    usable = {s: c for s, c in ev.cells.items() if c.n > 0 and math.isfinite(c.median_gbps)}
    if size in usable:
        return _measured_band(usable[size], noise)
    below = [s for s in usable if s < size]
    above = [s for s in usable if s > size]
    lo, est, hi = math.inf, math.nan, -math.inf
    if below and above:
        a, b = max(below), min(above)
        ba, bb = _measured_band(usable[a], noise), _measured_band(usable[b], noise)
        lo = _log_interp(size, a, b, ba.lo, bb.lo)
        est = _log_interp(size, a, b, ba.est, bb.est)
        hi = _log_interp(size, a, b, ba.hi, bb.hi)
    if ev.fit is not None and ev.fit.usable:
        f = ev.fit
        lo = min(lo, _busbw(size, f.alpha_hi_us + f.beta_hi * size, busbw_factor) / (1 + misfit))
        hi = max(hi, _busbw(size, f.alpha_lo_us + f.beta_lo * size, busbw_factor) * (1 + misfit))
        if math.isnan(est):
            est = _busbw(size, f.alpha_us + f.beta_us_per_byte * size, busbw_factor)
    if math.isnan(est):
        return Band(0.0, math.nan, math.inf)
    return Band(lo, est, hi)


def _n(ev: ConfigEvidence, size: int) -> int:
    cell = ev.cells.get(size)
    return cell.n if cell is not None else 0


def decide(group: GroupEvidence, *, min_gain: float, max_repeats: int, dropped_before: Iterable[str] = (),
           noise_floor: float = 0.02, fill: bool = False) -> Decision:
    """Drop, rank and choose what to measure next for one op (module docstring).

    ``fill``: measure every ladder size inside a crossover interval at once instead of its middle one (for
    machines where a launch costs far more than the sizes it measures: the sizes then come almost free).
    """
    gone = set(dropped_before)
    configs = {c.config: c for c in group.configs if c.config not in gone}
    default = configs.get(DEFAULT_CONFIG)
    if default is None:
        raise ValueError(f"{group.op}: the default configuration has no evidence; it is always measured first")
    ladder = tuple(sorted(set(group.ladder)))
    noise = repeat_noise(configs.values())
    bands = {name: {s: band(ev, s, group.busbw_factor, noise_floor=noise_floor, noise=noise) for s in ladder}
             for name, ev in configs.items()}
    dropped: dict[str, str] = {}
    for name, ev in configs.items():
        if ev.is_default:
            continue
        if not any(c.n > 0 for c in ev.cells.values()):
            dropped[name] = "no usable measurement"
            continue
        why = _cannot_win(name, bands, ladder, min_gain)
        if why is not None:
            dropped[name] = why
    alive = [DEFAULT_CONFIG, *sorted(n for n in configs if n not in dropped and n != DEFAULT_CONFIG)]
    live = {n: bands[n] for n in alive}
    leaders: dict[int, str] = {}
    unsettled: list[int] = []
    contenders: dict[int, list[str]] = {}
    for s in ladder:
        ests = [(live[n][s].est, n) for n in alive if math.isfinite(live[n][s].est)]
        if not ests:
            continue
        leader = max(ests, key=lambda e: (e[0], e[1] == DEFAULT_CONFIG))[1]
        leaders[s] = leader
        bar = live[leader][s].lo * (1 + min_gain)
        rivals = [n for n in alive if n != leader and live[n][s].hi > bar]
        contenders[s] = rivals
        if rivals:
            unsettled.append(s)
    requests = _requests(configs, alive, ladder, leaders, contenders, max_repeats, fill)
    return Decision(op=group.op, alive=tuple(alive), dropped=dropped, leaders=leaders, unsettled=tuple(unsettled),
                    requests=requests)


def _cannot_win(name: str, bands: Mapping[str, Mapping[int, Band]], ladder: tuple[int, ...],
                min_gain: float) -> str | None:
    """Why ``name`` can win no size, or None when it still can somewhere."""
    mine = bands[name]
    best_gain, best_size = -math.inf, ladder[0]
    for s in ladder:
        base_lo = bands[DEFAULT_CONFIG][s].lo
        gain = mine[s].hi / base_lo - 1 if base_lo > 0 else math.inf
        if gain > best_gain:
            best_gain, best_size = gain, s
        if gain <= min_gain:
            continue
        if all(bands[other][s].lo < mine[s].hi for other in bands if other != name):
            return None
    if best_gain <= min_gain:
        return (f"cannot beat the default by more than {min_gain:.0%} at any size (at best {best_gain:+.1%}, "
                f"at {best_size} B, within its 95% band)")
    return "where it could beat the default, another configuration is surely faster"


def _requests(configs: Mapping[str, ConfigEvidence], alive: list[str], ladder: tuple[int, ...],
              leaders: Mapping[int, str], contenders: Mapping[int, list[str]],
              max_repeats: int, fill: bool) -> dict[str, tuple[int, ...]]:
    want: dict[str, set[int]] = {n: set() for n in alive}
    default = configs[DEFAULT_CONFIG]
    measured = sorted(s for s in ladder if _n(default, s) > 0)
    for s in measured:  # (a) more repeats where the leader is not settled
        for n in {leaders.get(s, DEFAULT_CONFIG), DEFAULT_CONFIG, *contenders.get(s, [])}:
            if _n(configs[n], s) < max_repeats:
                want[n].add(s)
    index = {s: i for i, s in enumerate(ladder)}
    for a, b in zip(measured, measured[1:], strict=False):  # (b) bisect crossover intervals
        inner = ladder[index[a] + 1:index[b]]
        if not inner or a not in leaders or b not in leaders:
            continue
        if leaders[a] == leaders[b] and all(leaders.get(s, leaders[a]) == leaders[a] for s in inner):
            continue
        for mid in inner if fill else (inner[(len(inner) - 1) // 2],):
            for n in {leaders[a], leaders[b], DEFAULT_CONFIG, *contenders.get(mid, [])}:
                want[n].add(mid)
    asked = {s for n, sizes in want.items() if n != DEFAULT_CONFIG for s in sizes}
    for s in asked:  # (c) the baseline goes wherever a forced configuration goes, at least as often
        most = max(_n(configs[n], s) + (s in want[n]) for n in alive)
        if _n(default, s) + (s in want[DEFAULT_CONFIG]) < most:
            want[DEFAULT_CONFIG].add(s)
    return {n: tuple(sorted(sizes)) for n, sizes in want.items() if sizes}


def size_ranges(leaders: Mapping[int, str]) -> list[dict[str, Any]]:
    """Adjacent ladder sizes with the same leader merged: ``[{"min_bytes", "max_bytes", "config"}]``."""
    out: list[dict[str, Any]] = []
    for s in sorted(leaders):
        if out and out[-1]["config"] == leaders[s]:
            out[-1]["max_bytes"] = s
        else:
            out.append({"min_bytes": s, "max_bytes": s, "config": leaders[s]})
    return out
