"""NVLS's shortest step on sm100 (collscope/analysis/nccl_model/measured.py nvls_step_us): NCCL shrinks the NVLS
chunk for smaller messages (src/enqueue.cc calcCollChunking), and on sm100 a step of small chunks takes at least
NVLS_STEP_MIN_US, a floor fitted on two published 8-GPU curves (bench/nvls_step_fit.py).

The fixture is written in the shape of those curves (GCP A4's 8 B200, OCI's GB300 NVL72 on 2 trays): 130 GB/s at
4 MiB, a step between 8 and 16 MiB where NCCL's chunk doubles at 12 MiB, and another between 64 and 128 MiB
(96 MiB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_settings import model_settings
from collscope.analysis.nccl_model import measured
from collscope.analysis.nccl_model.choice import nccl_choice
from collscope.analysis.nccl_model.model import nccl_bandwidth
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.params import link_params
from collscope.cli import main
from tests.scripts import load_bench

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests" / "all_reduce_perf-b200-8gpu-nvls-chunk-steps.txt"
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def _inputs(gpu: str, nranks: int, nnodes: int, **kw: object):  # type: ignore[no-untyped-def]
    return graph_inputs_from_topology(link_params(None, gpu=gpu, nranks=nranks, nnodes=nnodes, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(("gpu", "nranks", "nnodes", "domain", "steps"), [
    # 24 channels x 8 heads: 2 x 192 x 32 KiB = 12 MiB, 8 x 192 x 64 KiB = 96 MiB, 64 x 192 x 128 KiB = 1.5 GiB
    ("B200", 8, 1, None, (12 * MIB, 96 * MIB, 3 * GIB // 2)),
    # 16 channels x 8 heads: 8 MiB, 64 MiB, 1 GiB
    ("H100", 8, 1, None, (8 * MIB, 64 * MIB, GIB)),
    # 64 GPUs of an NVL72 rack: 24 channels x 32 heads, 4 x 8 GPUs' ops: 48 MiB, 384 MiB, 6 GiB
    ("GB300", 64, 16, 72, (48 * MIB, 384 * MIB, 6 * GIB)),
])
def test_nvls_chunks_follow_nccls_rule(gpu: str, nranks: int, nnodes: int, domain: int | None,
                                       steps: tuple[int, int, int]) -> None:
    inputs = _inputs(gpu, nranks, nnodes, **({"nvl_domain": domain} if domain else {}))
    chunks = (16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB)
    for edge, below, at in zip(steps, chunks[:-1], chunks[1:], strict=True):
        assert measured.nvls_chunk_bytes(inputs, edge - 1)[0] == below
        assert measured.nvls_chunk_bytes(inputs, edge)[0] == at


def test_the_floor_charges_small_chunks_on_sm100_inside_one_domain_only() -> None:
    b200 = _inputs("B200", 8, 1)
    bw = nccl_bandwidth(b200, "all_reduce", "NVLS", "Simple")
    ops = 24 * 8
    step_us = ops * 16 * KIB / (1000 * bw)  # 16 KiB chunks at NCCL's NVLS rate: about 7.7 us
    assert step_us < measured.NVLS_STEP_MIN_US
    assert measured.nvls_step_us(b200, "all_reduce", "NVLS", "Simple", 8 * MIB) == pytest.approx(
        8 * MIB / (ops * 16 * KIB) * (measured.NVLS_STEP_MIN_US - step_us))
    # 64 KiB chunks from 96 MiB: a step's bytes take longer than the floor
    assert measured.nvls_step_us(b200, "all_reduce", "NVLS", "Simple", 128 * MIB) == 0.0
    assert measured.nvls_step_us(b200, "all_reduce", "Ring", "Simple", 8 * MIB) == 0.0
    assert measured.nvls_step_us(b200, "all_reduce", "NVLS", "LL", 8 * MIB) == 0.0
    assert measured.nvls_step_us(_inputs("H100", 8, 1), "all_reduce", "NVLS", "Simple", 4 * MIB) == 0.0
    assert measured.nvls_step_us(_inputs("B200", 16, 2, nic_gbit=400), "all_reduce", "NVLS", "Simple",
                                 8 * MIB) == 0.0
    # the whole rack: 32 heads make a step long enough at every chunk
    rack = _inputs("GB300", 64, 16, nvl_domain=72)
    assert measured.nvls_step_us(rack, "all_reduce", "NVLS", "Simple", 8 * MIB) == 0.0


def test_the_expected_measurement_holds_the_published_mid_sizes() -> None:
    """The claimed rows of NVLS all_reduce on 8 sm100 GPUs of one NVLink domain at 4-128 MiB: within 15% with the
    floor, and the three of them at 4-8 MiB 22-29% off without it."""
    scorecard = load_bench("scorecard", "scorecard_for_nvls_step")
    rows = [r for r in scorecard.read_published()
            if r.op == "all_reduce" and r.nranks == 8 and 4 * MIB <= r.size_bytes <= 128 * MIB
            and not r.off_reason and any(g in r.gpu for g in ("B200", "B300", "GB200", "GB300"))]
    with_floor = scorecard.score(rows)
    nvls = [s for s in with_floor if s.model == "NCCL NVLS/Simple"]
    assert len(nvls) >= 10
    assert all(s.within for s in nvls), [(s.row.system, s.row.size_bytes, s.ratio) for s in nvls if not s.within]
    shipped = measured.NVLS_STEP_MIN_US
    try:
        measured.NVLS_STEP_MIN_US = 0.0
        without = {id(s.row): s for s in scorecard.score(rows)}
    finally:
        measured.NVLS_STEP_MIN_US = shipped
    off = [s for s in nvls if not without[id(s.row)].within and s.row.size_bytes <= 8 * MIB]
    assert len(off) >= 3 and all(without[id(s.row)].ratio > 1.2 for s in off)


def test_analyze_calls_the_published_shape_normal_and_names_the_floor() -> None:
    result = analyze(load_results([RUN], nnodes=1), params=link_params(None, gpu="B200", nranks=8, nnodes=1))
    rows = result.sizes[~result.sizes["in_place"]]
    assert set(rows["verdict"]) == {"normal"}
    (note,) = [n for n in result.notes if "NVLS's shortest step on sm100" in n]
    assert "4M (16K chunks), 8M (16K chunks)" in note and "calcCollChunking" in note
    assert measured.NVLS_STEP_SOURCES in note


def test_without_the_floor_analyze_called_the_same_run_low(monkeypatch: pytest.MonkeyPatch) -> None:
    """The false alarm the floor removes: the model's smooth ramp alone expects 165-237 GB/s at 4-8 MiB."""
    monkeypatch.setattr(measured, "NVLS_STEP_MIN_US", 0.0)
    result = analyze(load_results([RUN], nnodes=1), params=link_params(None, gpu="B200", nranks=8, nnodes=1))
    rows = result.sizes[~result.sizes["in_place"]]
    assert set(rows[rows["size_bytes"] <= 8 * MIB]["verdict"]) == {"low"}
    assert not [n for n in result.notes if "NVLS's shortest step" in n]


