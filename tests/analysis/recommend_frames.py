"""Synthetic results: rows in the shape of ``collscope.analysis.load.load_results``'s DataFrame (``frame``),
or written as a results directory for the real loader (``write_results``)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from collscope.collectives.record import Measurement, write_jsonl

KNOB_COLUMNS = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_BUFFSIZE",
                "OMPI_MCA_coll_tuned_use_dynamic_rules", "OMPI_MCA_coll_tuned_allreduce_algorithm",
                "OMPI_MCA_coll_tuned_allgather_algorithm")


def config_of(knobs: Mapping[str, str]) -> str:
    return ";".join(f"{k}={v}" for k, v in sorted(knobs.items())) or "default"


def cell_rows(*, op: str = "all_reduce", knobs: Mapping[str, str] | None = None, sizes: Iterable[int],
              busbw: Callable[[int], float] | float, repeats: Iterable[float] = (0.99, 1.0, 1.01),
              nranks: int = 8, nnodes: int | None = 1, backend: str = "nccl", engine: str = "nccl-tests",
              ok: bool = True, applied: bool | None = None, failure: str | None = None, in_place: bool = False,
              sweep_id: str = "sw-test", nccl_version: str = "2.27.5") -> list[dict[str, Any]]:
    """One row per (size, repeat): busbw(size) x each factor of ``repeats``; time_us follows from busbw (taken as
    the algorithm bandwidth: decimal GB/s = 1e3 bytes per microsecond)."""
    knobs = dict(knobs or {})
    out = []
    for size in sizes:
        base = busbw(size) if callable(busbw) else busbw
        for i, factor in enumerate(repeats):
            bw = base * factor
            row: dict[str, Any] = dict(
                engine=engine, backend=backend, op=op, size_bytes=size, count=size // 4, dtype="float",
                redop="sum", root=None, in_place=in_place, nranks=nranks, nnodes=nnodes,
                time_us=size / (bw * 1e3) if bw > 0 else 1.0,
                algbw_gbps=bw, busbw_gbps=bw, wrong=0, error=None, ok=ok, iters=20, warmup=5, repeat=i,
                point_id=f"p-{config_of(knobs)}", sweep_id=sweep_id, nccl_version=nccl_version,
                engine_version="2.13.4", source="synthetic", timestamp="2025-01-01T00:00:00", hosts="node01",
                config=config_of(knobs), applied=(pd.NA if applied is None else applied),
                failure=(pd.NA if failure is None else failure))
            for k in KNOB_COLUMNS:
                row[k] = knobs.get(k, pd.NA)
            out.append(row)
    return out


def frame(*parts: list[dict[str, Any]]) -> pd.DataFrame:
    rows = [r for p in parts for r in p]
    df = pd.DataFrame(rows)
    df["applied"] = df["applied"].astype("boolean")
    df["nnodes"] = df["nnodes"].astype("Int64")
    # string columns are categoricals in load_results' frame
    for name in ("engine", "backend", "op", "dtype", "config", "failure", "sweep_id", "nccl_version", "hosts",
                 "point_id", "source", *KNOB_COLUMNS):
        df[name] = df[name].astype("category")
    return df


def write_results(root: Path, *parts: list[dict[str, Any]]) -> Path:
    """The rows of :func:`cell_rows` as a results directory that ``load_results`` reads: ``sweep.json``,
    ``points/<point_id>.jsonl`` (Measurement records, the knobs as settings), ``points/<point_id>.check.json``
    where ``applied`` is set, ``failures.jsonl`` where ``failure`` is set. Returns ``root``."""
    rows = [r for p in parts for r in p]
    by_point: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_point.setdefault(str(row["point_id"]), []).append(row)
    (root / "points").mkdir(parents=True, exist_ok=True)
    (root / "sweep.json").write_text(json.dumps({"sweep_id": rows[0]["sweep_id"] if rows else "sw-test"}))
    failures = []
    for point_id, point_rows in by_point.items():
        write_jsonl(root / "points" / f"{point_id}.jsonl", [_measurement(r) for r in point_rows])
        applied, failure = point_rows[0]["applied"], point_rows[0]["failure"]
        if applied is not pd.NA:
            (root / "points" / f"{point_id}.check.json").write_text(json.dumps({"applied": bool(applied)}))
        if failure is not pd.NA:
            failures.append(json.dumps({"point_id": point_id, "reason": failure}) + "\n")
    if failures:
        (root / "failures.jsonl").write_text("".join(failures))
    return root


def _measurement(row: Mapping[str, Any]) -> Measurement:
    fields = ("engine", "backend", "op", "size_bytes", "count", "dtype", "redop", "root", "in_place", "nranks",
              "nnodes", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "error", "ok", "iters", "warmup", "repeat",
              "point_id", "sweep_id", "nccl_version", "engine_version", "source", "timestamp")
    settings = {k: str(row[k]) for k in KNOB_COLUMNS if row[k] is not pd.NA}
    return Measurement(**{f: row[f] for f in fields}, settings=settings, hosts=(row["hosts"],))


# ---- planted curves of issue 11 (time-weighted recommendations, one noise rule) ----------------------------------
KIB, MIB = 1 << 10, 1 << 20
SIZES_1G = [8 << i for i in range(28)]  # 8 B .. 1 GiB
LL = {"NCCL_PROTO": "LL"}
TREE_LL = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}
RING_SIMPLE = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}


def default_bw(size: int) -> float:
    """busbw (= algbw here) in GB/s of 10 us + size / 100 GB/s."""
    return size / (10.0 + size / 100e3) / 1e3


def noisy(knobs: dict[str, str], ratio: Any, seed: int, sizes: list[int] = SIZES_1G, **kw: Any) -> list[dict[str, Any]]:
    """Rows of one config: default_bw x ratio(size), 3 repeats each within +-1% (seeded)."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for size in sizes:
        factors = tuple(1 + rng.uniform(-0.01, 0.01) for _ in range(3))
        rows += cell_rows(knobs=knobs, sizes=[size], busbw=default_bw(size) * ratio(size), repeats=factors, **kw)
    return rows


