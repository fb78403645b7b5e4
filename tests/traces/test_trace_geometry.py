"""The geometry of a traced job and of each call's process group (issue 23 items 1-3 for traces).

Fixtures (ours, in the shapes PyTorch writes): ``kineto-128rank-rank0-tp64-metadata.json`` is rank 0 of a
128-rank job (PyTorch >= 2.4: collective metadata on the NCCL kernels and ``record_param_comms``, ``Process
Group Ranks`` cut after 30 ranks as ``util.cpp`` does, ``Global rank start``/``stride``, ``pg_config`` with the
world and a 64-rank sub-group); ``kineto-128rank-rank0-tp64-input-dims.json`` is the same job as older PyTorch
records it (``distributedInfo`` with rank and world_size only, sizes in ``Input Dims``, ``c10d::allgather_``
listing one output tensor per rank of its 64-rank group).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.errors import ParseError
from collscope.traces.compare import ModelFigure
from collscope.traces.load import read_traces
from collscope.traces.report import analyze_traces
from tests.traces import trace_fixtures as fx

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
META = FIXTURES / "kineto-128rank-rank0-tp64-metadata.json"
DIMS = FIXTURES / "kineto-128rank-rank0-tp64-input-dims.json"
GIB = 1 << 30


def _run(*args: str):
    return CliRunner().invoke(main, ["trace", *args])


def _calls(path: Path):
    (trace,) = read_traces([path])
    return {c.op: c for c in trace.calls}


def test_ranks_lists_as_pytorch_writes_them():
    from collscope.traces.pgroups import parse_ranks_text

    assert parse_ranks_text("[0, 1, 2, 3]") == ((0, 1, 2, 3), True)
    assert parse_ranks_text("[" + ", ".join(map(str, range(30))) + ", ...]") == (tuple(range(30)), False)
    assert parse_ranks_text([4, 5]) == ((4, 5), True)
    assert parse_ranks_text("[]") == ((), True)
    assert parse_ranks_text("0, 1") is None and parse_ranks_text("[a, b]") is None


def test_a_sub_group_all_gather_is_sized_on_its_group_not_the_world():
    """The issue's example: 1 GiB on 64 ranks, never 2 GiB on 128 (the older shape sized it with world_size)."""
    gather = _calls(DIMS)["all_gather"]
    assert (gather.size_bytes, gather.group_size) == (GIB, 64)
    assert gather.group_evidence == ("the output list of c10d::allgather_ holds 64 tensors",)
    reduce = _calls(DIMS)["all_reduce"]
    assert reduce.group_size == 128 and "the whole job is assumed" in reduce.group_evidence[0]


def test_each_call_gets_its_group_size_and_ranks_with_evidence():
    calls = _calls(META)
    gather = calls["all_gather"]
    assert (gather.size_bytes, gather.group_size, gather.process_group) == (GIB, 64, "1")
    assert gather.group_ranks == tuple(range(64))  # rebuilt from Global rank start/stride past the cut
    assert gather.group_evidence == (
        "Group size 64 in the NCCL kernel's metadata",
        "Process Group Ranks lists 30 ranks, then '...' (PyTorch cuts it after 30)",
        "pg_size 64 of process group '1' in distributedInfo.pg_config")
    assert calls["all_reduce"].group_size == 128 and calls["all_reduce"].group_ranks == tuple(range(128))


@pytest.mark.parametrize("path", [META, DIMS], ids=["metadata", "input-dims"])
def test_busbw_uses_the_group_size(path):
    report = analyze_traces(read_traces([path]))
    row = next(c for c in report.collectives if c["op"] == "all_gather")
    assert row["group_size"] == 64 and row["size_bytes"] == GIB
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 63 / 64)
    assert row["group_ranks"] == (list(range(64)) if path == META else None)


def test_the_job_geometry_and_its_evidence_in_json_and_text():
    doc = json.loads(_run(str(META), "--json").output)
    geo = doc["geometry"]
    assert geo["nranks"]["value"] == 128
    assert geo["nranks"]["evidence"][:2] == ["world_size 128 in distributedInfo",
                                             "pg_size 128 of default_pg in distributedInfo.pg_config"]
    assert geo["nnodes"] == {"value": None, "evidence": []} and geo["nvl_domain"]["value"] is None
    groups = {g["process_group"]: g for g in doc["process_groups"]}
    assert groups["1"]["group_size"] == 64 and groups["1"]["nnodes"]["value"] is None
    res = _run(str(META))
    assert res.exit_code == 0, res.output
    assert "nranks: 128 (world_size 128 in distributedInfo; " in res.output
    assert "nnodes: unknown (no evidence in the input; pass --nnodes N)" in res.output
    assert "'1': 64 ranks [0..63] (Group size 64 in the NCCL kernel's metadata; " in res.output