def test_predict_names_the_floor_where_it_paces_the_time() -> None:
    out = CliRunner().invoke(main, ["predict", "--gpu", "B200", "--op", "all_reduce", "--nranks", "8", "--nnodes",
                                    "1", "--sizes", "8M,512M"])
    assert out.exit_code == 0, out.output
    assert "the expected NVLS time of all_reduce at 8M (16K chunks) is paced by NVLS's shortest step" in out.output
    assert "NVLS step floor" in out.output
    big = nccl_choice(_inputs("B200", 8, 1), "all_reduce", 512 * MIB)
    assert big.algo == "NVLS" and big.expected_time_us > 0
    h100 = CliRunner().invoke(main, ["predict", "--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes",
                                     "1", "--sizes", "4M"])
    assert h100.exit_code == 0 and "shortest step" not in h100.output


def test_the_floor_fit_holds_leaving_one_source_out(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/nvls_step_fit.py: the shipped floor places more claimed rows within 15% than none, and so do the floors
    chosen with each source left out."""
    assert load_bench("nvls_step_fit").main() == 0
    out = capsys.readouterr().out
    without = int(out.split("floor    0 us: ")[1].split("/")[0])
    shipped = int(out.split(" (shipped)")[0].rsplit("us: ", 1)[1].split("/")[0])
    held, held_without = out.split("leaving one source out: ")[1].split(" within 15% (")
    assert shipped > without
    assert int(held.split("/")[0]) > int(held_without.split(" ")[0])


def test_nccl_nvls_chunksize_is_read_as_nccl_reads_it() -> None:
    assert model_settings({"NCCL_NVLS_CHUNKSIZE": "32768"}, "all_reduce").nvls_chunk_bytes == 32768
    raw = model_settings({"NCCL_NVLS_CHUNKSIZE": "64K"}, "all_reduce")  # strtoll: 64
    assert raw.nvls_chunk_bytes == 64 and any("ignores 'K'" in n for n in raw.nvls_notes)
    zero = model_settings({"NCCL_NVLS_CHUNKSIZE": "0"}, "all_reduce")
    assert zero.nvls_chunk_bytes is None and any("keeps NCCL's default" in n for n in zero.nvls_notes)
    assert model_settings({}, "all_reduce").nvls_chunk_bytes is None
    assert "NCCL_NVLS_CHUNKSIZE" not in " ".join(model_settings({"NCCL_NVLS_CHUNKSIZE": "32768"},
                                                                "all_reduce").unmodelled)


def test_a_smaller_nvls_chunk_moves_the_chunk_edges_and_slows_larger_sizes() -> None:
    b200 = _inputs("B200", 8, 1)
    small = model_settings({"NCCL_NVLS_CHUNKSIZE": "32768"}, "all_reduce").applied_to(b200)
    assert measured.nvls_chunk_bytes(small, GIB)[0] == 32 * KIB  # 64 KiB there at NCCL's default
    assert measured.nvls_chunk_bytes(small, 12 * MIB - 1)[0] == 16 * KIB
    assert measured.nvls_step_us(small, "all_reduce", "NVLS", "Simple", 256 * MIB) > 0.0
    assert measured.nvls_step_us(b200, "all_reduce", "NVLS", "Simple", 256 * MIB) == 0.0
    big = model_settings({"NCCL_NVLS_CHUNKSIZE": str(4 * MIB)}, "all_reduce").applied_to(b200)
    assert measured.nvls_chunk_bytes(big, 16 * GIB)[0] == 512 * KIB  # the Simple step at the default NCCL_BUFFSIZE

    def expected(*setting: str) -> float:
        out = CliRunner().invoke(main, ["predict", "--gpu", "B200", "--op", "all_reduce", "--nranks", "8",
                                        "--nnodes", "1", "--sizes", "256M", "--json", *setting])
        assert out.exit_code == 0, out.output
        return json.loads(out.output)["nccl_choice"][0]["expected_busbw_gbps"]

    assert expected("--setting", "NCCL_NVLS_CHUNKSIZE=32768") < 0.95 * expected()


def test_where_the_step_sets_the_pace_nvls_own_rate_gains_nothing() -> None:
    """The ceiling analyze judges 'suspicious' against (NVLS's own rate, tests/analysis/test_nvls_ceiling.py) keeps
    the shortest step: at 8 MiB (16 KiB chunks, the floor binds at either rate) it is the expected figure; at 16 GiB
    it is 15% above it."""
    b200 = _inputs("B200", 8, 1)
    small = nccl_choice(b200, "all_reduce", 8 * MIB)
    assert small.algo == "NVLS" and small.ceiling_busbw_gbps == pytest.approx(small.expected_busbw_gbps, rel=1e-6)
    big = nccl_choice(b200, "all_reduce", 16 * GIB)
    assert big.ceiling_busbw_gbps > 1.1 * big.expected_busbw_gbps
