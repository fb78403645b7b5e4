"""Launch commands: golden command lines per launcher x engine, hostile values, flavour detection, one real run.

Golden files: ``tests/sweeps/golden/<case>.txt`` hold ``LaunchCommand.display()`` of each case. After an
intended change, regenerate them with ``COLLSCOPE_UPDATE_GOLDEN=1 python -m pytest tests/sweeps/test_launchers.py``
and review the diff.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collscope import proc
from collscope.errors import ConfigError, ParseError
from collscope.sweeps.launch_options import ROOT_ENV, LaunchCommand, LaunchOptions
from collscope.sweeps.launchers import bench_argv, build_launch, detect_mpi_flavour
from collscope.sweeps.spec import Point, SweepSpec
from tests.collectives.launch import ROOT_FLAGS, clean_env, need_mpi, records

GOLDEN = Path(__file__).parent / "golden"
PY = "/opt/py env/bin/python3"
OUT = "/results/my sweep/points/all_reduce-x.jsonl"
HOSTILE = ("a b", "it's", 'say "hi"', "x; rm -rf /", "$(touch pwned)", "`id`", "line1\nline2", "tab\there",
           "back\\slash", "*", "~", "", "-n", "--", "ünïcode", "a=b", "!!", "#hash", "{a,b}")

MPI_SPEC = SweepSpec(name="golden", engine="mpi", min_bytes=8, max_bytes=1 << 20, iters=20, warmup=5, nranks=4,
                     fixed_env={"OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}, timeout_s=600)
MPI_POINT = Point(point_id="all_reduce-ring", op="all_reduce",
                  settings={"OMPI_MCA_coll_tuned_allreduce_algorithm": "4"})
TORCH_SPEC = SweepSpec(name="golden", engine="torch", backend="nccl", min_bytes=1024, max_bytes=1 << 24,
                       factor=4.0, check=False, nranks=8, nnodes=2, fixed_env={"NCCL_DEBUG": "INFO"},
                       timeout_s=300)
NCCL_SPEC = SweepSpec(name="golden", engine="nccl-tests", dtype="bfloat16", min_bytes=8, max_bytes=1 << 30,
                      nranks=8, fixed_env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"},
                      timeout_s=900)
NCCL_POINT = Point(point_id="all_gather-tree", op="all_gather", settings={"NCCL_ALGO": "Ring,Tree"})
NCCL_BIN = "/opt/nccl tests/build/all_gather_perf"
TORCH_POINT = Point(point_id="all_reduce-simple", op="all_reduce", settings={"NCCL_PROTO": "Simple"})

CASES: dict[str, tuple[str, SweepSpec, Point, LaunchOptions]] = {
    "local-mpi": ("local", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, as_root=True)),
    "local-mpi-mpich": ("local", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, flavour="mpich", bind_to="core")),
    "local-torch": ("local", replace(TORCH_SPEC, nnodes=1), TORCH_POINT, LaunchOptions(python=PY, as_root=True)),
    "local-nccl-tests": ("local", NCCL_SPEC, NCCL_POINT, LaunchOptions(python=PY, nccl_tests_binary=NCCL_BIN)),
    "mpirun-openmpi-mpi": ("mpirun", replace(MPI_SPEC, nranks=8, nnodes=2), MPI_POINT, LaunchOptions(
        python=PY, as_root=True, hostfile="/etc/my hosts", bind_to="core", mpirun="/opt/ompi/bin/mpirun")),
    "mpirun-mpich-mpi": ("mpirun", replace(MPI_SPEC, nranks=8, nnodes=2), MPI_POINT, LaunchOptions(
        python=PY, as_root=True, flavour="mpich", hostfile="/etc/my hosts", bind_to="core")),
    "mpirun-openmpi-torch": ("mpirun", TORCH_SPEC, TORCH_POINT, LaunchOptions(
        python=PY, hostfile="hosts", map_by="ppr:4:node:PE=2", master_addr="node01", master_port=29511,
        oversubscribe=True, extra_args=("--mca", "btl_tcp_if_include", "eth0"))),
    "mpirun-openmpi-nccl-tests": ("mpirun", replace(NCCL_SPEC, nnodes=2), NCCL_POINT, LaunchOptions(
        python=PY, nccl_tests_binary=NCCL_BIN, hostfile="hosts")),
    "srun-mpi": ("srun", replace(MPI_SPEC, nranks=8, nnodes=2), MPI_POINT, LaunchOptions(
        python=PY, as_root=True, srun_mpi="pmix", cpu_bind="cores")),
    "srun-torch": ("srun", TORCH_SPEC, TORCH_POINT, LaunchOptions(python=PY)),
    "srun-nccl-tests": ("srun", replace(NCCL_SPEC, nnodes=2), NCCL_POINT, LaunchOptions(
        python=PY, nccl_tests_binary=NCCL_BIN, srun_mpi="pmi2", extra_args=("--gpus-per-task", "1"))),
    # GPU nodes (collscope.sweeps.slurm_gpu): 2 nodes of 8 GPUs, the node's 128 CPUs shared by its 8 tasks.
    "srun-nccl-tests-gpu-slurm22.05": ("srun", replace(NCCL_SPEC, nranks=16, nnodes=2), NCCL_POINT, LaunchOptions(
        python=PY, nccl_tests_binary=NCCL_BIN, srun_mpi="pmix", gpus_per_node=8, slurm_version=(22, 5, 8),
        cpus_on_node=128)),
    "srun-torch-gpu-slurm24.05": ("srun", TORCH_SPEC, TORCH_POINT, LaunchOptions(
        python=PY, gpus_per_node=4, slurm_version=(24, 5, 4), cpus_per_task=12, cpus_on_node=96)),
    "srun-nccl-tests-one-gpu-per-task-slurm21.08.0": ("srun", replace(NCCL_SPEC, nranks=16, nnodes=2), NCCL_POINT,
                                                      LaunchOptions(python=PY, nccl_tests_binary=NCCL_BIN,
                                                                    srun_mpi="pmix", gpus_per_node=8,
                                                                    slurm_version=(21, 8, 0), cpu_bind="ldoms",
                                                                    one_gpu_per_task=True)),
}


def _build(case: str) -> LaunchCommand:
    kind, spec, point, options = CASES[case]
    return build_launch(kind, spec, point, OUT, options)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_command_lines(case):
    text = _build(case).display() + "\n"
    path = GOLDEN / f"{case}.txt"
    if os.environ.get("COLLSCOPE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        pytest.skip(f"rewrote {path}; review the diff")
    assert path.exists(), f"{path} missing; run with COLLSCOPE_UPDATE_GOLDEN=1 to record it"
    assert text == path.read_text(), f"{case}: command line changed; if intended, rerun with COLLSCOPE_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("case", sorted(CASES))
def test_display_splits_back_into_env_and_argv(case):
    cmd = _build(case)
    assert shlex.split(cmd.display()) == ["env", *(f"{k}={v}" for k, v in cmd.env.items()), *cmd.argv]


def test_settings_win_over_fixed_env_and_reach_the_environment():
    spec = replace(MPI_SPEC, fixed_env={"NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"})
    point = Point(point_id="p", op="all_reduce", settings={"NCCL_ALGO": "Tree"})
    cmd = build_launch("srun", spec, point, OUT, LaunchOptions(python=PY))
    assert cmd.env == {"NCCL_ALGO": "Tree", "NCCL_DEBUG": "INFO"}
    assert "--export=ALL" in cmd.argv and not any(a.startswith("--export=ALL,") for a in cmd.argv)


def test_openmpi_forwards_every_name_and_root_flags_only_for_root():
    user = build_launch("mpirun", MPI_SPEC, MPI_POINT, OUT, LaunchOptions(python=PY))
    assert not set(ROOT_ENV) & set(user.env)
    names = [user.argv[i + 1] for i, a in enumerate(user.argv) if a == "-x"]
    assert names == list(user.env)
    root = build_launch("mpirun", MPI_SPEC, MPI_POINT, OUT, LaunchOptions(python=PY, as_root=True))
    assert ROOT_ENV.items() <= root.env.items()
    assert [root.argv[i + 1] for i, a in enumerate(root.argv) if a == "-x"] == list(root.env)


def test_hostile_values_are_list_elements_never_shell_text():
    value = "\n".join(HOSTILE)
    point = Point(point_id="p", op="all_reduce", settings={"NCCL_ALGO": value})
    out = "/tmp/a b/'quoted'; $(x)\n/out.jsonl"
    ompi = build_launch("mpirun", MPI_SPEC, point, out, LaunchOptions(python=PY))
    assert ompi.env["NCCL_ALGO"] == value and value not in ompi.argv  # the value stays in the environment
    assert ompi.argv[ompi.argv.index("--out") + 1] == out
    mpich = build_launch("mpirun", MPI_SPEC, point, out, LaunchOptions(python=PY, flavour="mpich"))
    i = mpich.argv.index("NCCL_ALGO")
    assert mpich.argv[i - 1:i + 2] == ("-genv", "NCCL_ALGO", value)
    for cmd in (ompi, mpich):
        assert shlex.split(cmd.display()) == ["env", *(f"{k}={v}" for k, v in cmd.env.items()), *cmd.argv]


def _bash(script: str) -> proc.ProcResult:
    return proc.run(["bash", "-c", script], timeout_s=30, env={"PATH": os.environ.get("PATH", os.defpath)})


def test_display_pasted_into_bash_reproduces_argv_exactly():
    cmd = LaunchCommand(argv=("printf", "%s\\0", *HOSTILE), env={})
    result = _bash(cmd.display())
    assert result.ok, result.stderr
    assert result.stdout.split("\0")[:-1] == list(HOSTILE)


@pytest.mark.parametrize("value", HOSTILE)
def test_display_pasted_into_bash_reproduces_env_values_exactly(value):
    cmd = LaunchCommand(argv=("printenv", "HOSTILE"), env={"HOSTILE": value, "OTHER": "x y"})
    result = _bash(cmd.display())
    assert result.ok, result.stderr
    assert result.stdout == value + "\n"


def test_per_rank_display_shows_every_process():
    cmd = LaunchCommand(argv=("printenv", "RANK"), env={"A": "1"}, per_rank_env=({"RANK": "0"}, {"RANK": "1"}))
    lines = cmd.display().splitlines()
    assert lines == ["env A=1 RANK=0 printenv RANK &", "env A=1 RANK=1 printenv RANK &", "wait"]
    result = _bash(cmd.display())
    assert sorted(result.stdout.split()) == ["0", "1"]


@given(st.lists(st.text(), min_size=1),
       st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), st.text()))
def test_display_round_trips_through_shlex(argv, env):
    cmd = LaunchCommand(argv=("prog", *argv), env=env)
    assert shlex.split(cmd.display()) == ["env", *(f"{k}={v}" for k, v in env.items()), "prog", *argv]


def test_bench_argv_matches_the_bench_command_options():
    spec = replace(TORCH_SPEC, check=True, factor=1.5, backend="gloo")
    argv = bench_argv(spec, TORCH_POINT, OUT, python=PY, timeout_s=54.5)
    assert argv == [PY, "-m", "collscope", "bench", "--engine", "torch", "--op", "all_reduce", "--min-bytes", "1024",
                    "--max-bytes", str(1 << 24), "--factor", "1.5", "--iters", "20", "--warmup", "5", "--check",
                    "--dtype", "float32", "--out", OUT, "--timeout", "54.5", "--backend", "gloo"]
    import click

    from collscope.cli import main

    # the real command accepts every option as built; parsed under the group's context, as `collscope bench` is
    # (click caches a command's help option at first use: without the parent it would cache '--help' alone, and
    # docs/cli.md, generated later in the same process, would lose '-h')
    parsed = main.commands["bench"].make_context("bench", argv[4:], parent=click.Context(main, **main.context_settings))
    assert parsed.params["out"] == Path(OUT) and parsed.params["timeout_s"] == 54.5
    assert parsed.params["check"] and parsed.params["backend"] == "gloo" and parsed.params["factor"] == 1.5


def test_master_addr_from_fixed_env_is_enough_for_multi_node_torch():
    spec = replace(TORCH_SPEC, fixed_env={"MASTER_ADDR": "node01"})
    cmd = build_launch("mpirun", spec, TORCH_POINT, OUT, LaunchOptions(python=PY))
    assert cmd.env["MASTER_ADDR"] == "node01" and "MASTER_ADDR" in cmd.argv


def test_local_oversubscribes_only_when_ranks_exceed_cores():
    def flags(**kw):
        return build_launch("local", MPI_SPEC, MPI_POINT, OUT, LaunchOptions(python=PY, **kw)).argv
    assert "--oversubscribe" in flags()  # cores unknown: the launch must not fail on slots
    assert "--oversubscribe" in flags(local_cores=2)  # 4 ranks
    assert "--oversubscribe" not in flags(local_cores=4)  # fits: keep Open MPI's binding
    assert "--oversubscribe" not in flags(oversubscribe=False)


def test_rank_timeout_is_below_the_point_timeout():
    cmd = build_launch("local", MPI_SPEC, MPI_POINT, OUT, LaunchOptions(python=PY))
    assert cmd.argv[cmd.argv.index("--timeout") + 1] == "540"
    cmd = build_launch("local", MPI_SPEC, MPI_POINT, OUT, LaunchOptions(python=PY, rank_timeout_s=30))
    assert cmd.argv[cmd.argv.index("--timeout") + 1] == "30"


def _flags(argv: tuple[str, ...]) -> dict[str, str]:
    """nccl-tests' ``-x value`` pairs after the binary."""
    return {argv[i]: argv[i + 1] for i in range(1, len(argv) - 1, 2)}


