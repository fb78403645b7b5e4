"""Results directories for the analysis tests: a real small mpi sweep, and a planted synthetic one."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from collscope.collectives.record import Measurement
from collscope.results.store import ResultsDir
from tests.conftest import env_without_suite_defaults

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MIB = 1 << 20
SIZES = [8 << i for i in range(24)]  # 8 B .. 64 MiB
NRANKS = 8
DEBUG = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,TUNING"}


@pytest.fixture(scope="session")
def mpi_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep: the mpi-algos preset on 2 local ranks up to 16 KiB, 2 repeats (about 20 s)."""
    pytest.importorskip("mpi4py", reason="mpi4py not installed: pip install 'collscope[mpi]'")
    out = tmp_path_factory.mktemp("analysis") / "mpi algos; results"  # a hostile path on purpose
    cmd = [sys.executable, "-m", "collscope", "sweep", "run", "--preset", "mpi-algos", "--launcher", "local",
           "--nranks", "2", "--max-bytes", "16K", "--iters", "5", "--repeats", "2", "--out", str(out),
           "--no-progress"]
    # the preset's own configuration names, which the tests check exactly: no suite-wide OMPI_MCA_btl
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env_without_suite_defaults())
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@dataclass(frozen=True)
class Planted:
    """What was planted in the synthetic results directory."""

    root: Path
    default: str = "default"
    tree: str = "NCCL_ALGO=Tree"
    ll: str = "NCCL_ALGO=Ring;NCCL_PROTO=LL"
    simple: str = "NCCL_PROTO=Simple"
    dip_size: int = 8 * MIB
    drop_from: int = MIB
    spread_size: int = 4096
    wrong_size: int = MIB
    lost_point: str = "all-reduce-simple-timeout"


def planted_time(config: str, size: int, repeat: int) -> float:
    """alpha + size / bw per configuration, with the planted defects."""
    alpha, bw = {"default": (10.0, 100.0), "NCCL_ALGO=Tree": (4.0, 50.0), "NCCL_ALGO=Ring;NCCL_PROTO=LL": (6.0, 80.0),
                 "NCCL_PROTO=Simple": (12.0, 90.0)}[config]
    t = alpha + size / (bw * 1e3)
    t *= (0.99, 1.0, 1.01)[repeat]
    if config == "default" and size == 8 * MIB:
        t *= 3.0  # the 8 MiB dip
    if config == "NCCL_ALGO=Ring;NCCL_PROTO=LL" and size >= MIB:
        t *= 2.5  # the curve drops and stays low
    if config == "NCCL_ALGO=Tree" and size == 4096:
        t *= (1.0, 1.5, 2.0)[repeat]  # run-to-run spread
    return t


def _settings(config: str) -> dict[str, str]:
    if config == "default":
        return dict(DEBUG)
    return {**DEBUG, **dict(kv.split("=", 1) for kv in config.split(";"))}


def write_planted(root: Path) -> Planted:
    planted = Planted(root)
    results = ResultsDir(root)
    results.points_dir.mkdir(parents=True)
    points = []
    for config in (planted.default, planted.tree, planted.ll, planted.simple):
        for repeat in range(3):
            point_id = f"all-reduce-{config.replace(';', '-').replace('=', '')}-r{repeat}"
            points.append({"op": "all_reduce", "point_id": point_id, "repeat": repeat,
                           "settings": _settings(config)})
            records = [Measurement.from_timing(
                op="all_reduce", size_bytes=size, nranks=NRANKS, time_us=planted_time(config, size, repeat),
                engine="nccl-tests", backend="nccl", count=size // 4, dtype="float", redop="sum", root=None,
                in_place=False, nnodes=1, wrong=0, ok=not (config == "default" and size == planted.wrong_size
                                                           and repeat == 0),
                iters=20, warmup=5, repeat=repeat, settings=_settings(config), point_id=point_id,
                sweep_id="planted", hosts=("node01", "node 02"), nccl_version="2.27.5")
                for size in SIZES]
            results.finish_point(point_id, records)
            if config != "default":
                results.write_check(point_id, {"applied": config != planted.simple, "effects": {}})
            if config == planted.simple:
                results.record_failure(point_id, "setting not applied", "NCCL_PROTO: forced 'Simple', NCCL used LL")
            if config == planted.default and repeat == 0:
                results.record_failure(point_id, "wrong values", "wrong values at 1 size(s): 1048576")
    points.append({"op": "all_reduce", "point_id": planted.lost_point, "repeat": 0,
                   "settings": {**DEBUG, "NCCL_PROTO": "LL128"}})
    results.record_failure(planted.lost_point, "timeout", "timeout after 600 s")
    # never counted: a partial file of a killed attempt and a writer's temp file
    (results.points_dir / f"{planted.lost_point}.partial.jsonl").write_text(
        json.dumps(records[0].to_dict()) + "\n")
    (results.points_dir / ".x.jsonl.123.tmp").write_text("garbage")
    results.sweep_json.write_text(json.dumps({"sweep_id": "planted", "plan": {"points": points}}))
    assert math.isfinite(planted_time("default", 8, 0))
    return planted


@pytest.fixture(scope="session")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    return write_planted(tmp_path_factory.mktemp("planted") / "results")
