"""A run's own per-call cost (collscope/analysis/run_cost.py run_costs_us): when a run's fastest small call
(64 B-64 KiB) takes longer than NCCL's model says, every call of that setup pays the difference (one process driving
all GPUs with -g N, a net plugin's own work), so the expected time of its larger sizes is the model's plus that cost,
and a note says so, instead of a 'low' verdict for it. The cost excuses a slower call only: a call faster than the
model without it is still judged against the model.

The fixture is written in the shape of SURF Snellius' published H100 node run (one process, -g 4, sizes from 64 B;
odissei-benchmarks/nccl-tests runs/1node): flat 17.9-18.8 us from 64 B to 64 KiB, 22.9 us at 1 MiB.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.params import link_params
from collscope.analysis.run_cost import RUN_FLOOR_MAX_BYTES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
RUN = FIXTURES / "reduce_scatter_perf-g4-h100-one-process-18us-floor.txt"
MIB = 1 << 20


def _sizes(result, size: int, in_place: bool = False) -> pd.Series:
    rows = result.sizes[(result.sizes["size_bytes"] == size) & (result.sizes["in_place"] == in_place)]
    (row,) = rows.to_dict(orient="records")
    return row


def test_the_runs_own_per_call_cost_is_added_and_said():
    params = link_params(None, gpu="H100", nranks=4, nnodes=1)
    result = analyze(load_results([RUN], nnodes=1), params=params)
    one = _sizes(result, MIB)
    assert one["verdict"] == "normal" and 0.9 < one["efficiency"] < 1.1 and "per-call cost" in one["algo_source"]
    (note,) = [n for n in result.notes if n.startswith("reduce_scatter default: this run's fastest call")]
    assert "of sizes 64-64K takes 17.9 us (size 8K)" in note and "added to the expected time at 128K-32M" in note
    assert _sizes(result, 2 * MIB)["verdict"] == "normal"  # faster than model + cost, not than the model
    small = _sizes(result, 64 * 1024)
    assert "per-call cost" not in small["algo_source"]  # the sizes that give the cost are judged against the model


def test_without_the_floor_the_same_point_reads_low():
    """What the floor changes: with the small sizes left out the curve has no floor and 1 MiB is 'low' (78%)."""
    frame = load_results([RUN], nnodes=1)
    frame = frame[frame["size_bytes"] > RUN_FLOOR_MAX_BYTES]
    result = analyze(frame, params=link_params(None, gpu="H100", nranks=4, nnodes=1))
    assert _sizes(result, MIB)["verdict"] == "low"
    assert not [n for n in result.notes if "per-call floor" in n]


def test_a_cost_needs_three_small_sizes_and_a_model_below_them():
    from collscope.analysis.bounds import Bound
    from collscope.analysis.expected import Expected
    from collscope.analysis.run_cost import run_costs_us

    def exp(busbw: float) -> Expected:
        return Expected(model="Ring/LL", kind="nccl", algo_source="m", busbw_gbps=busbw,
                        bound=Bound(algo="Ring", busbw_gbps=450.0, limited_by="intra-node links"))

    base = {"backend": "nccl", "op": "all_reduce", "config": "c", "nranks": 8, "nnodes": 1, "in_place": False,
            "input": None}
    records = [dict(base, size_bytes=s, time_us=t) for s, t in ((1024, 20.0), (4096, 21.0), (1 << 20, 40.0))]
    model = {0: exp(2 * 7 / 8 * 1024 / (10.0 * 1e3)), 1: exp(1.0), 2: exp(50.0)}  # 10 us at 1 KiB
    assert run_costs_us(records, model) == {}  # two small sizes only
    records.append(dict(base, size_bytes=64, time_us=19.5))
    model[3] = exp(2 * 7 / 8 * 64 / (12.0 * 1e3))  # 12 us at 64 B
    ((_, cost),) = run_costs_us(records, model).items()
    assert (cost.floor_us, cost.floor_size) == (19.5, 64) and cost.extra_us == pytest.approx(7.5)
    model[3] = exp(2 * 7 / 8 * 64 / (25.0 * 1e3))  # the model already slower than the run there: no cost
    assert run_costs_us(records, model) == {}