def test_nccl_tests_records_come_from_stdout_with_check_and_timeout():
    cmd = _build("local-nccl-tests")
    assert cmd.records_from == "stdout" and cmd.argv[0] == NCCL_BIN
    args = _flags(cmd.argv)
    assert args["-g"] == "8" and args["-c"] == "1" and args["-T"] == "810" and args["-d"] == "bfloat16"
    unchecked = build_launch("local", replace(NCCL_SPEC, check=False), NCCL_POINT, OUT,
                             LaunchOptions(python=PY, nccl_tests_binary=NCCL_BIN))
    assert _flags(unchecked.argv)["-c"] == "0"
    assert _build("mpirun-openmpi-mpi").records_from == "out_file"


@pytest.mark.parametrize("kind, spec, point, options, match", [
    ("local", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, hostfile="hosts"), "hostfile"),
    ("local", replace(MPI_SPEC, nnodes=2), MPI_POINT, LaunchOptions(python=PY), "nnodes=2"),
    ("local", TORCH_SPEC, MPI_POINT, LaunchOptions(python=PY), "nnodes=2"),
    ("local", replace(TORCH_SPEC, nnodes=1), MPI_POINT, LaunchOptions(python=PY, bind_to="core"), "bind_to"),
    ("local", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, srun_mpi="pmix"), "srun_mpi"),
    ("local", NCCL_SPEC, NCCL_POINT, LaunchOptions(python=PY, nccl_tests_binary=NCCL_BIN, extra_args=("-v",)),
     "extra_args"),
    ("mpirun", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, cpu_bind="cores"), "cpu_bind"),
    ("mpirun", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, flavour="mpich", oversubscribe=True), "Hydra"),
    ("mpirun", TORCH_SPEC, MPI_POINT, LaunchOptions(python=PY), "master_addr"),
    ("mpirun", replace(TORCH_SPEC, fixed_env={"MASTER_ADDR": ""}), TORCH_POINT, LaunchOptions(python=PY),
     "master_addr"),
    ("mpirun", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, master_addr="n1"), "engine torch"),
    ("srun", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, map_by="core"), "map_by"),
    ("srun", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, hostfile="h"), "hostfile"),
    ("sbatch", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY), "valid: local, mpirun, srun"),
    ("srun", MPI_SPEC, Point(point_id="p", op="sendrecv", settings={}), LaunchOptions(python=PY), "sendrecv"),
    ("srun", MPI_SPEC, Point(point_id="p", op="all_reduce", settings={"NCCL-ALGO": "x"}),
     LaunchOptions(python=PY), "NCCL-ALGO"),
    ("srun", MPI_SPEC, Point(point_id="p", op="all_reduce", settings={"A": "x\0y"}), LaunchOptions(python=PY), "NUL"),
    ("srun", NCCL_SPEC, NCCL_POINT, LaunchOptions(python=PY), "find_nccl_tests_binary"),
    ("srun", NCCL_SPEC, NCCL_POINT, LaunchOptions(python=PY, nccl_tests_binary="/b/all_reduce_perf"), "all_gather"),
    ("srun", replace(NCCL_SPEC, factor=1.5), NCCL_POINT, LaunchOptions(python=PY, nccl_tests_binary=NCCL_BIN),
     "whole number"),
    ("srun", MPI_SPEC, MPI_POINT, LaunchOptions(python=PY, nccl_tests_binary=NCCL_BIN), "nccl_tests_binary"),
])
def test_invalid_combinations_are_config_errors(kind, spec, point, options, match):
    with pytest.raises(ConfigError, match=match):
        build_launch(kind, spec, point, OUT, options)