def ll_rows() -> list[list[dict[str, Any]]]:
    """NCCL_PROTO=LL: +40% at 8 B..512 KiB, -50% at 1 MiB..1 GiB (the mean of per-size gains is +4.6%)."""
    return [noisy({}, lambda s: 1.0, 1), noisy(LL, lambda s: 1.4 if s <= 512 * KIB else 0.5, 2)]


def planted_rows() -> list[list[dict[str, Any]]]:
    """Tree/LL +30% only <= 64 KiB (-30% above), Ring/Simple +20% only >= 256 MiB (-10% below), default between."""
    return [noisy({}, lambda s: 1.0, 3), noisy(TREE_LL, lambda s: 1.3 if s <= 64 * KIB else 0.7, 4),
            noisy(RING_SIMPLE, lambda s: 1.2 if s >= 256 * MIB else 0.9, 5)]


def write_all_reduce_points(root: Path, points: Mapping[str, tuple[Mapping[str, str], float]], *, nranks: int,
                            nnodes: int, sizes: Iterable[int], sweep_id: str, nccl_version: str = "2.24.3") -> Path:
    """A results directory through the store (``ResultsDir.finish_point``): one nccl-tests all_reduce point per
    ``point_id -> (settings, busbw)``, every size at that busbw, on ``nnodes`` hosts ``gpu-a01``... Returns
    ``root``."""
    from collscope.results.store import ResultsDir

    results = ResultsDir(root)
    results.points_dir.mkdir(parents=True)
    hosts = tuple(f"gpu-a{i + 1:02d}" for i in range(nnodes))
    for point_id, (settings, busbw) in points.items():
        records = [Measurement.from_timing(op="all_reduce", size_bytes=size, nranks=nranks, nnodes=nnodes,
                                           time_us=size / (busbw * nranks / (2 * (nranks - 1))) / 1e3,
                                           engine="nccl-tests", backend="nccl", count=size // 4, dtype="float",
                                           redop="sum", root=None, in_place=False, wrong=0, ok=True, iters=20,
                                           warmup=5, repeat=0, settings=dict(settings), point_id=point_id,
                                           sweep_id=sweep_id, hosts=hosts, nccl_version=nccl_version)
                   for size in sizes]
        results.finish_point(point_id, records)
    results.sweep_json.write_text(json.dumps({"sweep_id": sweep_id, "plan": {"points": []}}))
    return root
