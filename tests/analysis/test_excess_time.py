"""``excess_time``: a size that took longer than the next size allows at the link bound.

The published shape (tests/fixtures/nccl-tests/published/sendrecv_perf-readme-excerpt-command-g8-no-header-first-size-
slow.txt, own numbers) follows a README excerpt of ``sendrecv_perf -b 128M -e 1G -f 2 -g 8`` on 8 A100 NVLink GPUs
(li-plus/playground cuda/nccl.md): the first size reaches 110 GB/s where the next ones reach 190, in both columns.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from collscope.analysis import anomalies
from collscope.analysis.bounds import excess_time_us
from collscope.analysis.compare import AnalyzeOptions, analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_types import LinkParams
from collscope.cli import main
from collscope.collectives.record import Measurement, write_jsonl

MIB = 1 << 20
STALLED = (FIXTURES / "nccl-tests" / "published"
           / "sendrecv_perf-readme-excerpt-command-g8-no-header-first-size-slow.txt")
GEOMETRY = ("--gpu", "A100")  # 8 ranks on 1 node: the bare command line says it


def _anomalies(path: Path, *extra: str) -> list[dict]:  # type: ignore[type-arg]
    result = CliRunner().invoke(main, ["analyze", str(path), *GEOMETRY, *extra, "--json"])
    assert result.exit_code == 0, result.output
    return [a for a in json.loads(result.stdout)["anomalies"] if a["kind"] == "excess_time"]


def test_the_excess_is_the_time_the_larger_size_leaves_unexplained() -> None:
    # 128 MiB in 1211.2 us, 256 MiB in 1423.3 us, 300 GB/s: the extra 128 MiB needs 447.4 us, the step took 212.1
    excess = excess_time_us(128 * MIB, 1211.2, 256 * MIB, 1423.3, busbw_factor=1.0, bound_busbw_gbps=300.0)
    assert math.isclose(excess, 1211.2 - (1423.3 - 128 * MIB / 300e3), rel_tol=1e-12)
    assert 235 < excess < 236
    # a curve at the bound leaves none; the factor counts the bus bytes (all_reduce on 8 ranks: 1.75)
    assert excess_time_us(MIB, 10 + 1.75 * MIB / 100e3, 2 * MIB, 10 + 3.5 * MIB / 100e3, busbw_factor=1.75,
                          bound_busbw_gbps=100.0) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError):
        excess_time_us(2 * MIB, 1.0, MIB, 2.0, busbw_factor=1.0, bound_busbw_gbps=100.0)


def test_a_published_first_size_that_holds_a_stall_is_flagged_in_both_columns() -> None:
    found = _anomalies(STALLED)
    assert sorted((a["size_bytes"], a["in_place"]) for a in found) == [(128 * MIB, False), (128 * MIB, True)]
    detail = next(a["detail"] for a in found if not a["in_place"])
    # 1180.4 us at 128 MiB, 1405.7 at 256 MiB: 225.3 us for 134 MB, 596 GB/s on the margin against 300
    assert "1180 us holds at least 222 us (19%)" in detail and "596 GB/s" in detail and "300 GB/s" in detail
    assert "one measurement per size" in detail


def test_the_same_curve_without_the_stall_is_not_flagged(tmp_path: Path) -> None:
    steady = tmp_path / "sendrecv.txt"
    # 128 MiB at the next sizes' 191 GB/s: 702.7 us
    steady.write_text(STALLED.read_text().replace("1180.4  113.71  113.71", " 702.7  191.00  191.00")
                      .replace("1182.0  113.55  113.55", " 702.7  191.00  191.00"))
    assert _anomalies(steady) == []


def _records(times_us: dict[int, list[float]]) -> list[Measurement]:
    return [Measurement.from_timing(op="all_reduce", size_bytes=size, nranks=8, time_us=t, engine="nccl-tests",
                                    backend="nccl", count=size // 4, dtype="float", redop="sum", root=None,
                                    in_place=False, nnodes=1, wrong=0, ok=True, iters=20, warmup=5, repeat=r,
                                    settings={}, point_id="p", sweep_id="s", hosts=("n1",))
            for size, times in times_us.items() for r, t in enumerate(times)]


PARAMS = LinkParams(nranks=8, nnodes=1, alpha_us=5.0, bw_gbps=100.0)  # ring bound 100 GB/s


def _at_bound_us(size: int) -> float:
    return 5.0 + 1.75 * size / 100e3


def _flagged(tmp_path: Path, times_us: dict[int, list[float]], options: AnalyzeOptions | None = None) -> list[int]:
    path = tmp_path / "records.jsonl"
    write_jsonl(path, _records(times_us))
    result = analyze(load_results(path), params=PARAMS, options=options)
    return [a.size_bytes for a in result.anomalies if a.kind == "excess_time"]


def test_repeats_weaken_the_claim_to_the_fastest_against_the_slowest(tmp_path: Path) -> None:
    big = 64 * MIB
    t32, t64 = _at_bound_us(32 * MIB), _at_bound_us(big)
    # every repeat of 32 MiB 30% slow: flagged
    assert _flagged(tmp_path, {32 * MIB: [1.3 * t32] * 3, big: [t64] * 3}) == [32 * MIB]
    # the median 30% slow, the fastest repeat on the curve: run-to-run spread, not a stall
    assert _flagged(tmp_path, {32 * MIB: [t32, 1.3 * t32, 1.3 * t32], big: [t64] * 3}) == []
    # the threshold is an option
    assert _flagged(tmp_path, {32 * MIB: [1.3 * t32] * 3, big: [t64] * 3},
                    AnalyzeOptions(excess_time_threshold=0.5)) == []


def test_the_latency_side_is_left_to_the_dip_and_drop_checks(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # 8 KiB and 16 KiB are latency bound (5 us against 0.3 us of data): a 2 us hiccup is 40% of the time, but the
    # larger size is far below half the bound, where a timer's jitter is of that order
    small, large = 8 << 10, 16 << 10
    hiccup = {small: [_at_bound_us(small) + 2.0], large: [_at_bound_us(large)]}
    assert _flagged(tmp_path, hiccup) == []
    # the half-bound rule is what leaves it alone: without it the hiccup reads as excess
    monkeypatch.setattr(anomalies, "EXCESS_TIME_MIN_BOUND_SHARE", 0.0)
    assert _flagged(tmp_path, hiccup) == [small]
