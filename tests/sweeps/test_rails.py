"""CPU rails (interface knobs, mpi-rails / gloo-rails), the user's environment forwarded by mpirun, and the
reasons a multi-node launch died."""

from __future__ import annotations

from pathlib import Path

import pytest

from collscope.errors import ConfigError
from collscope.sweeps.diagnose import launch_diagnosis
from collscope.sweeps.environment import forwarded_names
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.launchers import build_launch
from collscope.sweeps.plan import plan_sweep, preset
from collscope.sweeps.presets import rail_interfaces
from collscope.topo.detect import load_captures
from collscope.topo.node import build_node
from collscope.vocab.knobs import validate_setting

NETIF = Path(__file__).parents[1] / "fixtures" / "netif"


@pytest.mark.parametrize(("name", "value", "normal"), [
    ("OMPI_MCA_btl_tcp_if_include", "cl1", "cl1"),
    ("OMPI_MCA_btl_tcp_if_include", " cl0 , 10.99.1.0/24", "cl0,10.99.1.0/24"),
    ("OMPI_MCA_oob_tcp_if_include", "eth0", "eth0"),
    ("GLOO_SOCKET_IFNAME", "cl0,cl1", "cl0,cl1"),
])
def test_interface_knobs(name: str, value: str, normal: str) -> None:
    assert validate_setting(name, value) == normal


@pytest.mark.parametrize(("name", "value"), [
    ("OMPI_MCA_btl_tcp_if_include", "cl0;rm -rf /"), ("OMPI_MCA_btl_tcp_if_include", "10.0.0.0/40"),
    ("GLOO_SOCKET_IFNAME", "10.99.0.0/24"), ("GLOO_SOCKET_IFNAME", "a-name-longer-than-15"),
    ("GLOO_SOCKET_IFNAME", "cl0,,cl1"),
])
def test_bad_interfaces_are_refused_with_the_valid_values(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match="valid: a comma list of interface names"):
        validate_setting(name, value)


def test_mpi_rails_one_point_per_rail_after_the_default() -> None:
    plan = plan_sweep(preset("mpi-rails", repeats=1), env={})
    assert [p.settings for p in plan.points] == [
        {}, {"OMPI_MCA_btl_tcp_if_include": "cl0", "OMPI_MCA_oob_tcp_if_include": "cl0"},
        {"OMPI_MCA_btl_tcp_if_include": "cl1", "OMPI_MCA_oob_tcp_if_include": "cl1"}]
    gloo = plan_sweep(preset("gloo-rails", rails=["eth1", "eth2"], repeats=1), env={})
    assert [p.settings for p in gloo.points] == [{}, {"GLOO_SOCKET_IFNAME": "eth1"}, {"GLOO_SOCKET_IFNAME": "eth2"}]


def test_rail_knob_has_no_effect_on_the_other_engine_or_one_node() -> None:
    plan = plan_sweep(preset("gloo-rails", engine="mpi", backend=None, repeats=1), env={})
    assert len(plan.points) == 1 and "no effect on this engine" in plan.skipped[0].reason
    one = plan_sweep(preset("mpi-rails", nnodes=1), env={})
    assert "single node" in one.skipped[0].reason


def test_rails_from_a_captured_topology() -> None:
    node = build_node(load_captures([NETIF / "node4-cl1-down-ip-addr.json"]))
    assert rail_interfaces(node) == ("cl0",)  # cl1 is down
    assert rail_interfaces(None) == ("cl0", "cl1")
    assert rail_interfaces(["eth1"]) == ("eth1",)


def test_mpirun_forwards_the_users_variables() -> None:
    env = {"NCCL_IB_HCA": "mlx5_0", "UCX_TLS": "tcp", "OMPI_MCA_btl": "tcp,self", "GLOO_SOCKET_IFNAME": "cl0",
           "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0", "HOME": "/root", "bad name": "x"}
    names = forwarded_names(env)  # never the launching host's CUDA_VISIBLE_DEVICES (tests/sweeps/test_gpu_launch.py)
    assert names == ("CUDA_DEVICE_ORDER", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "OMPI_MCA_btl", "UCX_TLS")
    spec = preset("mpi-rails", repeats=1)
    point = plan_sweep(spec, env={}).points[2]
    cmd = build_launch("mpirun", spec, point, "/r/p.jsonl", LaunchOptions(python="py", forward_env=names))
    argv = list(cmd.argv)
    xs = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    # The point's own variables first, then the user's, each once.
    assert xs == ["OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include", *names]
    with pytest.raises(ConfigError, match="forward_env"):
        LaunchOptions(python="py", forward_env=("A=B",))


# As srun and slurmstepd printed it on the simulated cluster when node2 was killed (the STEP line is one line).
SRUN_NODE_LOST = """\
[node1][[47173,0],0][btl_tcp_frag.c:127:mca_btl_tcp_frag_send] peer: node2 writev failed: Connection reset (104)
srun: error: Node failure on node2
slurmstepd-node1: error: *** STEP 21.1 ON node1 CANCELLED AT 2026-12-01T12:16:47 DUE TO NODE FAILURE, \
SEE SLURMCTLD LOG FOR DETAILS ***
srun: Job step aborted: Waiting up to 7 seconds for job step to finish.
srun: error: node1: task 0: Exited with exit code 14
"""


def test_launch_diagnosis_names_the_lost_node() -> None:
    assert launch_diagnosis(SRUN_NODE_LOST) == (
        "node failure on node2; Slurm cancelled step 21.1 because node2 failed (slurmstepd on node1, which stayed "
        "up, reported the cancellation); node1: task 0: exited with exit code 14")
    assert launch_diagnosis("# collscope bench ...\n") is None
    assert "srun could not start the step" in launch_diagnosis(
        "srun: error: Unable to create step for job 18: Duplicate job id\n")


def test_launch_diagnosis_names_a_stale_mpirun_session() -> None:
    # What Open MPI 5.0's mpirun printed (exit 213) when a killed mpirun's $TMPDIR/ompi.<pid> had its pid.
    text = ("-" * 74 + "\nThe PMIx server's listener thread failed to start. We cannot\ncontinue.\n" + "-" * 74 + "\n")
    diagnosis = launch_diagnosis(text)
    assert diagnosis is not None and "session directory ($TMPDIR/ompi.<pid>)" in diagnosis
