"""Which (algorithm, protocol) NCCL ran an (op, size)'s calls with, when the trace says (NCCL Inspector's
``coll_algo``/``coll_proto``, its Prometheus ``algo_proto``) or the job's NCCL log does (``trace --nccl-log``:
the TUNING choice lines, :class:`LoggedPairs`), and which of NCCL's model's figures to judge them against: the
choice's when NCCL ran it, a near tie's own expected busbw when NCCL ran that tie (NCCL versions move such
thresholds, so the tie is as normal a pick as the choice), and the choice's, said so, when NCCL ran a pair the
model neither chooses nor finds near (a tuner plugin, NCCL_ALGO/NCCL_PROTO, another NCCL version).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from collscope.collectives.nccl_log.choices import SizeChoice
from collscope.collectives.nccl_log.records import NcclLog
from collscope.traces.compare import ModelFigure
from collscope.traces.record import CollectiveCall
from collscope.vocab.channel_limits import channel_limits_set
from collscope.vocab.ops import OP_BY_NCCL_FUNC

__all__ = ["RanPairs", "ran_pairs", "ModelPick", "pick_figure", "LoggedPairs", "logged_pairs", "call_pair", "TRACE",
           "LOG"]

UNKNOWN = "?"
TRACE = "the trace"
LOG = "the NCCL log"
"""Where a call's pair came from, as the notes say it."""


@dataclass(slots=True)
class LoggedPairs:
    """What the job's NCCL logs say NCCL ran per (op, size): their TUNING choice lines (NCCL >= 2.21 with
    ``NCCL_DEBUG_SUBSYS`` including TUNING; rank 0 of each communicator prints one per call). The lines name no
    communicator, so an (op, size) that the logs show run with several pairs (another group size, a tuner, a
    change within the run) gives none."""

    choices: tuple[SizeChoice, ...]
    sources: tuple[str, ...]
    unnamed: int = 0
    """Choice lines that name no function (NCCL 2.21-2.22): not attributable to an op, left out."""
    ambiguous: set[tuple[str, int]] = field(default_factory=set)
    """(op, size) the logs show with several pairs, filled in as calls ask."""
    channel_bounds: tuple[str, ...] = ()
    """The channel bounds the logs echo (``NCCL_MAX_CTAS=8``, :data:`collscope.vocab.channel_limits.CHANNEL_LIMITS`):
    the job's calls ran on other channel counts than the model's figures assume."""

    def pair(self, op: str, size_bytes: int, group_size: int | None) -> tuple[str, str] | None:
        """The one pair the logs show for a call of ``op`` and ``size_bytes`` (counted as records count it:
        :meth:`SizeChoice.op_size_bytes` with the call's group size); None when none or several."""
        found = {(c.algorithm, c.protocol) for c in self.choices
                 if OP_BY_NCCL_FUNC.get(c.op or "") == op and c.op_size_bytes(group_size) == size_bytes}
        if len(found) > 1:
            self.ambiguous.add((op, size_bytes))
            return None
        return next(iter(found), None)

    def warnings(self) -> list[str]:
        out = []
        if not self.choices:
            out.append(f"{', '.join(self.sources)}: no per-operation choice line (NCCL >= 2.21 prints them with "
                       "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING): which pair NCCL ran stays unknown")
        if self.unnamed:
            out.append(f"{self.unnamed} choice line(s) of the NCCL log name no function (NCCL 2.21-2.22): left out")
        if self.channel_bounds:
            out.append(f"the NCCL log shows {', '.join(self.channel_bounds)} set: the job's calls ran on channels "
                       "bounded by them, where the model's figures assume NCCL's own count (how busbw moves with the "
                       "channels is in neither NCCL's model nor the published results), so the goodput against "
                       "the model holds for NCCL's own count")
        if self.ambiguous:
            out.append("the NCCL log shows several (algorithm, protocol) for " + ", ".join(
                f"{op} {size} B" for op, size in sorted(self.ambiguous)) + " (its lines name no communicator: "
                "another group size, a tuner or a change within the run): which one a call ran is not said")
        return out