@pytest.mark.parametrize("kw, match", [
    ({"nranks": 5, "nnodes": 2}, "multiple"), ({"nranks": 1, "nnodes": 2}, "nnodes <= nranks"),
    ({"dtype": "half"}, "dtype"),
])
def test_specs_no_launch_can_run_are_rejected_when_built(kw, match):
    # A SweepSpec validates itself: these never reach build_launch.
    with pytest.raises(ConfigError, match=match):
        replace(MPI_SPEC, **kw)


@pytest.mark.parametrize("kw, match", [
    ({"flavour": "intel"}, "openmpi, mpich"), ({"srun_mpi": "pmix_v9"}, "pmix, pmi2, none"),
    ({"extra_args": "--mca btl tcp"}, "tuple of strings"), ({"master_port": 70000}, "1..65535"),
    ({"local_cores": 0}, ">= 1"), ({"hostfile": "a\0b"}, "NUL"), ({"rank_timeout_s": 0}, "seconds"),
])
def test_invalid_options_are_config_errors(kw, match):
    with pytest.raises(ConfigError, match=match):
        LaunchOptions(python=PY, **kw)


MPICH_VERSION = """\
HYDRA build details:
    Version:                                 4.1.2
    Release Date:                            Wed Jun  7 15:22:45 CDT 2023
    CC:                              gcc
    Configure options:                       '--disable-option-checking' '--prefix=/usr' '--with-device=ch4:ofi'
    Process Manager:                         pmi
    Launchers available:                     ssh rsh fork slurm ll lsf sge manual persist
    Topology libraries available:            hwloc
    Resource management kernels available:   user slurm ll lsf sge pbs cobalt
    Demux engines available:                 poll select
"""
"""Written for this test in the layout MPICH 4.1's ``mpirun --version`` prints (not a capture)."""


