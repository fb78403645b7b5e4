"""What Inspector's Prometheus files say besides the calls (:mod:`collscope.traces.inspector_prom`): the labels
the reader knows, the per-device counters of ``NCCL_INSPECTOR_PROM_DUMP_STATS=1`` (NCCL ``plugins/profiler/inspector``
README: cumulative, labels ``version, slurm_job_id, node, gpu``) and :class:`PromRead`, the reader's full result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from collscope.traces.inspector_stream import AlgoProto
from collscope.traces.record import RankTrace

__all__ = ["STATS_METRICS", "KNOWN_LABELS", "PromRead", "loss_warning"]

STATS_METRICS = ("nccl_collectives_total", "nccl_collectives_dropped_total", "nccl_p2p_total", "nccl_p2p_dropped_total")
"""Per-device cumulative counters (``NCCL_INSPECTOR_PROM_DUMP_STATS=1``)."""
KNOWN_LABELS = frozenset({
    "version", "slurm_job_id", "node", "gpu", "comm_name", "n_nodes", "nranks", "collective", "message_size",
    "algo_proto", "p2p_operation",  # v5.1
    "comm_id", "hostname", "rank", "gpu_device_id", "coll_sn", "timestamp", "n_ranks", "nnodes"})  # 2.29
"""The labels the reader reads; others are tolerated and named in a warning."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromRead:
    """What one Inspector Prometheus file holds: the traces and what they cannot carry."""

    traces: tuple[RankTrace, ...]
    choices: tuple[tuple[AlgoProto | None, ...], ...]
    """``choices[i][j]``: the algorithm and protocol of ``traces[i].calls[j]`` (``algo_proto``), None where the
    label is absent, ``unknown_unknown`` or not understood."""
    versions: tuple[str, ...]
    slurm_job_ids: tuple[str, ...]
    counters: Mapping[tuple[str, str], Mapping[str, float]]
    """(node, gpu) -> :data:`STATS_METRICS` read for that device."""
    unread_metrics: Mapping[str, int]
    """Other metric names -> samples left out."""
    unread_labels: tuple[str, ...]


def loss_warning(device: tuple[str, str], counts: Mapping[str, float]) -> str:
    """The warning for a device whose counters say the ring overwrote records, or ""."""
    parts = []
    for what, total, dropped in (("collective", "nccl_collectives_total", "nccl_collectives_dropped_total"),
                                 ("point-to-point", "nccl_p2p_total", "nccl_p2p_dropped_total")):
        if counts.get(dropped, 0) > 0:
            of = f" of {counts[total]:.0f}" if total in counts else ""
            parts.append(f"{counts[dropped]:.0f}{of} {what} records ({dropped})")
    if not parts:
        return ""
    name = " ".join(x for x in device if x) or "an unnamed device"
    return (f"{name}: Inspector's ring overwrote {' and '.join(parts)} before they were dumped: its summaries "
            "leave them out")