def test_models_are_never_given_one_node_by_default():
    """No node count in the traces: no model figure and a warning saying why (it was '1 node' before)."""
    res = _run(str(META), "--gpu", "H100", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert all(r["model_busbw_gbps"] is None for r in doc["summary"])
    assert any("no model figure for" in w and "nodes their group spans are unknown" in w for w in doc["warnings"])


def test_models_get_the_nodes_each_group_spans():
    asked: list[tuple[str, int, int]] = []

    def model(op: str, nranks: int, nnodes: int, sizes: list[int]) -> dict[int, ModelFigure]:
        asked.append((op, nranks, nnodes))
        return {s: ModelFigure(100.0) for s in sizes}

    report = analyze_traces(read_traces([META]), model=model, overrides={"nnodes": 16})
    assert sorted(asked) == [("all_gather", 64, 8), ("all_reduce", 128, 16)]
    assert report.geometry.value("ranks_per_node") == 8
    row = next(r for r in report.summary if r.op == "all_gather")
    assert row.nnodes == 8 and "blocks of 8 ranks per node (assumed" in row.nnodes_evidence[0]
    res = _run(str(META), "--gpu", "H100", "--nnodes", "16")
    assert res.exit_code == 0, res.output
    assert "nnodes: 16 (--nnodes 16 (as passed))" in res.output
    assert "no model figure for all_reduce on 128 ranks / 16 node(s)" in res.output  # asked for 16, not 1


def test_overrides_win_with_a_note():
    res = _run(str(META), "--nranks", "64", "--nvl-domain", "72")
    assert res.exit_code == 0, res.output
    assert "nranks: 64 (--nranks 64 (as passed); rank 0 is the highest rank traced)" in res.output
    assert "note: nranks: --nranks 64 (as passed) overrides 'world_size 128 in distributedInfo'" in res.output
    assert "nvl_domain: 72 (--nvl-domain 72 (as passed))" in res.output


def test_hosts_from_trace_handler_file_names_give_the_nodes(tmp_path):
    for rank, host in ((0, "gpu-a017"), (1, "gpu-a018")):
        fx.write(tmp_path / f"{host}_{4100 + rank}.1733097600123456789.pt.trace.json", fx.nccl_kernel_metadata(rank))
    report = analyze_traces(read_traces([tmp_path]))
    assert report.geometry.value("nnodes") == 2 and report.geometry.value("ranks_per_node") == 1
    assert report.geometry.nnodes.evidence == ("hosts of the 2 traced ranks: 2 (gpu-a017, gpu-a018)",)
    groups = {g["process_group"]: g for g in report.process_groups}
    assert groups["0"]["nnodes"]["value"] == 2


def test_a_host_name_key_is_a_lower_bound_when_not_every_rank_is_traced(tmp_path):
    doc = fx.nccl_kernel_metadata(0, world=4)
    doc["host_name"] = "node7"
    fx.write(tmp_path / "rank0.json", doc)
    geometry = analyze_traces(read_traces([tmp_path])).geometry
    assert geometry.value("nnodes") is None and geometry.nnodes.low == 1
    assert geometry.nnodes.evidence == ("hosts of the 1 traced ranks that name one: 1 (node7)",)


def test_clues_that_disagree_name_both(tmp_path):
    doc = fx.nccl_kernel_metadata(0, world=4)
    for ev in doc["traceEvents"]:
        if "Group size" in ev.get("args", {}):
            ev["args"]["Process Group Ranks"] = "[0, 1]"
    fx.write(tmp_path / "rank0.json", doc)
    with pytest.raises(ParseError) as err:
        read_traces([tmp_path])
    assert "Group size 4 in the NCCL kernel's metadata" in str(err.value)
    assert "Process Group Ranks lists 2 ranks" in str(err.value)
    res = _run(str(tmp_path))
    assert res.exit_code == 2 and "Traceback" not in res.output and "Process Group Ranks" in res.output
    assert "--group-size" not in res.output  # trace has no such option: no hint names it


def test_the_report_page_shows_the_geometry(tmp_path):
    out = tmp_path / "page"
    res = _run(str(DIMS), "--report", str(out))
    assert res.exit_code == 0, res.output
    page = (out / "index.html").read_text()
    assert "<h2>Geometry</h2>" in page and "nranks: 128 (world_size 128 in distributedInfo" in page
    assert "the output list of c10d::allgather_ holds 64 tensors" in page


def test_an_inspector_communicator_of_the_whole_job_gives_its_nodes():
    """Inspector's n_ranks is a lower bound of the job's ranks; once the job is known to have that many
    (--nranks 4 here), the nnodes of its communicator of all ranks is the job's."""
    pages = FIXTURES / "inspector-prom-v5.1"  # 2 nodes x 2 GPUs, one communicator of all 4
    geometry = analyze_traces(read_traces([pages])).geometry
    assert geometry.value("nranks") is None and geometry.nranks.low == 4
    geometry = analyze_traces(read_traces([pages]), overrides={"nranks": 4}).geometry
    assert geometry.value("nnodes") == 2 and geometry.value("ranks_per_node") == 2
    assert "a communicator of all 4 ranks spans 2 node(s) (Inspector)" in geometry.nnodes.evidence


def test_flight_recorder_groups_and_the_default_group_give_the_geometry(tmp_path):
    for rank in (0, 1):
        doc = fx.flight_recorder(rank)
        doc["entries"][1]["process_group"] = ["7", "tp"]  # a group pg_config does not describe
        fx.write(tmp_path / f"nccl_trace_rank_{rank}.json", doc)
    report = analyze_traces(read_traces([tmp_path]))
    assert report.geometry.value("nranks") == 2
    assert report.geometry.nranks.evidence[0] == "default_pg lists 2 ranks in the Flight Recorder pg_config (2 traces)"
    calls = {c["op"]: c for c in report.collectives}
    assert calls["all_reduce"]["group_size"] == 2 and calls["all_reduce"]["group_ranks"] == [0, 1]
    assert calls["all_gather"]["group_size"] is None and calls["all_gather"]["busbw_gbps"] is None  # never 1
    groups = {g["process_group"]: g for g in report.process_groups}
    assert groups["0"]["evidence"] == ["pg_config lists 2 ranks for process group '0'"]
    assert any("size of process group(s) 7 is unknown" in w for w in report.warnings)


def test_a_huge_group_size_is_kept_without_building_its_ranks(tmp_path):
    """A damaged Group size of 2**31 with a start and stride must not allocate billions of ranks."""
    doc = json.loads(META.read_text())
    for ev in doc["traceEvents"]:
        if ev["args"].get("Group size") == 64:
            ev["args"].update({"Group size": 2**31, "Process Group Name": "9", "Process Group Ranks": "[0, 1, ...]"})
    (tmp_path / "rank0.json").write_text(json.dumps(doc))
    gather = _calls(tmp_path / "rank0.json")["all_gather"]
    assert gather.group_size == 2**31 and gather.group_ranks is None


def test_json_keeps_each_ranks_list_on_one_line():
    text = _run(str(META), "--json").output
    line = next(x for x in text.splitlines() if '"group_ranks"' in x)
    assert line.strip().startswith('"group_ranks": [0, 1, 2,') and line.rstrip().endswith("63],")
    assert json.loads(text)["collectives"][0]["group_ranks"] == list(range(64))


def test_the_gpu_the_traces_name_gives_the_model_figures():
    """No --gpu: the model takes the GPU of the traces' deviceProperties (8 x NVIDIA H100 80GB HBM3 here) and the
    warnings say so; --gpu wins and nothing is said of the traces' GPU."""
    res = _run(str(META), "--nnodes", "16", "--nic-gbit", "400", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert all(r["model_busbw_gbps"] and r["model_busbw_gbps"] > 0 for r in doc["summary"])
    named = [w for w in doc["warnings"] if w.startswith("the model's GPU, NVIDIA H100 80GB HBM3:")]
    assert len(named) == 1 and "deviceProperties (rank 0)" in named[0] and "--gpu NAME overrides" in named[0]
    doc = json.loads(_run(str(META), "--nnodes", "16", "--nic-gbit", "400", "--gpu", "A100", "--json").output)
    assert not [w for w in doc["warnings"] if "the model's GPU" in w]
    assert all(r["model_busbw_gbps"] and r["model_busbw_gbps"] > 0 for r in doc["summary"])


def test_device_properties_naming_two_gpus_or_none_give_no_gpu():
    from collscope.traces.geometry import traces_gpu
    from collscope.traces.kineto import device_model

    assert device_model([{"id": 0, "name": "NVIDIA B200"}, {"id": 1, "name": "NVIDIA B200 "}]) == "NVIDIA B200"
    assert device_model([{"id": 0, "name": "NVIDIA H100 PCIe"}, {"id": 1, "name": "NVIDIA L40S"}]) is None
    assert device_model({"name": "NVIDIA H100"}) is None and device_model([{"id": 0}, "x"]) is None
    (one,) = read_traces([META])
    other = replace(one, rank=1, gpu="NVIDIA A100-SXM4-80GB")
    name, why = traces_gpu([one, other])
    assert name is None and "2 GPUs (NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3)" in why
    assert traces_gpu([other]) == ("NVIDIA A100-SXM4-80GB", "named by the traces' deviceProperties (rank 1); "
                                                             "--gpu NAME overrides")
