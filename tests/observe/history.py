"""Generated nightly histories of clusters for observe's tests and benches: what a fleet's nightly nccl-tests job
gives (one all_reduce_perf run a night, 2 nodes x 8 GPUs, in-place and out-of-place per size), with planted
changes, NCCL upgrades and bad nights, written as Measurement JSONL files (``collscope ingest --out``'s shape) so
that ``observe ingest`` reads them as it reads a fleet's.

:func:`busbw_matrix` gives the values alone (nights x sizes), for tests of the detector without a store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from collscope.collectives.record import Measurement, write_jsonl

FIRST_NIGHT = datetime(2026, 9, 1, 2, 0, tzinfo=timezone.utc)
SIZES = tuple(1 << k for k in range(16, 33))
"""64 KiB .. 4 GiB, nccl-tests' -b 64K -e 4G -f 2."""
PEAK_GBPS = 380.0
HALF_BYTES = 32 << 20
"""busbw = PEAK * size / (size + HALF): latency-bound small sizes, bandwidth-bound large ones."""


@dataclass(frozen=True, kw_only=True)
class Shift:
    """From ``night`` on, busbw x ``factor`` at sizes ``lo_bytes`` .. ``hi_bytes``."""

    night: int
    factor: float
    lo_bytes: int = 0
    hi_bytes: int = 1 << 62


@dataclass(frozen=True, kw_only=True)
class ClusterPlan:
    """One cluster's nights."""

    cluster: str
    nights: int = 60
    noise: float = 0.02
    """Run-to-run noise of one record's busbw (sigma of its log)."""
    nccl: Sequence[tuple[int, str]] = ((0, "2.28.9"),)
    """(first night, NCCL version) upgrades."""
    shifts: Sequence[Shift] = ()
    bad_nights: dict[int, float] = field(default_factory=dict)
    """night -> busbw factor at every size (a bad night: a sick node, a noisy neighbour)."""
    hosts: tuple[str, str] = ("node001", "node002")
    bad_hosts: tuple[str, str] = ("node001", "node077")
    """The node set of a bad night."""
    sizes: tuple[int, ...] = SIZES
    seed: int = 0


def busbw_matrix(plan: ClusterPlan, placements: int = 1) -> np.ndarray:
    """nights x sizes (x placements when > 1) of busbw in GB/s, with the plan's noise, shifts and bad nights."""
    rng = np.random.default_rng(plan.seed)
    sizes = np.array(plan.sizes, dtype=float)
    clean = PEAK_GBPS * sizes / (sizes + HALF_BYTES)
    factor = np.ones((plan.nights, len(sizes)))
    for s in plan.shifts:
        factor[s.night:, (sizes >= s.lo_bytes) & (sizes <= s.hi_bytes)] *= s.factor
    for night, f in plan.bad_nights.items():
        factor[night, :] *= f
    shape = (plan.nights, len(sizes), placements)
    values = (clean * factor)[:, :, None] * np.exp(rng.normal(0.0, plan.noise, shape))
    return values[:, :, 0] if placements == 1 else values


def night_time(night: int) -> datetime:
    return FIRST_NIGHT + timedelta(days=night)


def nccl_on(plan: ClusterPlan, night: int) -> str:
    return [v for first, v in sorted(plan.nccl) if first <= night][-1]


def write_history(directory: Path, plans: Sequence[ClusterPlan]) -> list[Path]:
    """One Measurement JSONL file per cluster and night under ``directory`` (``<cluster>/night-NNN.jsonl``)."""
    paths = []
    for plan in plans:
        values = busbw_matrix(plan, placements=2)
        for night in range(plan.nights):
            hosts = plan.bad_hosts if night in plan.bad_nights else plan.hosts
            when = night_time(night).isoformat()
            records = []
            for j, size in enumerate(plan.sizes):
                for p, in_place in enumerate((False, True)):
                    busbw = float(values[night, j, p])
                    algbw = busbw * 16 / (2 * 15)
                    records.append(Measurement(
                        engine="nccl-tests", backend="nccl", op="all_reduce", size_bytes=size, count=size // 4,
                        dtype="float", redop="sum", root=None, in_place=in_place, nranks=16, nnodes=2,
                        time_us=size / (algbw * 1e3), algbw_gbps=algbw, busbw_gbps=busbw, wrong=0, iters=20,
                        warmup=5, hosts=hosts, gpu="NVIDIA H200", cluster=plan.cluster,
                        nccl_version=nccl_on(plan, night), engine_version="2.19.6", timestamp=when,
                        time_over_ranks="mean", process_shape="16x1x1"))
            path = directory / plan.cluster / f"night-{night:03d}.jsonl"
            write_jsonl(path, records)
            paths.append(path)
    return paths


PLANTED_NIGHT = 35
PLANTED = ClusterPlan(cluster="alpha", nccl=((0, "2.28.9"), (PLANTED_NIGHT, "2.29.2")),
                      shifts=(Shift(night=PLANTED_NIGHT, factor=0.90, lo_bytes=64 << 20, hi_bytes=1 << 30),), seed=11)
"""The done-when history's first cluster: -10 % at 64 MiB .. 1 GiB from night 35, with NCCL 2.28.9 -> 2.29.2."""
BAD_NIGHT = 41
QUIET = ClusterPlan(cluster="beta", nccl=((0, "2.28.9"), (22, "2.29.2")), bad_nights={BAD_NIGHT: 0.55}, seed=12)
"""The second: an NCCL upgrade at night 22 that costs nothing, and one bad night (41, on another node set)."""
