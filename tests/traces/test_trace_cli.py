"""``collscope trace`` on good and bad input: exit codes and the one-line messages (in process)."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from collscope.analysis.recommend.workload import read_workload
from collscope.cli import main
from tests.cli_timeout import invoke_with_timeout
from tests.traces import trace_fixtures as fx


def _run(*args: str):
    return CliRunner().invoke(main, ["trace", *args])


def test_text_and_json(tmp_path):
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", fx.nccl_kernel_metadata(r, delay_us=250))
    res = _run(str(tmp_path), "--gpu", "A100", "--nnodes", "1")
    assert res.exit_code == 0, res.output
    assert "all_reduce 4M" in res.output and "of the model's" in res.output
    # how far published systems fall from the model at 4 MiB inside one node (collscope/data/model_accuracy.csv)
    assert "[published systems measure " in res.output and "the model at 1M-8M inside one NVLink domain, " in res.output
    assert "nnodes: 1 (--nnodes 1 (as passed))" in res.output
    modelled = json.loads(_run(str(tmp_path), "--gpu", "A100", "--nnodes", "1", "--json").output)
    spread = modelled["summary"][0]["model_published_spread"]
    assert spread.startswith("published systems measure ")
    assert " the model at 1M-8M inside one NVLink domain, " in spread
    doc = json.loads(_run(str(tmp_path), "--json").output)
    assert set(doc) == {"world_size", "backend", "ranks", "sources", "verdict", "geometry", "process_groups",
                        "collectives", "steps", "summary", "late_ranks", "what_if", "outside_window",
                        "no_communication", "warnings"}
    assert doc["world_size"] == 2 and doc["ranks"] == [0, 1] and len(doc["collectives"]) == 8


def test_a_trace_without_collectives_says_so_and_exits_0(tmp_path):
    doc = fx.nccl_kernel_metadata(0)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["name"].startswith(("ProfilerStep", "volta"))]
    fx.write(tmp_path / "rank0.json", doc)
    res = _run(str(tmp_path / "rank0.json"))
    assert res.exit_code == 0 and "no collectives in" in res.output


def test_bad_inputs_exit_2_with_the_file_named(tmp_path):
    (tmp_path / "notes.json").write_text("not json at all")
    res = _run(str(tmp_path / "notes.json"))
    assert res.exit_code == 2 and "notes.json" in res.output and "Traceback" not in res.output
    (tmp_path / "d").mkdir()
    fx.write(tmp_path / "d" / "rank0.json", fx.nccl_kernel_metadata(0))
    fx.write(tmp_path / "d" / "rank1.json", fx.nccl_kernel_metadata(1, world=4))
    res = _run(str(tmp_path / "d"))
    assert res.exit_code == 2 and "world_size" in res.output
    res = _run(str(tmp_path / "missing.json"))
    assert res.exit_code == 2 and "no such file" in res.output


def test_workload_out_without_sizes_exits_2(tmp_path):
    fx.write(tmp_path / "rank0.json", fx.gloo_trace(0, record_shapes=False))
    res = _run(str(tmp_path / "rank0.json"))
    assert res.exit_code == 0 and "no collective carries a size" in res.output
    assert "record_shapes=True" in res.output
    res = _run(str(tmp_path / "rank0.json"), "--workload-out", str(tmp_path / "w.json"))
    assert res.exit_code == 2 and "record_shapes=True" in res.output
    assert not (tmp_path / "w.json").exists()


def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "rank0.json"
    os.mkfifo(fifo)
    res = invoke_with_timeout(["trace", str(fifo)], fifo)
    assert res.exit_code == 2 and str(fifo) in res.stderr and "FIFO" in res.stderr


def test_workload_out_meets_recommend_reader(tmp_path):
    for r in (0, 1):
        fx.write(tmp_path / f"rank{r}.json", fx.nccl_kernel_metadata(r))
    out = tmp_path / "job.json"
    assert _run(str(tmp_path), "--workload-out", str(out)).exit_code == 0
    workload = read_workload(out)
    assert [(e.op, e.size_bytes, e.calls, e.nranks) for e in workload.entries] == \
        [("all_reduce", 4194304, 1, 2), ("all_gather", 8000, 1, 2)]


def test_the_model_figure_carries_nccls_near_ties():
    """8 H100 of one node, reduce_scatter at 32 MiB: Ring/Simple leads Ring/LL128 by 1.9% in NCCL's model
    (tests/analysis/test_near_ties.py); the trace's verdict names the tie with its own expected busbw."""
    from collscope.cli.trace import _model
    from collscope.traces.verdict import verdict

    figure = _model(None, "H100", None, [])("reduce_scatter", 8, 1, [32 << 20, 1 << 30])  # type: ignore[misc]
    assert figure[32 << 20].near_ties == "Ring/LL128 253 GB/s" and figure[1 << 30].near_ties is None
    line = verdict("reduce_scatter", 32 << 20, 1.0, 250.0, None, figure[32 << 20].busbw_gbps, None,
                   model_near_ties=figure[32 << 20].near_ties)
    assert "120% of the model's 209 GB/s busbw" in line
    assert "(a near tie in NCCL's model, closer than collscope calls: Ring/LL128 253 GB/s if it runs)" in line


