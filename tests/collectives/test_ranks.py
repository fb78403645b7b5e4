"""rank_info: one pure function of the environment, for every launcher; Slurm host lists."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collscope.collectives.ranks import RankInfo, expand_nodelist, rank_info, select_cuda_device
from collscope.errors import ConfigError, ParseError

TORCHRUN = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
            "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "node01", "MASTER_PORT": "29500"}
OPENMPI = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_RANK": "3", "PMIX_NAMESPACE": "prterun-vm-11474@1"}
SLURM = {"SLURM_PROCID": "6", "SLURM_NTASKS": "8", "SLURM_LOCALID": "2", "SLURM_NNODES": "2", "SLURM_NODEID": "1",
         "SLURM_STEP_NODELIST": "gpu[07-08]", "SLURM_JOB_NODELIST": "gpu[07-09]", "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
         "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"}


def test_torchrun():
    assert rank_info(TORCHRUN) == RankInfo(rank=5, world_size=8, local_rank=1, local_size=4, node_rank=1, nnodes=2,
                                           master_addr="node01", master_port=29500, source="torchrun")


def test_torchrun_wins_over_the_outer_launcher():
    info = rank_info({**SLURM, **OPENMPI, **TORCHRUN})
    assert info.source == "torchrun" and info.rank == 5


def test_openmpi_single_node_gets_loopback_and_a_port_from_the_job():
    info = rank_info(OPENMPI)
    assert (info.source, info.rank, info.world_size, info.local_rank, info.local_size, info.nnodes) == \
        ("openmpi", 3, 4, 1, 2, 2)
    assert info.master_addr is None  # two nodes: rank 0's host cannot be told from this environment
    one_node = rank_info({**OPENMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "4"})
    assert one_node.master_addr == "127.0.0.1" and one_node.nnodes == 1
    assert 20000 <= one_node.master_port < 32768  # below Linux's ephemeral ports
    other_rank = rank_info({**OPENMPI, "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0"})
    assert other_rank.master_port == one_node.master_port  # the same number on every rank of one job
    next_job = rank_info({**OPENMPI, "PMIX_NAMESPACE": "prterun-vm-11474@2"})
    assert next_job.master_port != one_node.master_port


@given(job=st.integers(min_value=1, max_value=10**9), step=st.sampled_from(["", "0", "1", "batch", "42"]))
def test_derived_port_stays_below_linux_ephemeral_ports(job, step):
    """A port derived from the Slurm job and step is in 20000..32767: Linux hands out 32768-60999 to outgoing
    connections (net.ipv4.ip_local_port_range), so a derived port there can be held when rank 0 binds it (a CI run
    saw EADDRINUSE on 37124)."""
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": str(job), "SLURM_STEP_ID": step,
           "SLURM_STEP_NODELIST": "node[1-2]", "SLURM_NNODES": "2"}
    port = rank_info(env).master_port
    assert port is not None and 20000 <= port < 32768


def test_master_env_overrides_derived_values():
    info = rank_info({**OPENMPI, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"})
    assert (info.master_addr, info.master_port) == ("10.0.0.1", 1234)


def test_pmi_and_pmix():
    info = rank_info({"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"})
    assert (info.source, info.rank, info.world_size, info.local_size, info.nnodes) == ("pmi", 2, 4, 2, 2)
    pmix = rank_info({"PMIX_RANK": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1", "SLURM_NNODES": "1",
                      "SLURM_STEP_NODELIST": "n1"})
    assert (pmix.source, pmix.rank, pmix.world_size, pmix.local_rank, pmix.master_addr) == ("pmix", 1, 2, 1, "n1")


def test_pmix_without_a_size_falls_through_to_single():
    assert rank_info({"PMIX_RANK": "0"}).source == "single"


def test_slurm():
    info = rank_info(SLURM)
    assert info == RankInfo(rank=6, world_size=8, local_rank=2, local_size=4, node_rank=1, nnodes=2,
                            master_addr="gpu07", master_port=info.master_port, source="slurm")
    assert 20000 <= info.master_port < 32768


def test_slurm_job_nodelist_when_no_step_list():
    env = {k: v for k, v in SLURM.items() if k != "SLURM_STEP_NODELIST"}
    assert rank_info(env).master_addr == "gpu07"


def test_single_process():
    info = rank_info({})
    assert (info.source, info.rank, info.world_size, info.nnodes, info.master_addr) == ("single", 0, 1, 1, "127.0.0.1")
    assert info.master_port is None and info.is_root


@pytest.mark.parametrize(("env", "message"), [
    ({"RANK": "2", "WORLD_SIZE": "2"}, "rank 2 is outside 0..1"),
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not an integer"),
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "0"}, "world size 0"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2"}, "local rank 3"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "master port 70000"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_STEP_NODELIST": "n[1-"}, "SLURM_STEP_NODELIST"),
])
def test_bad_environments_are_config_errors(env, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        rank_info(env)


@pytest.mark.parametrize(("text", "hosts"), [
    ("node[01-03,7],gpu5", ["node01", "node02", "node03", "node7", "gpu5"]),
    ("gpu5", ["gpu5"]),
    ("a,b,c", ["a", "b", "c"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("dgx-h100-[001-002].cluster", ["dgx-h100-001.cluster", "dgx-h100-002.cluster"]),
    (" n[1] ", ["n1"]),
])
def test_expand_nodelist(text, hosts):
    assert expand_nodelist(text) == hosts


@pytest.mark.parametrize("text", ["", "n[1-", "n1-2]", "n[3-1]", "n[a-b]", "a,,b", "n[]", "n[0-999999]"])
def test_bad_nodelists_raise_parse_error(text):
    with pytest.raises(ParseError):
        expand_nodelist(text, source="SLURM_STEP_NODELIST")


_HOST = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)


@given(st.lists(_HOST, min_size=1, max_size=6))
def test_plain_host_lists_round_trip(hosts):
    assert expand_nodelist(",".join(hosts)) == hosts


@given(_HOST, st.integers(0, 500), st.integers(0, 20), st.integers(1, 4))
def test_ranges_expand_to_their_length_with_padding(prefix, lo, span, width):
    lo_text = str(lo).zfill(width)
    hosts = expand_nodelist(f"{prefix}[{lo_text}-{lo + span}]")
    assert len(hosts) == span + 1
    assert hosts[0] == prefix + lo_text
    assert all(h.startswith(prefix) and len(h) >= len(prefix) + width for h in hosts)


@given(st.text(max_size=40))
def test_nodelist_never_raises_anything_but_parse_error(text):
    try:
        expand_nodelist(text)
    except ParseError:
        pass


def test_launch_world_mismatch_is_refused_only_for_direct_srun_launches():
    import pytest as _pytest

    from collscope.collectives.harness.mpi import check_launch_matches_world
    from collscope.errors import ConfigError

    check_launch_matches_world({"SLURM_STEP_NUM_TASKS": "2"}, 2)
    check_launch_matches_world({}, 1)
    # mpirun inside an allocation: Slurm's step describes mpirun's daemons, not the ranks
    check_launch_matches_world({"SLURM_STEP_NUM_TASKS": "2", "OMPI_COMM_WORLD_SIZE": "16"}, 16)
    with _pytest.raises(ConfigError, match="srun --mpi=pmix"):
        check_launch_matches_world({"SLURM_STEP_NUM_TASKS": "2"}, 1)


# --- select_cuda_device: one GPU per rank, under each launcher's variables -----------------------------------

EIGHT_GPU_SLURM = {**SLURM, "SLURM_LOCALID": "3", "SLURM_STEP_TASKS_PER_NODE": "8(x2)", "SLURM_NTASKS": "16",
                   "SLURM_PROCID": "11"}


@pytest.mark.parametrize(("env", "local"), [
    (EIGHT_GPU_SLURM, 3),
    ({**OPENMPI, "OMPI_COMM_WORLD_LOCAL_RANK": "5", "OMPI_COMM_WORLD_LOCAL_SIZE": "8", "OMPI_COMM_WORLD_SIZE": "8",
      "OMPI_COMM_WORLD_RANK": "5"}, 5),
    ({**TORCHRUN, "LOCAL_RANK": "7", "LOCAL_WORLD_SIZE": "8", "WORLD_SIZE": "16", "RANK": "15"}, 7),
], ids=["SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"])
def test_each_rank_drives_the_gpu_of_its_local_rank(env, local):
    assert select_cuda_device(rank_info(env), 8, env) == local


def test_one_gpu_bound_per_task_is_device_0_whatever_the_local_rank():
    # srun --gpus-per-task=1 (or --gpu-bind=single:1, --tres-bind=gres/gpu:per_task:1): each task sees its own GPU
    env = {**EIGHT_GPU_SLURM, "CUDA_VISIBLE_DEVICES": "3"}
    assert select_cuda_device(rank_info(env), 1, env) == 0


def test_more_ranks_on_a_node_than_visible_gpus_is_refused_on_every_rank():
    for local in ("0", "5"):
        env = {**TORCHRUN, "LOCAL_RANK": local, "LOCAL_WORLD_SIZE": "8", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
        with pytest.raises(ConfigError, match=r"8 ranks on this node \(local rank \d from LOCAL_RANK, local size from "
                                              r"LOCAL_WORLD_SIZE, torchrun environment\) but 4 visible GPU\(s\) "
                                              r"\(CUDA_VISIBLE_DEVICES '0,1,2,3'\)"):
            select_cuda_device(rank_info(env), 4, env)
    # two ranks of mpirun on a one-GPU node, nothing bound: both would land on GPU 0
    env = {**OPENMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_RANK": "0"}
    with pytest.raises(ConfigError, match="OMPI_COMM_WORLD_LOCAL_RANK.*1 visible GPU.*CUDA_VISIBLE_DEVICES unset"):
        select_cuda_device(rank_info(env), 1, env)


def test_no_visible_gpu_says_why():
    env = {**EIGHT_GPU_SLURM, "CUDA_VISIBLE_DEVICES": ""}
    with pytest.raises(ConfigError, match=r"CUDA_VISIBLE_DEVICES is set but empty \(''\), which hides every GPU"):
        select_cuda_device(rank_info(env), 0, env)
    with pytest.raises(ConfigError, match="no GPU visible to this process \\(CUDA_VISIBLE_DEVICES unset\\)"):
        select_cuda_device(rank_info(SLURM), 0, SLURM)


def test_a_single_process_takes_gpu_0():
    assert select_cuda_device(rank_info({}), 8, {}) == 0
    assert select_cuda_device(rank_info({}), 1, {}) == 0