def logged_pairs(logs: Sequence[NcclLog]) -> LoggedPairs:
    """The choice lines of the job's NCCL logs."""
    named = tuple(c for log in logs for c in log.size_choices if c.op is not None)
    unnamed = sum(c.calls for log in logs for c in log.size_choices if c.op is None)
    bounds = tuple(dict.fromkeys(b for log in logs for b in channel_limits_set(log.env)))
    return LoggedPairs(named, tuple(log.source for log in logs), unnamed, channel_bounds=bounds)


def call_pair(call: CollectiveCall, logged: LoggedPairs | None) -> tuple[str | None, str | None, str]:
    """A call's (algorithm, protocol, source): the trace's own, else the NCCL log's for its op and size."""
    if call.algorithm is None and logged is not None and call.size_bytes is not None:
        found = logged.pair(call.op, call.size_bytes, call.group_size)
        if found is not None:
            return found[0], found[1], LOG
    return call.algorithm, call.protocol, TRACE


@dataclass(frozen=True, slots=True)
class RanPairs:
    """The pairs an (op, size)'s calls ran with: ``Ring/LL128`` (``Ring/?`` when only the algorithm is known)
    and how many calls each; calls the trace gives no pair for count under ``?``."""

    counts: tuple[tuple[str, int], ...]
    sources: tuple[str, ...] = ()
    """Where the known pairs came from (:data:`TRACE`, :data:`LOG`)."""

    @property
    def says(self) -> str:
        """``the trace says`` / ``the NCCL log says`` / ``the trace and the NCCL log say``."""
        return f"{' and '.join(self.sources)} {'says' if len(self.sources) == 1 else 'say'}"

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


def ran_pairs(pairs: Iterable[tuple[str | None, str | None] | tuple[str | None, str | None, str]]) -> RanPairs:
    """The calls' (algorithm, protocol[, source]), most common first, unknown last; the source defaults to
    :data:`TRACE`."""
    counts: Counter[str] = Counter()
    sources: list[str] = []
    for algo, proto, *source in pairs:
        counts[UNKNOWN if algo is None else f"{algo}/{proto or UNKNOWN}"] += 1
        if algo is not None:
            sources.append(source[0] if source else TRACE)
    return RanPairs(tuple(sorted(counts.items(), key=lambda kv: (kv[0] == UNKNOWN, -kv[1], kv[0]))),
                    tuple(dict.fromkeys(sorted(sources, key=(TRACE, LOG).index))))


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
                         f"{ran.says} NCCL ran {said}; the figure is the model's choice, {figure.choice}")
    ties = [(pair, bw) for pair, bw in figure.ties if _matches(single, pair)]
    if _matches(single, figure.choice):
        if ties:  # Ring/? against a Ring/Simple choice and a Ring/LL128 tie: which one ran is not said
            return ModelPick(figure.busbw_gbps, figure.choice,
                             f"{ran.says} NCCL ran {single.partition('/')[0]}, not with which protocol; the "
                             f"figure is the model's choice, {figure.choice} (near tie: {figure.near_ties})")
        return ModelPick(figure.busbw_gbps, figure.choice, f"{ran.says} NCCL ran {single}, the model's choice")
    if len(ties) == 1:
        pair, bw = ties[0]
        return ModelPick(bw, pair, f"{ran.says} NCCL ran {pair}, a near tie of the model's choice "
                                   f"{figure.choice} ({figure.busbw_gbps:.3g} GB/s): judged against the tie's own "
                                   "figure")
    return ModelPick(figure.busbw_gbps, figure.choice,
                     f"{ran.says} NCCL ran {single}, which NCCL's model neither chooses nor finds near here "
                     f"(its choice {figure.choice}): a tuner plugin, NCCL_ALGO/NCCL_PROTO or another NCCL "
                     "version picked it; the figure is the choice's")
