"""A trace that says which (algorithm, protocol) NCCL ran (NCCL Inspector's coll_algo/coll_proto) is judged
against the model's figure for that pair: the choice's, a near tie's own, or the choice's with the reason the
pair that ran is neither."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.traces.compare import ModelFigure
from collscope.traces.ran_pair import pick_figure, ran_pairs

FIGURE = ModelFigure(168.0, choice="Ring/Simple", ties=(("Ring/LL128", 229.0),))
"""8 H100 of one node, reduce_scatter at 32 MiB: Ring/Simple leads Ring/LL128 by 1.9% in NCCL's model
(tests/analysis/test_near_ties.py), each with its expected busbw."""


@pytest.mark.parametrize(("ran", "busbw", "pair", "words"), [
    ([("Ring", "LL128")] * 3, 229.0, "Ring/LL128", "a near tie of the model's choice Ring/Simple (168 GB/s)"),
    ([("Ring", "Simple")] * 2, 168.0, "Ring/Simple", "NCCL ran Ring/Simple, the model's choice"),
    ([("NVLS", "Simple")], 168.0, "Ring/Simple", "neither chooses nor finds near here (its choice Ring/Simple)"),
    ([("Ring", "LL128"), ("Ring", "Simple"), ("Ring", "LL128")], 168.0, "Ring/Simple",
     "NCCL ran Ring/LL128 x2, Ring/Simple x1; the figure is the model's choice, Ring/Simple"),
    ([("Ring", "LL128"), (None, None)], 168.0, "Ring/Simple", "Ring/LL128 x1, unknown x1"),
    ([("Ring", None)], 168.0, "Ring/Simple", "NCCL ran Ring, not with which protocol"),
    ([("NVLS", None)], 168.0, "Ring/Simple", "NCCL ran NVLS/?, which NCCL's model neither chooses"),
], ids=["near-tie", "choice", "neither", "mixed", "some-unknown", "algo-only-ambiguous", "algo-only-other"])
def test_the_figure_follows_the_pair_nccl_ran(ran, busbw, pair, words):
    pick = pick_figure(FIGURE, ran_pairs(ran))
    assert (pick.busbw_gbps, pick.pair) == (busbw, pair)
    assert pick.note is not None and words in pick.note, pick.note


def test_a_trace_that_does_not_say_keeps_the_choice_and_says_nothing():
    pick = pick_figure(FIGURE, ran_pairs([(None, None)] * 4))
    assert (pick.busbw_gbps, pick.pair, pick.note) == (168.0, "Ring/Simple", None)
    alpha_beta = pick_figure(ModelFigure(100.0), ran_pairs([("Ring", "LL")]))  # no pair to compare with
    assert (alpha_beta.busbw_gbps, alpha_beta.pair, alpha_beta.note) == (100.0, None, None)


def _inspector_line(rank: int, coll: str, algo: str, proto: str, per_rank_bytes: int, time_us: float) -> str:
    """One NCCL Inspector v4.2 record (tests/fixtures/inspector-v4x/v4.2-*.log is the same shape)."""
    return json.dumps({
        "header": {"id": "0x51c0ffee00d2", "comm_name": "TP", "rank": rank, "n_ranks": 8, "nnodes": 1},
        "metadata": {"inspector_output_format_version": "v4.2", "git_rev": "v2.30.7-1", "rec_mechanism":
                     "nccl_profiler_interface", "dump_timestamp_us": 1764640900000412, "hostname": "hgx-b07",
                     "pid": 7100 + rank},
        "coll_perf": {"coll": coll, "coll_algo": algo, "coll_proto": proto, "coll_sn": 11,
                      "coll_msg_size_bytes": per_rank_bytes, "coll_exec_time_us": time_us,
                      "coll_timing_source": "kernel_gpu", "coll_algobw_gbs": 0.0, "coll_busbw_gbs": 0.0}}) + "\n"


def test_trace_judges_a_near_tie_nccl_ran_against_the_ties_own_figure(tmp_path):
    """A reduce_scatter of 32 MiB on 8 H100 that NCCL ran as Ring/LL128 at 240 GB/s busbw: 95% of the tie's
    253 GB/s, where the choice's 209 GB/s would have read it as 115%."""
    time_us = round((32 << 20) * 7 / 8 / 240e3, 1)  # busbw 240 GB/s: (n-1)/n of the total at algbw
    path = tmp_path / "nccl-inspector-rank0.log"
    path.write_text(_inspector_line(0, "ReduceScatter", "RING", "LL128", 4 << 20, time_us))
    res = CliRunner().invoke(main, ["trace", str(path), "--gpu", "H100", "--nnodes", "1", "--json"])
    assert res.exit_code == 0, res.output
    [row] = json.loads(res.output)["summary"]
    assert (row["op"], row["size_bytes"], row["ran"], row["model_pair"]) == \
        ("reduce_scatter", 32 << 20, "Ring/LL128", "Ring/LL128")
    assert row["model_busbw_gbps"] == pytest.approx(253, rel=0.01)
    assert row["goodput_ratio"] == pytest.approx(240 / 253.2, rel=0.01)
    assert "95% of the model's 253 GB/s busbw" in row["verdict"]
    assert "a near tie of the model's choice Ring/Simple (209 GB/s)" in row["verdict"]
    assert "if it runs" not in row["verdict"]  # the trace settled which pair ran
    [call] = json.loads(res.output)["collectives"]
    assert (call["algorithm"], call["protocol"]) == ("Ring", "LL128")
    report = CliRunner().invoke(main, ["trace", str(path), "--gpu", "H100", "--nnodes", "1",
                                       "--report", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<th>NCCL ran</th>" in page and "<td>Ring/LL128</td>" in page and "<td>253 (Ring/LL128)</td>" in page


def test_trace_says_when_nccl_ran_a_pair_the_model_does_not_choose(tmp_path):
    """tests/fixtures/inspector-v4x/v4.2: NCCL ran the 128 MiB reduce_scatter as Ring/LL128, which NCCL's model
    does not choose for 8 H100 at 128 MiB (Ring/Simple, no near tie there); NVLS/Simple at 1 GiB is its choice."""
    from pathlib import Path

    fixture = Path(__file__).parent.parent / "fixtures" / "inspector-v4x" / "v4.2-dgx-h100-a07-pid41122.log"
    res = CliRunner().invoke(main, ["trace", str(fixture), "--gpu", "H100", "--nnodes", "1", "--json"])
    assert res.exit_code == 0, res.output
    rows = {(r["op"], r["size_bytes"]): r for r in json.loads(res.output)["summary"]}
    scatter = rows[("reduce_scatter", 128 << 20)]
    assert (scatter["ran"], scatter["model_pair"]) == ("Ring/LL128", "Ring/Simple")
    assert "neither chooses nor finds near here (its choice Ring/Simple)" in scatter["verdict"]
    assert "NCCL_ALGO/NCCL_PROTO" in scatter["verdict"]
    big = rows[("all_reduce", 1 << 30)]
    assert (big["ran"], big["model_pair"]) == ("NVLS/Simple", "NVLS/Simple")
    assert "the trace says NCCL ran NVLS/Simple, the model's choice" in big["verdict"]


def test_the_pair_that_ran_goes_into_the_fleet_history(tmp_path):
    """``collscope trace --json`` ingested by ``observe``: each summary row's ``ran`` is a tag the history can
    query, next to its goodput."""
    from pathlib import Path

    from collscope.observe import ingest, query

    fixture = Path(__file__).parent.parent / "fixtures" / "inspector-v4x" / "v4.2-dgx-h100-a07-pid41122.log"
    res = CliRunner().invoke(main, ["trace", str(fixture), "--gpu", "H100", "--nnodes", "1", "--json"])
    assert res.exit_code == 0, res.output
    (tmp_path / "job-trace.json").write_text(res.output)
    ingest([tmp_path / "job-trace.json"], tmp_path / "store")
    rows = query(tmp_path / "store", "SELECT op, size_bytes, tags['ran'] AS ran FROM records WHERE kind = 'trace' "
                                     "ORDER BY op, size_bytes").to_pylist()
    assert [(r["op"], r["size_bytes"], r["ran"]) for r in rows] == [
        ("all_reduce", 64 << 10, "Ring/LL"), ("all_reduce", 1 << 30, "NVLS/Simple"),
        ("reduce_scatter", 128 << 20, "Ring/LL128")]


def _kineto_job(tmp_path):
    """Two ranks of one node (tests/traces/trace_fixtures.nccl_kernel_metadata): an all_reduce of 4 MiB and an
    all_gather of 8000 B in all (4000 B per rank); the Kineto trace names no algorithm."""
    from tests.traces import trace_fixtures as fx

    tmp_path.mkdir()
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", fx.nccl_kernel_metadata(r))
    return tmp_path


def _nccl_log(lines: list[str]) -> str:
    head = ["gpu-a01:4100:4100 [0] NCCL INFO NCCL version 2.27.5+cuda12.9",
            "gpu-a01:4100:4120 [0] NCCL INFO comm 0x5a1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0"]
    return "\n".join(head + [f"gpu-a01:4100:4100 [0] NCCL INFO {line}" for line in lines]) + "\n"


def _trace_with_log(tmp_path, lines: list[str]) -> dict:
    """``collscope trace --json`` of the two-rank Kineto job with an NCCL log of these lines."""
    job = _kineto_job(tmp_path / "job")
    log = tmp_path / "nccl.log"
    log.write_text(_nccl_log(lines))
    res = CliRunner().invoke(main, ["trace", str(job), "--gpu", "A100", "--nnodes", "1", "--nccl-log", str(log),
                                    "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_trace_takes_the_pair_from_the_jobs_nccl_log(tmp_path):
    """--nccl-log: the TUNING choice lines say the pair of calls whose Kineto trace does not. NCCL >= 2.24 logs an
    AllGather's one-rank share (4000 B of the 8000 B the records count); the notes say the log said it."""
    doc = _trace_with_log(tmp_path, ["AllReduce: 4194304 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..1}",
                                     "AllGather: 4000 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"])
    rows = {r["op"]: r for r in doc["summary"]}
    assert (rows["all_reduce"]["ran"], rows["all_gather"]["ran"]) == ("Ring/LL128", "Ring/LL")
    assert "the NCCL log says NCCL ran Ring/LL128" in rows["all_reduce"]["verdict"]
    assert {(c["op"], c["algorithm"], c["protocol"], c["pair_source"]) for c in doc["collectives"]} == {
        ("all_reduce", "Ring", "LL128", "the NCCL log"), ("all_gather", "Ring", "LL", "the NCCL log")}
    plain = json.loads(CliRunner().invoke(main, ["trace", str(tmp_path / "job"), "--gpu", "A100", "--nnodes", "1",
                                                 "--json"]).output)
    assert all(r["ran"] is None and r["model_note"] is None for r in plain["summary"])  # without it: not said


def test_a_log_that_shows_several_pairs_for_one_size_says_none(tmp_path):
    """The choice lines name no communicator: two pairs for one (op, size) leave the calls' pair unknown, said."""
    doc = _trace_with_log(tmp_path, ["AllReduce: 4194304 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..1}",
                                     "AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}"])
    assert {r["op"]: r["ran"] for r in doc["summary"]} == {"all_reduce": None, "all_gather": None}
    assert any("several (algorithm, protocol) for all_reduce 4194304 B" in w for w in doc["warnings"])
    bare = tmp_path / "bare.log"
    bare.write_text(_nccl_log(["Channel 00/02 :    0   1"]))
    res = CliRunner().invoke(main, ["trace", str(tmp_path / "job"), "--gpu", "A100", "--nnodes", "1",
                                    "--nccl-log", str(bare)])
    assert res.exit_code == 0, res.output
    assert "no per-operation choice line" in res.output and "NCCL_DEBUG_SUBSYS=INIT,TUNING" in res.output


def test_channel_bounds_the_log_echoes_are_said_next_to_the_models_figures(tmp_path):
    """NCCL echoes a bound it read (src/misc/param.cc: 'NCCL_MAX_CTAS set by environment to 4.'): the job ran on
    other channel counts than the model's figures assume, and the warnings say so."""
    doc = _trace_with_log(tmp_path, ["NCCL_MAX_CTAS set by environment to 4.",
                                     "AllReduce: 4194304 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..1}"])
    said = [w for w in doc["warnings"] if "NCCL_MAX_CTAS=4 set" in w]
    assert len(said) == 1 and "the model's figures assume NCCL's own count" in said[0]
    (tmp_path / "plain").mkdir()
    plain = _trace_with_log(tmp_path / "plain", ["AllReduce: 4194304 Bytes -> Algo RING proto LL128 "
                                                 "channel{Lo..Hi}={0..1}"])
    assert not any("set: the job's calls ran on channels" in w for w in plain["warnings"])


def test_a_file_that_is_no_nccl_log_is_refused_by_name(tmp_path):
    job = _kineto_job(tmp_path / "job")
    notes = tmp_path / "notes.txt"
    notes.write_text("just some text\n")
    res = CliRunner().invoke(main, ["trace", str(job), "--nccl-log", str(notes)])
    assert res.exit_code == 2, res.output
    assert str(notes) in res.output and "NCCL_DEBUG=INFO log" in res.output and "Traceback" not in res.output


def test_choice_lines_that_name_no_function_are_left_out_and_counted():
    """NCCL 2.21-2.22 print ``1024 Bytes -> Algo 1 proto 2 time 12.5`` without the function: no op to give it."""
    from collscope.collectives.nccl_log.parse import parse_nccl_log
    from collscope.traces.ran_pair import logged_pairs

    log = parse_nccl_log(_nccl_log(["4194304 Bytes -> Algo 1 proto 2 time 40.5",
                                    "4194304 Bytes -> Algo 1 proto 2 time 40.5",
                                    "AllGather: 67108864 Bytes -> Algo 1 proto 2 time 251.5"]), "rank0.log")
    pairs = logged_pairs([log])
    assert pairs.pair("all_reduce", 4 << 20, 2) is None  # the function is not said
    assert pairs.pair("all_gather", 64 << 20, 2) == ("Ring", "Simple")  # a 2.23 line: already the total
    assert pairs.warnings() == ["2 choice line(s) of the NCCL log name no function (NCCL 2.21-2.22): left out"]


def test_trace_names_nvls_own_rate_where_nccls_table_holds_it_lower(tmp_path):
    """An 8 GiB all_reduce on 8 B200 that NCCL ran as NVLS/Simple at 840 GB/s busbw: 117% of NCCL's table (716),
    whose graph caps NVLS at 8 x 90 GB/s; the line names NVLS's own rate inside one NVLink domain (~824), the figure
    analyze judges 'suspicious' against (tests/analysis/test_nvls_ceiling.py). 8 H100 have no such figure."""
    def line(gpu_busbw: float) -> str:
        return _inspector_line(0, "AllReduce", "NVLS", "SIMPLE", 8 << 30, round((8 << 30) * 1.75 / (gpu_busbw * 1e3)))

    path = tmp_path / "nccl-inspector-rank0.log"
    path.write_text(line(840.0))
    res = CliRunner().invoke(main, ["trace", str(path), "--gpu", "B200", "--nnodes", "1", "--json"])
    assert res.exit_code == 0, res.output
    [row] = json.loads(res.output)["summary"]
    assert row["model_pair"] == "NVLS/Simple" and row["model_busbw_gbps"] == pytest.approx(716, rel=0.01)
    assert row["model_ceiling_gbps"] == pytest.approx(824, rel=0.01)
    assert "NVLS's own rate inside one NVLink domain, which NCCL's table holds lower: 824 GB/s" in row["verdict"]
    h100 = tmp_path / "h100" / "nccl-inspector-rank0.log"
    h100.parent.mkdir()
    h100.write_text(line(470.0))
    res = CliRunner().invoke(main, ["trace", str(h100), "--gpu", "H100", "--nnodes", "1", "--json"])
    assert res.exit_code == 0, res.output
    [row] = json.loads(res.output)["summary"]
    assert row["model_ceiling_gbps"] is None and "own rate" not in row["verdict"]


def test_trace_says_where_its_figure_leans_on_nvls_shortest_step(tmp_path):
    """An 8 MiB all_reduce on 8 B200 that NCCL ran as NVLS/Simple at 188 GB/s busbw: the model's figure is paced by
    NVLS's shortest step on sm100 (16 KiB chunks), a term fitted on two published curves, and trace says so as
    predict and analyze do (tests/analysis/test_nvls_step.py); at 512 MiB it does not."""
    def run(size: int, busbw: float) -> dict:
        path = tmp_path / str(size) / "nccl-inspector-rank0.log"
        path.parent.mkdir()
        path.write_text(_inspector_line(0, "AllReduce", "NVLS", "SIMPLE", size, round(size * 1.75 / (busbw * 1e3))))
        res = CliRunner().invoke(main, ["trace", str(path), "--gpu", "B200", "--nnodes", "1", "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    small = run(8 << 20, 188.0)
    [said] = [w for w in small["warnings"] if "NVLS's shortest step on sm100" in w]
    assert "all_reduce at 8M (16K chunks)" in said
    [row] = small["summary"]
    assert row["model_pair"] == "NVLS/Simple" and 150 < row["model_busbw_gbps"] < 200  # 237 without the floor
    assert not [w for w in run(512 << 20, 700.0)["warnings"] if "shortest step" in w]
