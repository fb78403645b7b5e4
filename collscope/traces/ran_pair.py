"""Which (algorithm, protocol) NCCL ran an (op, size)'s calls with, when the trace says (NCCL Inspector's
``coll_algo``/``coll_proto``, its Prometheus ``algo_proto``), and which of NCCL's model's figures to judge them
against: the choice's when NCCL ran it, a near tie's own expected busbw when NCCL ran that tie (NCCL versions
move such thresholds, so the tie is as normal a pick as the choice), and the choice's, said so, when NCCL ran a
pair the model neither chooses nor finds near (a tuner plugin, NCCL_ALGO/NCCL_PROTO, another NCCL version).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from collscope.traces.compare import ModelFigure

__all__ = ["RanPairs", "ran_pairs", "ModelPick", "pick_figure"]

UNKNOWN = "?"


@dataclass(frozen=True, slots=True)
class RanPairs:
    """The pairs an (op, size)'s calls ran with: ``Ring/LL128`` (``Ring/?`` when only the algorithm is known)
    and how many calls each; calls the trace gives no pair for count under ``?``."""

    counts: tuple[tuple[str, int], ...]

    @property
    def single(self) -> str | None:
        """The one pair every call ran with; None when calls differ or any call's pair is unknown."""
        if len(self.counts) == 1 and self.counts[0][0] != UNKNOWN:
            return self.counts[0][0]
        return None

    def describe(self) -> str | None:
        """``Ring/LL128``, or ``NVLS/Simple x3, Ring/LL128 x1, ? x2``; None when no call names one."""
        if not self.counts or all(pair == UNKNOWN for pair, _ in self.counts):
            return None
        if self.single:
            return self.single
        return ", ".join(f"{'unknown' if pair == UNKNOWN else pair} x{n}" for pair, n in self.counts)


def ran_pairs(pairs: Iterable[tuple[str | None, str | None]]) -> RanPairs:
    """The calls' (algorithm, protocol), most common first, unknown last."""
    counts = Counter(UNKNOWN if algo is None else f"{algo}/{proto or UNKNOWN}" for algo, proto in pairs)
    return RanPairs(tuple(sorted(counts.items(), key=lambda kv: (kv[0] == UNKNOWN, -kv[1], kv[0]))))


@dataclass(frozen=True, slots=True)
class ModelPick:
    """The model's figure to judge the calls against and what it is for."""

    busbw_gbps: float
    pair: str | None
    """The pair the figure is for (None: an alpha-beta figure)."""
    note: str | None
    """How the pair NCCL ran relates to the model's choice, in words; None when the trace does not say."""


def _matches(ran: str, pair: str) -> bool:
    """``Ring/LL128`` is ``Ring/LL128``; ``Ring/?`` (the protocol not said) is any Ring pair."""
    algo, _, proto = ran.partition("/")
    return ran == pair or (proto == UNKNOWN and pair.partition("/")[0] == algo)


def pick_figure(figure: ModelFigure, ran: RanPairs) -> ModelPick:
    """The figure for the pair the calls ran with (see the module's docstring)."""
    base = ModelPick(figure.busbw_gbps, figure.choice, None)
    said = ran.describe()
    if said is None or figure.choice is None:
        return base
    single = ran.single
    if single is None:
        return ModelPick(figure.busbw_gbps, figure.choice,
                         f"the trace says NCCL ran {said}; the figure is the model's choice, {figure.choice}")
    ties = [(pair, bw) for pair, bw in figure.ties if _matches(single, pair)]
    if _matches(single, figure.choice):
        if ties:  # Ring/? against a Ring/Simple choice and a Ring/LL128 tie: which one ran is not said
            return ModelPick(figure.busbw_gbps, figure.choice,
                             f"the trace says NCCL ran {single.partition('/')[0]}, not with which protocol; the "
                             f"figure is the model's choice, {figure.choice} (near tie: {figure.near_ties})")
        return ModelPick(figure.busbw_gbps, figure.choice, f"the trace says NCCL ran {single}, the model's choice")
    if len(ties) == 1:
        pair, bw = ties[0]
        return ModelPick(bw, pair, f"the trace says NCCL ran {pair}, a near tie of the model's choice "
                                   f"{figure.choice} ({figure.busbw_gbps:.3g} GB/s): judged against the tie's own "
                                   "figure")
    return ModelPick(figure.busbw_gbps, figure.choice,
                     f"the trace says NCCL ran {single}, which NCCL's model neither chooses nor finds near here "
                     f"(its choice {figure.choice}): a tuner plugin, NCCL_ALGO/NCCL_PROTO or another NCCL "
                     "version picked it; the figure is the choice's")
