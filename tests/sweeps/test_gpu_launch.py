"""srun steps on GPU nodes (collscope.sweeps.slurm_gpu) and what the launchers forward (issue 21, items 3, 11 and
the forwarding friction): the Slurm version's GPU-unbinding option, CPUs and tasks per node, NCCL_TESTS_DEVICE,
the allocation read from SLURM_* variables, mpirun's -x list. Golden command lines: test_launchers.py."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from collscope.errors import ConfigError, ParseError
from collscope.sweeps import environment
from collscope.sweeps.environment import (
    enclosing_launch,
    forwarded_names,
    gpus_per_node_of,
    launch_options,
    slurm_version,
)
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.launchers import build_launch
from collscope.sweeps.slurm_gpu import gpu_step, gpu_unbind_flag, parse_slurm_version
from collscope.sweeps.spec import Point, SweepSpec
from tests.fakes import Answer, FakeTools

PY = "/usr/bin/python3"
OUT = "/r/p.jsonl"
BIN = "/opt/nccl-tests/build/all_reduce_perf_mpi"
NCCL = SweepSpec(name="g", engine="nccl-tests", min_bytes=8, max_bytes=1 << 20, nranks=16, nnodes=2, timeout_s=600)
TORCH = SweepSpec(name="g", engine="torch", backend="nccl", min_bytes=8, max_bytes=1 << 20, nranks=16, nnodes=2,
                  timeout_s=600)
MPI = SweepSpec(name="g", engine="mpi", min_bytes=8, max_bytes=1024, nranks=4, nnodes=2, timeout_s=60)
POINT = Point(point_id="p", op="all_reduce", settings={"NCCL_ALGO": "Ring"})


def _srun(spec: SweepSpec = NCCL, **kw) -> tuple[str, ...]:
    options = LaunchOptions(python=PY, nccl_tests_binary=BIN if spec.engine == "nccl-tests" else None, **kw)
    return build_launch("srun", spec, POINT, OUT, options).argv


@pytest.mark.parametrize(("text", "version"), [
    ("slurm 22.05.8\n", (22, 5, 8)),
    ("slurm-wlm 22.05.8\n", (22, 5, 8)),
    ("slurm 23.11.0-0rc1\n", (23, 11, 0)),
    ("slurm 24.05.4\n", (24, 5, 4)),
    ("slurm 25.05\n", (25, 5, 0)),
])
def test_slurm_version_as_srun_prints_it(text, version):
    assert parse_slurm_version(text) == version


@pytest.mark.parametrize("text", ["", "srun: command not found\n", "mpirun (Open MPI) 5.0.11\n", "slurm x.y\n"])
def test_other_text_is_not_a_slurm_version(text):
    with pytest.raises(ParseError, match="srun --version"):
        parse_slurm_version(text)


@pytest.mark.parametrize(("version", "flag"), [
    ((20, 11, 9), None),  # no per-task GPU binding to undo, and no 'none'
    ((21, 8, 0), None),  # --gpus-per-task binds, but 'none' arrives in 21.08.1
    ((21, 8, 1), "--gpu-bind=none"),
    ((22, 5, 8), "--gpu-bind=none"),
    ((23, 2, 8), "--gpu-bind=none"),  # no --tres-bind before 23.11
    ((23, 11, 0), "--tres-bind=gres/gpu:none"),
    ((24, 5, 4), "--tres-bind=gres/gpu:none"),  # nccl-tests issue 300's Slurm
    ((25, 11, 0), "--tres-bind=gres/gpu:none"),
    (None, "--gpu-bind=none"),  # unknown: the spelling every Slurm from 21.08.1 on accepts
])
def test_gpu_binding_is_turned_off_with_the_option_the_version_accepts(version, flag):
    assert gpu_unbind_flag(version) == flag


@pytest.mark.parametrize("spec", [NCCL, TORCH, replace(MPI, nranks=16)], ids=lambda s: s.engine)
def test_gpu_srun_lines_carry_tasks_cpus_binding_for_every_engine(spec):
    argv = _srun(spec, gpus_per_node=8, slurm_version=(24, 5, 4), cpus_on_node=128)
    i = argv.index("--export=ALL")
    assert argv[:i] == ("srun", "--ntasks", "16", "--nodes", "2", "--ntasks-per-node=8", "--cpus-per-task=16",
                        "--cpu-bind=cores", "--tres-bind=gres/gpu:none")


def test_cpu_nodes_keep_the_plain_srun_line():
    """CPU clusters (tests/multinode) see no GPU option: gpus_per_node None or 0."""
    plain = ("srun", "--ntasks", "4", "--nodes", "2", "--export=ALL", "--kill-on-bad-exit=1")
    for options in ({}, {"gpus_per_node": 0}):
        argv = _srun(MPI, **options)
        assert argv[:7] == plain and not any(a.startswith(("--gpu", "--tres", "--cpus", "--ntasks-per")) for a in argv)


@pytest.mark.parametrize(("kw", "cpus"), [
    ({"cpus_per_task": 12, "cpus_on_node": 128}, "--cpus-per-task=12"),  # the allocation's SLURM_CPUS_PER_TASK
    ({"cpus_on_node": 128}, "--cpus-per-task=16"),  # else the node's CPUs over its 8 tasks
    ({"cpus_on_node": 4}, "--cpus-per-task=1"),  # never 0
    ({}, None),  # nothing known: left to Slurm
])
def test_cpus_per_task(kw, cpus):
    argv = _srun(gpus_per_node=8, slurm_version=(22, 5, 8), **kw)
    assert [a for a in argv if a.startswith("--cpus-per-task")] == ([cpus] if cpus else [])


def test_a_binding_the_user_chose_replaces_cores():
    argv = _srun(gpus_per_node=8, cpu_bind="ldoms", slurm_version=(22, 5, 8))
    assert [a for a in argv if a.startswith("--cpu-bind")] == ["--cpu-bind=ldoms"]


def test_nccl_tests_device_only_where_each_task_sees_one_gpu():
    one = build_launch("srun", NCCL, POINT, OUT, LaunchOptions(python=PY, nccl_tests_binary=BIN, gpus_per_node=8,
                                                                one_gpu_per_task=True))
    assert one.env["NCCL_TESTS_DEVICE"] == "0"
    every = build_launch("srun", NCCL, POINT, OUT, LaunchOptions(python=PY, nccl_tests_binary=BIN, gpus_per_node=8))
    assert "NCCL_TESTS_DEVICE" not in every.env  # all GPUs visible: nccl-tests picks device local rank
    torch = build_launch("srun", TORCH, POINT, OUT, LaunchOptions(python=PY, gpus_per_node=8, one_gpu_per_task=True))
    assert "NCCL_TESTS_DEVICE" not in torch.env
    point = replace(POINT, settings={"NCCL_TESTS_DEVICE": "3"})
    own = build_launch("srun", NCCL, point, OUT, LaunchOptions(python=PY, nccl_tests_binary=BIN, gpus_per_node=8,
                                                                one_gpu_per_task=True))
    assert own.env["NCCL_TESTS_DEVICE"] == "3"  # a point's own value wins


@pytest.mark.parametrize(("nranks", "nnodes", "gpus", "match"), [
    (16, 2, 4, "Duplicate GPU"),  # 8 ranks per node on 4 GPUs
    (15, 2, 8, "not a multiple"),
    (8, 1, 0, "gpus_per_node=0"),
])
def test_rank_placements_no_gpu_node_can_run_are_refused(nranks, nnodes, gpus, match):
    with pytest.raises(ConfigError, match=match):
        gpu_step(nranks=nranks, nnodes=nnodes, gpus_per_node=gpus, slurm_version=None, cpus_per_task=None,
                 cpus_on_node=None, cpu_bind=None, one_gpu_per_task=False, engine="torch")


def test_the_launcher_refuses_more_ranks_per_node_than_gpus():
    with pytest.raises(ConfigError, match="Duplicate GPU"):
        _srun(gpus_per_node=4)


@pytest.mark.parametrize("kind", ["local", "mpirun"])
@pytest.mark.parametrize("kw", [{"gpus_per_node": 8}, {"one_gpu_per_task": True}, {"slurm_version": (22, 5, 8)},
                                {"cpus_per_task": 4}])
def test_gpu_step_options_belong_to_srun(kind, kw):
    with pytest.raises(ConfigError, match="srun options"):
        build_launch(kind, replace(MPI, nnodes=1), POINT, OUT, LaunchOptions(python=PY, **kw))


@pytest.mark.parametrize(("env", "gpus"), [
    ({"SLURM_GPUS_ON_NODE": "8", "SLURM_GPUS_PER_NODE": "8"}, 8),
    ({"SLURM_GPUS_ON_NODE": "8", "SLURM_GPUS_PER_NODE": "h100:8", "SLURM_GRES": "gpu:8"}, 8),
    ({"SLURM_GPUS_PER_NODE": "h100:8"}, 8),
    ({"SLURM_GPUS_PER_NODE": "8"}, 8),
    ({"SLURM_JOB_GPUS": "0,1,2,3"}, 4),
    ({"SLURM_JOB_GPUS": "0-3,6"}, 5),
    ({"SLURM_GRES": "gpu:h100:4"}, 4),
    ({"SLURM_GRES": "none"}, 0),
    ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "16"}, None),  # a CPU allocation
    ({}, None),
])
def test_gpus_per_node_from_the_allocation(env, gpus):
    assert gpus_per_node_of(env) == gpus


@pytest.mark.parametrize(("env", "words"), [
    ({"SLURM_GPUS_ON_NODE": "8", "SLURM_GPUS_PER_NODE": "4"}, ["SLURM_GPUS_ON_NODE=8 says 8",
                                                               "SLURM_GPUS_PER_NODE=4 says 4", "--gpus-per-node"]),
    ({"SLURM_JOB_GPUS": "garbage"}, ["SLURM_JOB_GPUS='garbage'", "valid: GPU ids"]),
])
def test_the_sweeps_refuse_gpu_evidence_that_disagrees_as_locate_does(env, words):
    """One reading of the allocation for sweeps and locate: evidence that disagrees, or is not Slurm's, is an
    error naming it (it used to take the first variable, or to read garbage as no GPU)."""
    with pytest.raises(ConfigError) as exc:
        gpus_per_node_of(env)
    for word in words:
        assert word in str(exc.value)


def _fake_srun(fake_tools: FakeTools, version: str = "slurm 24.05.4\n") -> None:
    fake_tools.add("srun", {"--version": Answer(stdout=version)})


def test_launch_options_read_the_gpu_allocation(fake_tools, monkeypatch):
    _fake_srun(fake_tools)
    monkeypatch.setattr(environment, "find_tool", lambda name: "mpirun")
    env = {"SLURM_JOB_ID": "7", "SLURM_GPUS_ON_NODE": "8", "SLURM_CPUS_PER_TASK": "14", "SLURM_CPUS_ON_NODE": "128"}
    options = launch_options("srun", "nccl-tests", env=env)
    assert (options.gpus_per_node, options.slurm_version, options.cpus_per_task, options.cpus_on_node) == \
        (8, (24, 5, 4), 14, 128)
    cpu = launch_options("srun", "nccl-tests", env=env, gpus_per_node=0)  # --gpus-per-node 0: CPU lines
    assert cpu.gpus_per_node is None and cpu.slurm_version is None
    assert launch_options("mpirun", "mpi", env=env).gpus_per_node is None
    with pytest.raises(ConfigError, match="one-gpu-per-task"):
        launch_options("srun", "nccl-tests", env={"SLURM_JOB_ID": "7"}, one_gpu_per_task=True)


def test_an_unknown_slurm_version_is_said_and_the_common_option_used(fake_tools, caplog):
    fake_tools.add("srun", {"--version": Answer(stdout="", stderr="srun: error: no\n", exit_code=1)})
    with caplog.at_level(logging.WARNING, logger="collscope.sweeps.environment"):
        assert slurm_version() is None
    assert "--gpu-bind=none" in caplog.text and "exit code 1" in caplog.text
    assert slurm_version("/nonexistent/srun") is None


@pytest.mark.parametrize(("env", "inside"), [
    ({"SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "8"}, ("srun", 8)),
    ({"OMPI_COMM_WORLD_SIZE": "4"}, ("mpirun", 4)),
    ({"PMI_SIZE": "2"}, ("mpirun", 2)),
    ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "16"}, None),  # a batch script: not a task of a step
    ({"SLURM_STEP_NUM_TASKS": "1"}, None),
    ({"OMPI_COMM_WORLD_SIZE": "x"}, None),
])
def test_enclosing_launch(env, inside):
    assert enclosing_launch(env) == inside


def test_mpirun_forwards_libraries_and_fabric_but_never_the_launching_hosts_gpus(monkeypatch):
    env = {"LD_LIBRARY_PATH": "/opt/nccl/lib", "FI_PROVIDER": "efa", "HCOLL_ENABLE_MCAST_ALL": "0",
           "SHARP_COLL_ENABLE_SAT": "1", "NVSHMEM_BOOTSTRAP": "MPI", "CUDA_VISIBLE_DEVICES": "3",
           "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_IB_HCA": "mlx5_0", "HOME": "/root", "LD_LIBRARY_PATHX": "x"}
    names = forwarded_names(env)
    assert names == ("CUDA_DEVICE_ORDER", "FI_PROVIDER", "HCOLL_ENABLE_MCAST_ALL", "LD_LIBRARY_PATH", "NCCL_IB_HCA",
                     "NVSHMEM_BOOTSTRAP", "SHARP_COLL_ENABLE_SAT")
    monkeypatch.setattr(environment, "find_tool", lambda name: "mpirun")
    options = launch_options("mpirun", "mpi", env=env)
    argv = build_launch("mpirun", MPI, POINT, OUT, options).argv
    forwarded = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert "CUDA_VISIBLE_DEVICES" not in forwarded and "LD_LIBRARY_PATH" in forwarded
    assert forwarded[:1] == ["NCCL_ALGO"]  # the point's own variable first
