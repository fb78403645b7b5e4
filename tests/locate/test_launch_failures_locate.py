"""A launch that fails the same way on every node is a usage or environment error, never a broken node (issue 22
item 2): ``collscope locate`` exits 2 with srun's own line, the allocation's shape and the fix, and names no node
(no suspects, no --exclude, no drain line). The fake srun prints what Slurm's srun and slurmstepd print."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.collectives.allocation import GPU_VARIABLES
from collscope.locate.launch import LaunchFailedEverywhere, classify_launch
from collscope.locate.model import LaunchFailure, LocateConfig, TestOutcome, TestSpec
from collscope.locate.search import locate
from collscope.sweeps.slurm_shape import allocation_shape, tasks_per_node
from tests.fakes import Answer

NODES = [f"node{i}" for i in range(1, 5)]
NO_STEP = "srun: error: Unable to create step for job 77: More processors requested than permitted\n"
NO_EXEC = ("slurmstepd: error: execve(): /shared/venv/bin/python: No such file or directory\n"
           "srun: error: node1: task 0: Exited with exit code 2\n")
NO_PMIX = ("srun: error: Couldn't find the specified plugin name for mpi/pmix looking at all files\n"
           "srun: error: cannot create mpi context for mpi/pmix\n")
ONE_TASK_PER_NODE = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node[1-4]", "SLURM_JOB_NUM_NODES": "4",
                     "SLURM_NTASKS_PER_NODE": "1", "SLURM_TASKS_PER_NODE": "1(x4)", "SLURM_JOB_CPUS_PER_NODE": "1(x4)"}


@pytest.fixture
def one_task_per_node(monkeypatch):
    """``salloc -N 4 --ntasks-per-node 1`` on CPU nodes, as its variables say it."""
    for name, value in ONE_TASK_PER_NODE.items():
        monkeypatch.setenv(name, value)
    for name in GPU_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return dict(ONE_TASK_PER_NODE)


def _locate(tmp_path):
    return CliRunner().invoke(main, ["locate", "--timeout", "20", "--out", str(tmp_path / "r")])


def _names_no_node(output: str) -> None:
    assert "--exclude" not in output and "state=drain" not in output and "suspects" not in output
    assert "Traceback" not in output


def test_a_step_the_allocation_forbids_everywhere_exits_2_with_the_shape_and_the_fix(tmp_path, fake_tools,
                                                                                     one_task_per_node):
    fake_tools.add("srun", Answer(stderr=NO_STEP, exit_code=1))
    result = _locate(tmp_path)
    assert result.exit_code == 2, result.output
    error = result.stderr
    assert error.startswith("error: every test of round 1 (4 tests on 4 nodes) failed to launch the same way")
    assert "Unable to create step for job 77: More processors requested than permitted" in error
    assert "the allocation has 1 task(s) per node" in error and "SLURM_TASKS_PER_NODE=1(x4)" in error
    assert "locate's node test needs 2 ranks per node: allocate with --ntasks-per-node=2" in error
    assert "salloc -N 4 --ntasks-per-node=2" in error
    assert len(error.strip().splitlines()) == 1
    _names_no_node(result.output)


def test_a_program_missing_on_every_node_exits_2(tmp_path, fake_tools, one_task_per_node):
    fake_tools.add("srun", Answer(stderr=NO_EXEC, exit_code=2))
    result = _locate(tmp_path)
    assert result.exit_code == 2, result.output
    assert "execve(): /shared/venv/bin/python: No such file or directory" in result.stderr
    assert "cannot be started on the nodes" in result.stderr and "shared file system" in result.stderr
    _names_no_node(result.output)


def test_srun_without_pmix_exits_2_naming_srun_mpi(tmp_path, fake_tools, one_task_per_node):
    fake_tools.add("srun", Answer(stderr=NO_PMIX, exit_code=1))
    result = _locate(tmp_path)
    assert result.exit_code == 2, result.output
    assert "Couldn't find the specified plugin name for mpi/pmix" in result.stderr
    assert "--mpi=pmix" in result.stderr and "srun --mpi=list" in result.stderr and "--srun-mpi" in result.stderr
    _names_no_node(result.output)


def test_classification_of_launcher_lines():
    env = dict(ONE_TASK_PER_NODE)
    kw = {"ranks_per_node": 8, "test_kind": "node", "environ": env, "program": "/nt/all_reduce_perf_mpi",
          "srun_mpi": "pmix"}
    found = classify_launch("noise\n" + NO_STEP, **kw)
    assert found is not None and found.kind == "allocation" and found.line == NO_STEP.strip()
    assert "needs 8 ranks per node: allocate with --ntasks-per-node=8" in found.fix and "locate.sh" not in found.fix
    missing = classify_launch(NO_EXEC, **kw)
    assert missing is not None and missing.kind == "missing program" and "/nt/all_reduce_perf_mpi" in missing.fix
    assert classify_launch(NO_PMIX, **kw).kind == "launcher"  # type: ignore[union-attr]
    # a node's own failure is not a launch failure: the node may be at fault
    for text in ("srun: error: node3: task 0: Exited with exit code 1\n", "srun: error: node3: task 1: Killed\n",
                 "srun: error: Unable to create step for job 77: Requested nodes are busy\n", ""):
        assert classify_launch(text, **kw) is None, text
    assert tasks_per_node({"SLURM_TASKS_PER_NODE": "2(x3),1"}) == 2 and tasks_per_node({}) is None
    assert allocation_shape({}) == "no SLURM_* shape variables"


LAUNCH = LaunchFailure(kind="allocation", line=NO_STEP.strip(), fix="the fix")


def test_search_stops_only_when_every_test_of_a_round_failed_to_launch_alike():
    def everywhere(spec: TestSpec, repeats: int) -> TestOutcome:
        return TestOutcome(failure="failed", detail="exit code 1", launch=LAUNCH)

    with pytest.raises(LaunchFailedEverywhere) as caught:
        locate(NODES, everywhere, LocateConfig())
    assert caught.value.failure == LAUNCH and len(caught.value.tests) == 4

    def one_node(spec: TestSpec, repeats: int) -> TestOutcome:
        if "node3" in spec.nodes:
            return TestOutcome(failure="failed", detail="exit code 1", launch=LAUNCH)
        return TestOutcome(busbw_gbps=(4.0,) * repeats, time_us=(10.0,) * repeats)

    result = locate(NODES, one_node, LocateConfig())  # one node alone failing is that node's evidence
    assert [s.node for s in result.suspects] == ["node3"] and result.suspects[0].kind == "broken"
