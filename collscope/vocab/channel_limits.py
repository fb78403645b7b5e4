"""The NCCL variables that bound the channels (CTAs) a collective runs on: one row each, with the bound it sets and
whether it also clamps NVLS's channels. Read by the NCCL log's warnings, ``nccl-log``'s model comparison and
``analyze``'s verdicts (:mod:`collscope.analysis.nccl_model.channel_limits`).

NCCL 2.30 (src/graph/connect.cc ``ncclTopoPostset``): the collective channels become
``min(NCCL_MAX_NCHANNELS, channels, maxCTAs)``, then are copied up to ``max(NCCL_MIN_NCHANNELS, minCTAs)``;
``NCCL_MIN_CTAS``/``NCCL_MAX_CTAS`` set ``comm->config.minCTAs``/``maxCTAs`` (src/init.cc ``envConfigOverride``,
NCCL >= 2.17; a min above the max sets both to the max). NVLS's channels are clamped to ``[minCTAs, maxCTAs]``
only (src/transport/nvls.cc ``ncclNvlsTuning``), and a multi-node NVLS call runs on at most the collective
channels (src/enqueue.cc ``topoGetAlgoInfo``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["ChannelLimit", "CHANNEL_LIMITS", "CHANNEL_LIMIT_NAMES", "channel_limits_set"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ChannelLimit:
    """One variable that bounds the channels."""

    name: str
    bound: Literal["min", "max"]
    clamps_nvls: bool
    """Whether NVLS/NVLSTree's own channel count (``comm->nvlsChannels``) is clamped by it too."""


CHANNEL_LIMITS = (
    ChannelLimit(name="NCCL_MIN_CTAS", bound="min", clamps_nvls=True),
    ChannelLimit(name="NCCL_MAX_CTAS", bound="max", clamps_nvls=True),
    ChannelLimit(name="NCCL_MIN_NCHANNELS", bound="min", clamps_nvls=False),
    ChannelLimit(name="NCCL_MAX_NCHANNELS", bound="max", clamps_nvls=False),
)
CHANNEL_LIMIT_NAMES = tuple(limit.name for limit in CHANNEL_LIMITS)


def channel_limits_set(env: Mapping[str, str]) -> list[str]:
    """The channel bounds ``env`` sets, as ``NAME=value``, in table order."""
    return [f"{name}={env[name]}" for name in CHANNEL_LIMIT_NAMES if name in env]
