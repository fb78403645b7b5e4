"""Locate on GPU nodes: the GPU count and its evidence, the engine choice and its refusals, the rail pinning table,
and the steps locate would launch on a fake 2-node 8-GPU allocation (dry planning, no GPU).

Golden files: ``tests/locate/golden/<case>.txt`` hold ``collscope locate --dry-run``'s output with this machine's
paths replaced by ``<python>`` and ``<nccl-tests>``. After an intended change, regenerate them with
``COLLSCOPE_UPDATE_GOLDEN=1 python -m pytest tests/locate/test_gpu_locate.py``.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.collectives.allocation import GPU_VARIABLES, GpuCount, gpus_per_node
from collscope.errors import ConfigError
from collscope.locate.engines import check_rails, choose_engine, rail_variables
from collscope.locate.model import TestSpec
from collscope.locate.srun import SrunRunner
from collscope.locate.steps import StepOptions, first_steps, step_argv
from collscope.vocab.engines import ENGINE_ROWS, engine_row
from tests.fakes import Answer, FakeTools

GOLDEN = Path(__file__).parent / "golden"
# nccl-tests' output of 2 nodes x 8 H100 (16 ranks, one process per GPU, one size), written for this project in
# the shape of published 2-node runs (rank lines with Group and Pid, no version line).
NCCL_TESTS_16_RANKS = Path(__file__).parent / "fixtures" / "all_reduce_perf-h100-2node-16rank-1G.txt"
GPU_NODES = {"SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_JOB_ID": "4242", "SLURM_GPUS_ON_NODE": "8",
             "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7", "SLURM_CPUS_ON_NODE": "224"}
"""What a 2-node allocation with 8 GPUs per node (sbatch -N 2 --gpus-per-node=8 --exclusive) puts in the
environment (SLURM_GPUS_PER_NODE is left out: the cases below add it where they need it); srun says Slurm 22.05.8."""


# ---- GPUs per node, with its evidence --------------------------------------------------------------------

@pytest.mark.parametrize(("env", "value", "evidence"), [
    ({"SLURM_GPUS_ON_NODE": "8"}, 8, "SLURM_GPUS_ON_NODE=8"),
    ({"SLURM_GPUS_PER_NODE": "h100:8"}, 8, "SLURM_GPUS_PER_NODE=h100:8"),
    ({"SLURM_GPUS_PER_NODE": "a100:2,v100:2"}, 4, "SLURM_GPUS_PER_NODE=a100:2,v100:2"),
    ({"SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7"}, 8, "SLURM_JOB_GPUS=0,1,2,3,4,5,6,7"),
    ({"SLURM_JOB_GPUS": "4-7"}, 4, "SLURM_JOB_GPUS=4-7"),
    ({"SLURM_GRES": "gpu:8"}, 8, "SLURM_GRES=gpu:8"),
    ({"SLURM_GRES": "gpu:h100:8,nic:1"}, 8, "SLURM_GRES=gpu:h100:8,nic:1"),
    ({"SLURM_GRES": "gres/gpu:4"}, 4, "SLURM_GRES=gres/gpu:4"),
    ({"SLURM_GRES": "none"}, 0, "SLURM_GRES=none"),
    ({"SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7"}, 8,
     "SLURM_GPUS_ON_NODE=8, SLURM_JOB_GPUS=0,1,2,3,4,5,6,7"),
])
def test_gpu_count_from_the_allocation_carries_its_evidence(env, value, evidence):
    assert gpus_per_node(None, env) == GpuCount(value, evidence)


def test_no_gpu_evidence_is_unknown_and_a_gres_of_other_kinds_says_nothing():
    for env in ({}, {"SLURM_GRES": "nic:1"}, {"SLURM_GPUS_ON_NODE": ""}, {"SLURM_JOB_NODELIST": "n[1-4]"}):
        got = gpus_per_node(None, env)
        assert got.value is None and all(name in got.evidence for name in GPU_VARIABLES)
        assert got.describe().startswith("GPUs per node unknown")


def test_the_option_overrides_the_allocation_even_when_it_disagrees():
    assert gpus_per_node(0, {"SLURM_GPUS_ON_NODE": "8"}) == GpuCount(0, "--gpus-per-node 0, given")
    assert gpus_per_node(4, {"SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_GPUS": "0,1"}).value == 4


def test_disagreeing_or_damaged_variables_are_errors_naming_them():
    with pytest.raises(ConfigError, match=r"SLURM_GPUS_ON_NODE=8 says 8, SLURM_JOB_GPUS=0,1,2,3 says 4; "
                                          r"give --gpus-per-node G"):
        gpus_per_node(None, {"SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_GPUS": "0,1,2,3"})
    for name, bad in (("SLURM_GPUS_ON_NODE", "eight"), ("SLURM_GPUS_PER_NODE", "h100:"),
                      ("SLURM_JOB_GPUS", "0,x"), ("SLURM_JOB_GPUS", "7-3")):
        with pytest.raises(ConfigError, match=f"{name}='{bad}' is not a GPU count"):
            gpus_per_node(None, {name: bad})


# ---- the engine: GPU engines on GPU nodes, host engines refused there ------------------------------------

EIGHT = GpuCount(8, "SLURM_GPUS_ON_NODE=8")
NONE = GpuCount(0, "--gpus-per-node 0, given")
UNKNOWN = gpus_per_node(None, {})


@pytest.mark.parametrize(("engine", "backend", "gpus", "name"), [
    (None, None, EIGHT, "nccl-tests"),
    ("nccl-tests", None, EIGHT, "nccl-tests"),
    ("torch", None, EIGHT, "torch/nccl"),
    ("torch", "nccl", EIGHT, "torch/nccl"),
    (None, None, NONE, "mpi"),
    ("torch", None, NONE, "torch/gloo"),
    ("mpi", None, NONE, "mpi"),
    (None, None, UNKNOWN, "mpi"),
    ("torch", None, UNKNOWN, "torch/gloo"),
    ("torch", "gloo", UNKNOWN, "torch/gloo"),
])
def test_engine_choice(engine, backend, gpus, name):
    choice = choose_engine(engine, backend, gpus)
    assert choice.row.name == name
    assert choice.reason.startswith(name) and gpus.evidence in choice.reason


@pytest.mark.parametrize(("engine", "backend", "gpus", "message"), [
    ("mpi", None, EIGHT, "--engine mpi measures host MPI between the CPUs (the host network, no GPU), not the 8 GPUs "
                         "per node (SLURM_GPUS_ON_NODE=8): slow GPUs, NVLink faults and lost GPUDirect RDMA would "
                         "stay invisible. Use --engine nccl-tests or --engine torch --backend nccl, or "
                         "--gpus-per-node 0 to test the host network on purpose"),
    ("torch", "gloo", EIGHT, "--engine torch --backend gloo measures torch.distributed with gloo"),
    ("nccl-tests", None, NONE, "--engine nccl-tests needs GPUs, and the nodes have none (--gpus-per-node 0, given)"),
    ("torch", "nccl", NONE, "--engine torch --backend nccl needs GPUs"),
    ("nccl-tests", None, UNKNOWN, "--engine nccl-tests needs the GPU count of a node: give --gpus-per-node G"),
    ("torch", "nccl", UNKNOWN, "needs the GPU count of a node"),
    ("mpi", "nccl", EIGHT, "--backend nccl applies to --engine torch only, not --engine mpi"),
    (None, "nccl", EIGHT, "--backend nccl applies to --engine torch only; add --engine torch"),
])
def test_engine_refusals_name_the_way_out(engine, backend, gpus, message):
    with pytest.raises(ConfigError) as info:
        choose_engine(engine, backend, gpus)
    assert message in str(info.value)


def test_step_options_refuse_a_host_engine_on_gpus_and_a_gpu_engine_without():
    with pytest.raises(ConfigError, match="not the 8 GPUs per node"):
        StepOptions(engine="mpi", gpus_per_node=8)
    with pytest.raises(ConfigError, match="not the 8 GPUs per node"):
        StepOptions(engine="torch", backend="gloo", gpus_per_node=8)
    with pytest.raises(ConfigError, match="torch/nccl needs GPUs"):
        StepOptions(engine="torch", backend="nccl")


# ---- rail pinning: one table, each engine its own variables ----------------------------------------------

def test_rail_pinning_table():
    got = {row.name: rail_variables(row, 1, rail_nics=("mlx5_0", "mlx5_3"), iface_prefix="ib") for row in ENGINE_ROWS}
    assert got == {"nccl-tests": {"NCCL_IB_HCA": "=mlx5_3"},
                   "torch/nccl": {"NCCL_IB_HCA": "=mlx5_3"},
                   "mpi": {"OMPI_MCA_btl_tcp_if_include": "ib1", "OMPI_MCA_oob_tcp_if_include": "ib1"},
                   "torch/gloo": {"GLOO_SOCKET_IFNAME": "ib1"}}
    for row in ENGINE_ROWS:  # every engine's rails differ from each other: R rail tests are R different tests
        pins = [rail_variables(row, r, rail_nics=("mlx5_0", "mlx5_3"), iface_prefix="ib") for r in range(2)]
        assert pins[0] != pins[1]


@pytest.mark.parametrize(("name", "environ", "nics", "given", "message"), [
    ("mpi", {}, ("mlx5_0", "mlx5_3"), True, "--rail-nics pins rails with NCCL_IB_HCA, which --engine mpi does not "
                                           "read"),
    ("torch/gloo", {}, ("mlx5_0", "mlx5_3"), True, "which --engine torch --backend gloo does not read"),
    ("mpi", {"OMPI_MCA_pml": "ucx"}, (), False, "OMPI_MCA_pml=ucx sends through a PML that uses no BTL"),
    ("nccl-tests", {"NCCL_IB_DISABLE": "1"}, ("mlx5_0", "mlx5_3"), True,
     "NCCL_IB_DISABLE=1 turns NCCL's IB transport off, so NCCL_IB_HCA would not pin a rail and all 2 rail tests "
     "would be the same test"),
    ("torch/nccl", {"NCCL_NET": "Socket"}, ("mlx5_0", "mlx5_3"), True, "NCCL_NET=Socket selects a network"),
    ("nccl-tests", {}, ("mlx5_0",), True, "rail 1 has no NIC name: give --rail-nics"),
    ("nccl-tests", {}, ("mlx5_0", ""), False, "rail 1 has no NIC name"),  # the nodes name it differently (--topo)
])
def test_rail_tests_the_engine_cannot_tell_apart_are_refused(name, environ, nics, given, message):
    row = next(r for r in ENGINE_ROWS if r.name == name)
    with pytest.raises(ConfigError) as info:
        check_rails(row, 2, rail_nics=nics, nics_given=given, environ=environ)
    assert message in str(info.value)


def test_rails_that_pin_are_allowed():
    check_rails(engine_row("nccl-tests"), 2, rail_nics=("mlx5_0", "mlx5_3"), nics_given=True,
                environ={"NCCL_IB_DISABLE": "0", "NCCL_NET": "IB"})
    check_rails(engine_row("mpi"), 2, rail_nics=("mlx5_0", "mlx5_3"), nics_given=False,  # NICs from --topo
                environ={"OMPI_MCA_pml": "ob1"})
    check_rails(engine_row("mpi"), 1, rail_nics=("x",), nics_given=True, environ={"OMPI_MCA_pml": "ucx"})


def test_a_rail_variable_of_the_user_is_said_old_to_new(caplog):
    with caplog.at_level("WARNING", logger="collscope.locate.engines"):
        check_rails(engine_row("nccl-tests"), 2, rail_nics=("mlx5_0", "mlx5_3"), nics_given=True,
                    environ={"NCCL_IB_HCA": "mlx5"})
    assert "NCCL_IB_HCA=mlx5 (yours) is replaced in the rail tests: -> =mlx5_0 (rail 0), =mlx5_3 (rail 1)" \
        in caplog.text


# ---- the steps on a fake 2-node 8-GPU allocation ---------------------------------------------------------

UNBIND = ("--cpus-per-task=28", "--cpu-bind=cores", "--gpu-bind=none")
GPU_SRUN = {"slurm_version": (22, 5, 8), "cpus_on_node": 224}
"""What the CLI reads for the GPU steps (srun --version, SLURM_CPUS_ON_NODE): 224 CPUs / 8 ranks = 28 each."""


def test_gpu_steps_drive_every_gpu_of_each_node():
    options = StepOptions(engine="nccl-tests", gpus_per_node=8, rail_nics=("mlx5_0", "mlx5_3"),
                          nccl_tests_binary="/nt/all_reduce_perf_mpi", **GPU_SRUN)
    steps = first_steps(["gpu1", "gpu2"], options, rails=2, environ={}, work_dir="/w/steps")
    assert [(s.round, s.spec.kind, s.spec.nodes, s.spec.rail) for s in steps] == [
        (1, "node", ("gpu1",), None), (1, "node", ("gpu2",), None),
        (2, "group", ("gpu1", "gpu2"), 0), (3, "group", ("gpu1", "gpu2"), 1)]
    node, _, rail0, rail1 = steps
    assert node.argv[:10] == ("srun", "--ntasks", "8", "--nodes", "1", "--nodelist", "gpu1", "--job-name",
                              "locate-node", "--ntasks-per-node=8")
    assert rail0.argv[:10] == ("srun", "--ntasks", "16", "--nodes", "2", "--nodelist", "gpu[1-2]", "--job-name",
                               "locate-group", "--ntasks-per-node=8")
    program = node.argv[node.argv.index("/nt/all_reduce_perf_mpi"):]
    assert program[program.index("-g") + 1] == "1"  # one process per GPU
    for step in steps:  # the GPU ranks' srun options, as a sweep's GPU step has them: before --export
        at = step.argv.index("--export=ALL")
        assert step.argv[at - 3:at] == UNBIND and "--mpi=pmix" in step.argv[at:]
    assert "NCCL_IB_HCA" not in node.env
    assert (rail0.env["NCCL_IB_HCA"], rail1.env["NCCL_IB_HCA"]) == ("=mlx5_0", "=mlx5_3")
    torch = StepOptions(engine="torch", backend="nccl", gpus_per_node=8, python="/py", **GPU_SRUN)
    argv = step_argv(TestSpec(kind="node", nodes=("gpu1",)), torch, "/w/o.jsonl")
    assert argv[1:5] == ["--ntasks", "8", "--nodes", "1"] and "--ntasks-per-node=8" in argv
    assert set(UNBIND) <= set(argv)
    assert argv[-2:] == ["--backend", "nccl"]
    cpu = step_argv(TestSpec(kind="node", nodes=("n1",)), StepOptions(**GPU_SRUN), "/w/o.jsonl")
    assert not set(UNBIND) & set(cpu)  # host engines: no GPU ranks


@pytest.fixture
def gpu_allocation(monkeypatch, tmp_path, fake_tools):
    for name in (*GPU_VARIABLES, "NCCL_IB_DISABLE", "NCCL_NET", "OMPI_MCA_pml", "NCCL_TESTS_HOME",
                 "SLURM_CPUS_PER_TASK", "NCCL_IB_HCA"):
        monkeypatch.delenv(name, raising=False)
    fake_tools.add("srun", {"--version": Answer(stdout="slurm 22.05.8\n")})
    for name, value in GPU_NODES.items():
        monkeypatch.setenv(name, value)
    nccl_tests = tmp_path / "nccl-tests"
    FakeTools(nccl_tests).add("all_reduce_perf_mpi")
    return nccl_tests


def _dry_run(nccl_tests: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["locate", "--dry-run", "--out", "/shared/locate", "--nccl-tests-dir",
                                       str(nccl_tests), *args])
    return result.exit_code, result.output.replace(str(nccl_tests), "<nccl-tests>").replace(sys.executable,
                                                                                              "<python>")


def _check_golden(case: str, text: str) -> None:
    path = GOLDEN / f"{case}.txt"
    if os.environ.get("COLLSCOPE_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"{path} missing; run with COLLSCOPE_UPDATE_GOLDEN=1 to record it"
    assert text == path.read_text(), f"{case}: the planned steps changed; if intended, rerun with " \
                                     "COLLSCOPE_UPDATE_GOLDEN=1"


@pytest.mark.parametrize(("case", "args"), [
    ("gpu-2x8-nccl-tests-rails", ["--rails", "2", "--rail-nics", "mlx5_0,mlx5_3"]),
    ("gpu-2x8-torch-nccl", ["--engine", "torch"]),
    ("gpu-2x8-host-on-purpose", ["--gpus-per-node", "0", "--rails", "2", "--iface-prefix", "ib"]),
])
def test_dry_run_golden(gpu_allocation, case, args):
    code, text = _dry_run(gpu_allocation, *args)
    assert code == 0, text
    _check_golden(case, text)
    steps = [shlex.split(line) for line in text.splitlines() if not line.startswith("#")]
    assert steps and all("srun" in words for words in steps)  # each step line is a valid shell line


@pytest.mark.parametrize(("srun_says", "flags"), [
    ("slurm 22.05.8", "--cpus-per-task=28 --cpu-bind=cores --gpu-bind=none"),
    ("slurm 23.11.0", "--cpus-per-task=28 --cpu-bind=cores --tres-bind=gres/gpu:none"),
    ("slurm 20.11.9", "--cpus-per-task=28 --cpu-bind=cores"),  # no per-task GPU binding to undo, and no "none"
])
def test_gpu_steps_take_the_sweeps_srun_policy_by_slurm_version(gpu_allocation, fake_tools, srun_says, flags):
    fake_tools.add("srun", {"--version": Answer(stdout=srun_says + "\n")})
    code, text = _dry_run(gpu_allocation)
    assert code == 0, text
    steps = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(steps) == 3 and all(
        f" --ntasks-per-node=8 {flags} --export=ALL --kill-on-bad-exit=1 --mpi=pmix <nccl-tests>/all_reduce_perf_mpi "
        in s for s in steps)


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "mpi"], "--engine mpi measures host MPI"),
    (["--engine", "torch", "--backend", "gloo"], "--engine torch --backend gloo measures"),
    (["--engine", "mpi", "--rails", "2"], "Use --engine nccl-tests or --engine torch --backend nccl, or "
                                          "--gpus-per-node 0 to test the host network on purpose"),
    (["--rails", "2"], "rail 0 has no NIC name: give --rail-nics"),
])
def test_host_engines_on_gpu_nodes_exit_2_with_the_options_to_use(gpu_allocation, tmp_path, args, message):
    for dry in ([], ["--dry-run"]):  # refused before anything runs, with or without --dry-run
        result = CliRunner().invoke(main, ["locate", "--out", str(tmp_path / "r"), "--nccl-tests-dir",
                                           str(gpu_allocation), *dry, *args])
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_gpu_evidence_of_the_allocation_reaches_the_cli_and_the_option_wins(gpu_allocation, monkeypatch):
    monkeypatch.setenv("SLURM_GPUS_PER_NODE", "4")
    result = CliRunner().invoke(main, ["locate", "--dry-run", "--nccl-tests-dir", str(gpu_allocation)])
    assert result.exit_code == 2
    assert "SLURM_GPUS_ON_NODE=8 says 8, SLURM_GPUS_PER_NODE=4 says 4; give --gpus-per-node G" in result.output
    code, text = _dry_run(gpu_allocation, "--gpus-per-node", "4")
    assert code == 0 and "4 GPUs per node (--gpus-per-node 4, given)" in text
    assert "--ntasks-per-node=4" in text and "--cpus-per-task=56" in text


def test_the_gpu_runner_pins_rails_with_nccl_ib_hca_and_reads_nccl_tests(tmp_path, monkeypatch):
    """A rail test through the real runner: a fake srun (recording its argv and environment) prints what
    nccl-tests printed on 2 nodes x 8 GPUs."""
    tools = FakeTools(tmp_path / "bin")
    record = tmp_path / "srun-call.json"
    srun = tools.add("srun", Answer(stdout=NCCL_TESTS_16_RANKS), record_to=record)
    options = StepOptions(engine="nccl-tests", gpus_per_node=8, rail_nics=("mlx5_0", "mlx5_3"), srun=str(srun),
                          nccl_tests_binary="/nt/all_reduce_perf_mpi", **GPU_SRUN)
    runner = SrunRunner(options=options, work_dir=tmp_path / "steps", timeout_s=30)
    got = runner(TestSpec(kind="group", nodes=("gpu1", "gpu2"), rail=1), 3)
    assert got.failure is None, got.detail
    assert got.busbw_gbps == (339.98, 339.98, 339.98)
    assert {r.nranks for r in got.records} == {16} and got.records[0].settings["NCCL_IB_HCA"] == "=mlx5_3"
    call = json.loads(record.read_text())
    assert call["env"]["NCCL_IB_HCA"] == "=mlx5_3" and "OMPI_MCA_btl_tcp_if_include" not in call["env"]
    assert call["argv"][:8] == ["--ntasks", "16", "--nodes", "2", "--nodelist", "gpu[1-2]", "--job-name",
                                "locate-group"]
    assert "--ntasks-per-node=8" in call["argv"]
    assert set(UNBIND) <= set(call["argv"])


def test_a_run_on_gpu_nodes_uses_the_gpu_engine_by_default(gpu_allocation, monkeypatch, tmp_path):
    """Without --engine, a real (not dry) run on the 8-GPU allocation launches nccl-tests on every GPU; the
    runner is a simulated fabric here, the options it is given are what the srun runner would get."""
    import collscope.cli.locate as cli_locate
    from collscope.locate.simulate import SimFabric

    given = {}

    def runner(options, work_dir, timeout_s):
        given["options"] = options
        return SimFabric(nodes=["gpu1", "gpu2"], net_gbps=180.0)

    monkeypatch.setattr(cli_locate, "_make_runner", runner)
    result = CliRunner().invoke(main, ["locate", "--nccl-tests-dir", str(gpu_allocation), "--expect-busbw", "180",
                                       "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    options = given["options"]
    assert (options.engine, options.gpus_per_node) == ("nccl-tests", 8)
    assert options.nccl_tests_binary == str(gpu_allocation / "all_reduce_perf_mpi")
    lines = result.output.splitlines()
    assert ", engine nccl-tests, all_reduce 16M" in lines[0]
    assert lines[1].startswith("# engine nccl-tests, the default: 8 GPUs per node (SLURM_GPUS_ON_NODE=8, ")
    doc = json.loads((tmp_path / "r" / "locate.json").read_text())
    assert doc["gpus_per_node"] == {"value": 8, "evidence": "SLURM_GPUS_ON_NODE=8, SLURM_JOB_GPUS=0,1,2,3,4,5,6,7"}
