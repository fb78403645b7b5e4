"""``collscope locate`` in-process over a simulated fabric: output, JSON, results directory, exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import collscope.cli.locate as cli_locate
from collscope.analysis.load import load_results
from collscope.cli import main
from collscope.collectives.allocation import GPU_VARIABLES
from collscope.collectives.record import Measurement
from collscope.locate.model import TestOutcome, TestSpec
from collscope.locate.simulate import SimFabric


class RecordingFabric(SimFabric):
    """A simulated fabric whose outcomes carry Measurement records, as the srun runner's do."""

    def __call__(self, spec: TestSpec, repeats: int) -> TestOutcome:
        got = super().__call__(spec, repeats)
        if got.failure is not None:
            return got
        n = len(spec.nodes) * (2 if spec.kind == "node" else 1)
        records = tuple(Measurement.from_timing(op="all_reduce", size_bytes=self.size_bytes, nranks=n, time_us=t,
                                                engine="mpi", backend="mpi", count=self.size_bytes // 4,
                                                dtype="float32", redop="sum", root=None, in_place=False,
                                                nnodes=len(spec.nodes), iters=10, warmup=3, hosts=spec.nodes)
                        for t in got.time_us)
        busbw = tuple(r.busbw_gbps for r in records)
        return TestOutcome(busbw_gbps=busbw, time_us=got.time_us, duration_s=got.duration_s, records=records)


@pytest.fixture
def fabric(monkeypatch):
    box: dict[str, SimFabric] = {}

    def make(**kw):
        box["fabric"] = RecordingFabric(nodes=[f"node{i}" for i in range(1, 5)], **kw)
        monkeypatch.setattr(cli_locate, "_make_runner", lambda options, work_dir, timeout_s: box["fabric"])
        return box["fabric"]

    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[1-4]")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    for name in GPU_VARIABLES:  # CPU nodes: no GPU evidence in the allocation
        monkeypatch.delenv(name, raising=False)
    return make


def test_a_slow_node_is_named_with_exclude_and_drain_line(fabric, tmp_path):
    fabric(slow={("node3", None): 0.05})
    result = CliRunner().invoke(main, ["locate", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1, result.output
    assert "node3: slow." in result.output
    assert "exclude: --exclude=node3" in result.output
    assert 'scontrol update nodename=node3 state=drain reason="collscope locate: node3 slow"' in result.output
    assert "node1:" not in result.output and "node2:" not in result.output


def test_json_follows_the_contract_and_results_load(fabric, tmp_path):
    fabric(slow={("node2", 1): 0.05}, rails=2)
    out = tmp_path / "r"
    result = CliRunner().invoke(main, ["locate", "--nodes", "node[1-4]", "--rails", "2", "--json", "--out", str(out)])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.output)
    assert set(doc) >= {"nodes", "rails", "engine", "size_bytes", "tests", "baseline_busbw_gbps", "suspects",
                        "exclude", "rounds", "elapsed_s"}
    assert doc["suspects"] == [{"node": "node2", "rail": 1, "kind": "slow", "evidence": doc["suspects"][0]["evidence"]}]
    assert doc["exclude"] == "node2" and doc["rails"] == 2
    assert {t["kind"] for t in doc["tests"]} <= {"node", "pair", "rail", "group"}
    assert all(t["status"] in ("ok", "slow", "failed", "timeout") for t in doc["tests"])
    assert json.loads((out / "locate.json").read_text())["exclude"] == "node2"
    records = load_results([out])
    assert len(records) == 3 * len(doc["tests"])
    assert records["point_id"].nunique() == len(doc["tests"])
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["kind"] == "locate" and len(sweep["plan"]["points"]) == len(doc["tests"])


def test_nothing_wrong_exits_0(fabric, tmp_path):
    fabric()
    result = CliRunner().invoke(main, ["locate", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "no suspects" in result.output


def test_cpu_nodes_keep_the_host_engine_and_the_output_says_which_and_why(fabric, tmp_path):
    fabric()
    result = CliRunner().invoke(main, ["locate", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("# collscope locate: 4 nodes (node[1-4]), every rail together, engine mpi,")
    assert lines[1] == ("# engine mpi, the default: no GPU evidence (none of SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE, "
                        "SLURM_JOB_GPUS, SLURM_GRES is set); it measures host MPI between the CPUs (the host network, "
                        "no GPU). On GPU nodes give --gpus-per-node G")
    result = CliRunner().invoke(main, ["locate", "--engine", "torch", "--json", "--out", str(tmp_path / "t")])
    doc = json.loads(result.output)
    assert result.exit_code == 0 and (doc["engine"], doc["backend"]) == ("torch", "gloo")
    assert doc["gpus_per_node"]["value"] is None and "SLURM_GPUS_ON_NODE" in doc["gpus_per_node"]["evidence"]
    assert doc["engine_reason"].startswith("torch/gloo, --engine torch (backend gloo by the GPU count): no GPU "
                                           "evidence")
    sweep = json.loads((tmp_path / "t" / "sweep.json").read_text())
    assert sweep["spec"]["backend"] == "gloo" and sweep["spec"]["gpus_per_node"]["value"] is None


def test_a_dead_node_is_unreachable(fabric, tmp_path):
    fabric(dead={"node4"})
    result = CliRunner().invoke(main, ["locate", "--json", "--out", str(tmp_path / "r")])
    doc = json.loads(result.output)
    assert result.exit_code == 1
    assert [(s["node"], s["kind"]) for s in doc["suspects"]] == [("node4", "unreachable")]
    failures = (tmp_path / "r" / "failures.jsonl").read_text()
    assert "timeout" in failures


@pytest.mark.parametrize(("args", "message"), [
    (["--nodes", "node9"], "node9 not in this allocation"),
    (["--nodes", "node[1-6]"], "node[5-6] not in this allocation"),
    (["--nodes", "node1"], "at least 2 nodes"),
    (["--nodes", "node[1-"], "without"),
    (["--repeats", "2"], "repeats"),
])
def test_bad_input_exits_2_with_one_line(fabric, tmp_path, args, message):
    fabric()
    result = CliRunner().invoke(main, ["locate", *args, "--out", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_outside_an_allocation_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.delenv("SLURM_NODELIST", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    result = CliRunner().invoke(main, ["locate", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "give --nodes" in result.output
    result = CliRunner().invoke(main, ["locate", "--nodes", "a,b", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "not inside a Slurm allocation" in result.output