@pytest.mark.parametrize("text, flavour", [
    ("mpirun (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/\n", "openmpi"),
    ("mpirun (Open MPI) 4.1.5\n\nReport bugs to http://www.open-mpi.org/community/help/\n", "openmpi"),
    ("mpirun (Open RTE) 1.10.7\n", "openmpi"),
    (MPICH_VERSION, "mpich"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n", "mpich"),
])
def test_detect_flavour_from_written_samples(text, flavour):
    assert detect_mpi_flavour(text) == flavour


@pytest.mark.parametrize("text", ["", "srun: unrecognized option '--version'\n", "\x00\xff garbage"])
def test_detect_flavour_rejects_other_text(text):
    with pytest.raises(ParseError, match="HYDRA"):
        detect_mpi_flavour(text)


def test_detect_flavour_of_the_installed_mpirun():
    from tests.collectives.launch import tool

    mpirun = tool("mpirun")
    if mpirun is None:
        pytest.skip("mpirun not found: pip install 'collscope[mpi]'")
    result = proc.run([mpirun, "--version"], timeout_s=60)
    assert result.ok, result.stderr
    assert detect_mpi_flavour(result.stdout + result.stderr) == "openmpi"


def test_a_built_local_mpi_launch_really_runs(tmp_path):
    """The one real execution: the builder's argv + env start 2 ranks that write records with the settings."""
    mpirun = need_mpi()
    spec = SweepSpec(name="real", engine="mpi", min_bytes=8, max_bytes=1024, iters=5, warmup=2, nranks=2,
                     fixed_env={"OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}, timeout_s=120)
    point = Point(point_id="all_reduce-ring", op="all_reduce",
                  settings={"OMPI_MCA_coll_tuned_allreduce_algorithm": "4"})
    out = tmp_path / "a dir; $(x)" / "points.jsonl"
    out.parent.mkdir()
    options = LaunchOptions(python=sys.executable, mpirun=mpirun, as_root=os.geteuid() == 0)
    cmd = build_launch("local", spec, point, out, options)
    base = {k: v for k, v in clean_env().items() if k not in ROOT_FLAGS}  # the builder must add them itself
    result = proc.run(cmd.argv, timeout_s=120, env=base, extra_env=cmd.env)
    assert result.ok, f"{cmd.display()}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    got = records(out)
    assert [r.size_bytes for r in got] == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert all(r.ok and r.wrong == 0 and r.nranks == 2 for r in got)
    assert got[0].settings.get("OMPI_MCA_coll_tuned_allreduce_algorithm") == "4"


def test_the_asynchronous_modex_is_plumbing_not_a_configuration():
    from collscope.collectives.spec import captured_settings
    from collscope.vocab.configs import config_of

    env = {"OMPI_MCA_pmix_base_async_modex": "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}
    assert captured_settings(env) == {"OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}
    assert config_of(env) == config_of({"OMPI_MCA_coll_tuned_allreduce_algorithm": "4"})


def test_srun_names_the_steps_nodes_and_spreads_cpu_ranks_evenly_when_asked():
    """What locate's steps need from the one srun launcher: their nodes, a job name, and the ranks per node said on
    CPU nodes too (a GPU step always says it)."""
    spec = replace(MPI_SPEC, nranks=4, nnodes=2)
    options = LaunchOptions(python=PY, nodelist="node[1,3]", job_name="locate-pair", even_placement=True)
    argv = build_launch("srun", spec, MPI_POINT, "/o.jsonl", options).argv
    assert argv[:10] == ("srun", "--ntasks", "4", "--nodes", "2", "--nodelist", "node[1,3]", "--job-name",
                         "locate-pair", "--ntasks-per-node=2")
    plain = build_launch("srun", spec, MPI_POINT, "/o.jsonl", LaunchOptions(python=PY)).argv
    assert not any(a.startswith("--ntasks-per-node") or a in ("--nodelist", "--job-name") for a in plain)
    for kw in ({"nodelist": "n1"}, {"job_name": "x"}, {"even_placement": True}):
        with pytest.raises(ConfigError, match="they are srun options"):
            build_launch("mpirun", spec, MPI_POINT, "/o.jsonl", LaunchOptions(python=PY, **kw))
    with pytest.raises(ConfigError, match="NUL"):
        LaunchOptions(python=PY, nodelist="n\0")
