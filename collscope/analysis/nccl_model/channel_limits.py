"""The channels NCCL runs an algorithm on when a run bounds them
(:data:`collscope.vocab.channel_limits.CHANNEL_LIMITS`), next to the count the model assumes: NCCL's own
(:func:`.measured.runtime_channels`).

NCCL's cost model does not see the bound: it rates an algorithm by its graph's channels (src/graph/tuning.cc
``busBw = graphs[a]->nChannels * bw``), so the algorithm NCCL chooses is the same, and the run moves the data on
the bounded channels (src/enqueue.cc ``topoGetAlgoInfo``: ``nc = comm->nChannels`` or ``comm->nvlsChannels``).
How busbw moves with the channels is not in NCCL's model and the published results hold no channel-bounded curve
to fit it on, so a size run on another count than the model's is not judged against it (:mod:`..efficiency`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from collscope.analysis.nccl_model.measured import runtime_channels
from collscope.analysis.nccl_model.model import NcclGraphInputs
from collscope.units import format_size_span
from collscope.vocab.channel_limits import CHANNEL_LIMITS
from collscope.vocab.nccl import ALGORITHMS

__all__ = ["BoundChannels", "bound_channels", "bound_text", "channel_bound_note", "predicted_bound_note"]

_MAXCHANNELS = 64
"""src/include/device.h MAXCHANNELS (2.30)."""
_NVLS = ("NVLS", "NVLSTree")


@dataclass(frozen=True, kw_only=True, slots=True)
class BoundChannels:
    """The channels of an algorithm under a run's bounds, against the model's count."""

    algo: str
    model_channels: int | None
    """NCCL's own count, which the model assumes; None for grouped point-to-point (``P2P``), whose channels NCCL
    derives from the collective ones per peer and per size (src/graph/paths.cc ``ncclTopoComputeP2pChannels``,
    which honours the same bounds)."""
    channels: int | None
    """The count the bounds leave; None where :attr:`model_channels` is."""
    settings: tuple[str, ...]
    """The bounds that were set, as ``NAME=value``."""


def _bounds(settings: Mapping[str, str], *, nvls: bool) -> tuple[int | None, int | None, tuple[str, ...]]:
    """(lower, upper, the settings read): the largest minimum and the smallest maximum of the variables that apply;
    a value that is not a positive integer is not applied (NCCL keeps its default for it, src/init.cc)."""
    lows: list[int] = []
    highs: list[int] = []
    read: list[str] = []
    for limit in CHANNEL_LIMITS:
        if limit.name not in settings or (nvls and not limit.clamps_nvls):
            continue
        try:
            value = int(str(settings[limit.name]).strip())
        except ValueError:
            continue
        if value <= 0:
            continue
        (lows if limit.bound == "min" else highs).append(min(value, _MAXCHANNELS))
        read.append(f"{limit.name}={settings[limit.name]}")
    high = min(highs) if highs else None
    low = max(lows) if lows else None
    if low is not None and high is not None and low > high:  # src/init.cc: a min above the max is set to the max
        low = high
    return low, high, tuple(read)


def _clamp(n: int, low: int | None, high: int | None) -> int:
    if high is not None:
        n = min(n, high)
    if low is not None:
        n = max(n, low)
    return n


def _channels(inputs: NcclGraphInputs, algo: str, settings: Mapping[str, str]) -> tuple[int, tuple[str, ...]]:
    """The channels ``algo`` runs on under ``settings``, and the bounds read."""
    if algo not in _NVLS:
        low, high, read = _bounds(settings, nvls=False)
        return _clamp(runtime_channels(inputs, algo), low, high), read
    low, high, read = _bounds(settings, nvls=True)
    channels = _clamp(runtime_channels(inputs, algo), low, high)
    if algo == "NVLS" and inputs.nnodes > 1:  # at most the collective channels across nodes
        c_low, c_high, c_read = _bounds(settings, nvls=False)
        channels = min(channels, _clamp(runtime_channels(inputs, "Ring"), c_low, c_high))
        read = tuple(dict.fromkeys(read + c_read))
    return channels, read


def bound_channels(inputs: NcclGraphInputs | None, algo: str, settings: Mapping[str, str]) -> BoundChannels | None:
    """The channels ``algo`` runs on under ``settings``' bounds when they differ from NCCL's own count; None when
    no bound is set or the bounds leave NCCL's count as it is. ``inputs`` may be None for grouped point-to-point
    (``P2P``), whose counts are not derived here."""
    if algo not in ALGORITHMS:  # P2P: any bound changes channels the p2p model counts with NCCL's own rule
        _, _, read = _bounds(settings, nvls=False)
        return BoundChannels(algo=algo, model_channels=None, channels=None, settings=read) if read else None
    if inputs is None:
        raise ValueError(f"the channels of {algo} need NCCL's graph inputs")
    channels, read = _channels(inputs, algo, settings)
    model, _ = _channels(inputs, algo, {})
    if not read or channels == model:
        return None
    return BoundChannels(algo=algo, model_channels=model, channels=channels, settings=read)


def bound_text(bound: BoundChannels) -> str:
    """``NCCL_MAX_CTAS=4 run NVLS on 4 channels where the model assumes NCCL's own 16``."""
    runs = (f"run {bound.algo} on {bound.channels} channel{'s' if bound.channels != 1 else ''} where the model "
            f"assumes NCCL's own {bound.model_channels}" if bound.channels is not None else
            f"bound the channels of {bound.algo}, which the model counts by NCCL's own rule")
    return f"{', '.join(bound.settings)} {runs}"


def channel_bound_note(config: str, op: str, bound: BoundChannels, sizes: Iterable[int]) -> str:
    """What analyze says of the sizes of ``config`` it did not judge because their channels are bounded."""
    return (f"{op} {config}: {bound_text(bound)}: not judged at {format_size_span(sizes)}, as neither NCCL's model nor "
            "the published results say how busbw moves with the channels; compare it with a configuration at "
            "NCCL's own count in the same sweep (analyze's crossovers, collscope recommend)")


def predicted_bound_note(op: str, bound: BoundChannels, sizes: Iterable[int]) -> str:
    """What predict says of the sizes whose channels the job's settings bound."""
    return (f"{op}: {bound_text(bound)}: the expected measurements at {format_size_span(sizes)} are for NCCL's own "
            "count, as neither NCCL's model nor the published results say how busbw moves with the channels")