def _versioned(tmp_path, *releases: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    for r, release in enumerate(releases):
        doc = fx.nccl_kernel_metadata(r, delay_us=250)
        assert doc["distributedInfo"]["nccl_version"] == "2.21.5"  # what PyTorch writes for the nccl backend
        doc["distributedInfo"]["nccl_version"] = release
        fx.write(tmp_path / f"rank{r}.json", doc)
    return _run(str(tmp_path), "--gpu", "A100", "--nnodes", "1", "--json")


def test_a_job_on_an_older_nccl_is_judged_as_analyze_judges_it_and_told_so(tmp_path):
    warnings = json.loads(_versioned(tmp_path / "a", "2.21.5", "2.21.5").output)["warnings"]
    assert not any("NCCL 2.21.5" in w or "pipeline-based" in w for w in warnings)  # 2.30.7's tables are its nearest
    old = json.loads(_versioned(tmp_path / "b", "2.18.5", "2.18.5").output)["warnings"]
    (said,) = [w for w in old if w.startswith("NCCL 2.18.5: judged against collscope's model with NCCL 2.30.7's")]
    assert "collscope predict --nccl-version 2.18.5" in said and "NCCL 2.19.4's" in said


def test_a_job_on_nccl_2_32_is_told_its_choices_follow_a_model_collscope_does_not_reproduce(tmp_path):
    warnings = json.loads(_versioned(tmp_path, "2.32.6", "2.32.6").output)["warnings"]
    assert any(w.startswith("NCCL 2.32 chooses algorithms and protocols with a pipeline-based cost model")
               for w in warnings)


def test_traces_naming_two_nccl_releases_say_so(tmp_path):
    warnings = json.loads(_versioned(tmp_path, "2.21.5", "2.32.6").output)["warnings"]
    assert ("the traces name 2 NCCL versions (2.21.5, 2.32.6): the ranks of one job should run one NCCL release"
            in warnings)
    assert any("pipeline-based" in w for w in warnings)  # what is said of 2.32 is said of its rank


def test_the_nvlink_domain_from_the_captures_is_said(tmp_path):
    """Traces of 2 ranks on 2 GB200 trays whose `nvidia-smi -q` put them in one NVLink partition: the model joins
    them over NVLink, and the job's Geometry gives the domain with the captures as its evidence (the traces do not
    give it), instead of a warning."""
    import shutil
    from pathlib import Path

    smi = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
    for host in ("tray01", "tray02"):
        node = tmp_path / "topo" / host
        node.mkdir(parents=True)
        shutil.copy(smi / "q-gb200-tray-registered-clique32766.txt", node / "nvidia-smi-q.txt")
        shutil.copy(smi / "query-gpu-gb200-tray-x4.csv", node / "nvidia-smi-query-gpu.csv")
        shutil.copy(smi / "topo-tab-gb200-tray-4gpu-nv18-nics-at-node-gpu-numa-id.txt", node / "nvidia-smi-topo.txt")
        (node / "meta.json").write_text(json.dumps({"host": host}))
    (tmp_path / "traces").mkdir()
    for r in (0, 1):
        fx.write(tmp_path / "traces" / f"rank{r}.json", fx.nccl_kernel_metadata(r, delay_us=250))
    res = _run(str(tmp_path / "traces"), "--topo", str(tmp_path / "topo"), "--nnodes", "2", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    domain = doc["geometry"]["nvl_domain"]
    assert domain["value"] == 2
    (said,) = domain["evidence"]
    assert said.startswith("--topo: NVLink domain of 2 ranks: 2 captured nodes") and "NVLink clique 32766" in said
    assert not [w for w in doc["warnings"] if w.startswith("nvl_domain for")]  # said once, by the geometry
    shown = _run(str(tmp_path / "traces"), "--topo", str(tmp_path / "topo"), "--nnodes", "2").output
    assert "nvl_domain: 2 (--topo: NVLink domain of 2 ranks" in shown
