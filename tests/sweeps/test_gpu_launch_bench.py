"""``collscope bench --engine nccl-tests`` beyond one GPU (issue 21, item 5): ``--ngpus`` (nccl-tests ``-g``), the
launcher pass-through (``--launcher srun|mpirun --nranks N``: the MPI build, one process per GPU, started with the
sweep's launcher lines) and the refusal to run as one of N tasks of a launch. nccl-tests, srun and mpirun cannot
run here: fakes print nccl-tests v2.19.6 outputs of the matching shape (tests/fixtures/nccl-tests) and record how
they were called."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from tests.fakes import NCCL_TESTS_FIXTURES, Answer, FakeTools

ONE_PROCESS_TWO_GPUS = NCCL_TESTS_FIXTURES / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"
EIGHT_PROCESSES = NCCL_TESTS_FIXTURES / "all_reduce_perf-v2.19.6-2x4-wrong-redop-root.txt"
"""8 processes of -g 1 on 2 nodes of 4 GPUs, as rank 0 of an MPI-built all_reduce_perf prints it."""
LADDER = ["--op", "all_reduce", "-b", "8", "-e", "32M", "-f", "4"]


def _no_outer_launch() -> dict[str, str | None]:
    """Unset whatever this test process inherited from a Slurm job or an MPI launch."""
    return {k: None for k in os.environ if k.startswith(("SLURM_", "OMPI_COMM_WORLD_", "PMI_"))}


def _bench(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["bench", "--engine", "nccl-tests", *LADDER, *args],
                              env={**_no_outer_launch(), "NCCL_TESTS_HOME": None, **(env or {})})


def _records(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def _calls(log: Path) -> list[str]:
    return json.loads(log.read_text())["argv"]


def test_ngpus_drives_that_many_gpus_from_one_process(tmp_path: Path, fake_tools: FakeTools) -> None:
    log = tmp_path / "binary.json"
    fake_tools.nccl_tests(output=ONE_PROCESS_TWO_GPUS, record_to=log, directory=tmp_path / "nt")
    res = _bench("--ngpus", "2", "--nccl-tests-dir", str(tmp_path / "nt"))
    assert res.exit_code == 0, res.output
    argv = _calls(log)
    assert argv[argv.index("-g") + 1] == "2"
    records = _records(res.output)
    assert records and all(r["nranks"] == 2 for r in records)


def test_a_split_op_starts_where_every_one_of_the_gpus_holds_data(tmp_path: Path, fake_tools: FakeTools) -> None:
    """-b 8 for all_gather on 8 GPUs would be rows of 0 bytes per rank (nccl-tests rounds each rank's share down to
    16 B): bench raises -b to the first ladder size that gives each rank data, as a sweep does (-g 8: 128 B)."""
    log = tmp_path / "binary.json"
    fake_tools.nccl_tests("all_gather", output=ONE_PROCESS_TWO_GPUS, record_to=log, directory=tmp_path / "nt")
    CliRunner().invoke(main, ["bench", "--engine", "nccl-tests", "--op", "all_gather", "-b", "8", "-e", "1M", "-f",
                              "2", "--ngpus", "8", "--nccl-tests-dir", str(tmp_path / "nt")],
                       env={**_no_outer_launch(), "NCCL_TESTS_HOME": None})
    argv = _calls(log)
    assert argv[argv.index("-b") + 1] == "128" and argv[argv.index("-g") + 1] == "8"


def test_srun_pass_through_starts_one_process_per_gpu(tmp_path: Path, fake_tools: FakeTools) -> None:
    log = tmp_path / "srun.json"
    fake_tools.add("srun", {"--version": Answer(stdout="slurm 24.05.4\n"), "*": Answer(stdout=EIGHT_PROCESSES)},
                   record_to=log)
    nt = tmp_path / "nt"
    fake_tools.add("all_reduce_perf", directory=nt)
    mpi_build = fake_tools.add("all_reduce_perf_mpi", directory=nt)
    res = _bench("--launcher", "srun", "--nranks", "8", "--nnodes", "2", "--nccl-tests-dir", str(nt),
                 env={"SLURM_JOB_ID": "77", "SLURM_GPUS_ON_NODE": "4", "SLURM_CPUS_ON_NODE": "64"})
    assert res.exit_code == 0, res.output
    argv = _calls(log)
    program = argv.index(str(mpi_build))  # the MPI build is preferred under a launcher
    assert argv[:program] == ["--ntasks", "8", "--nodes", "2", "--ntasks-per-node=4", "--cpus-per-task=16",
                              "--cpu-bind=cores", "--tres-bind=gres/gpu:none", "--export=ALL",
                              "--kill-on-bad-exit=1", "--mpi=pmix"]
    assert argv[argv.index("-g") + 1] == "1"
    records = _records(res.output)
    assert records and {(r["nranks"], r["nnodes"]) for r in records} == {(8, 2)}


def test_srun_pass_through_with_several_gpus_per_process(tmp_path: Path, fake_tools: FakeTools) -> None:
    log = tmp_path / "srun.json"
    fake_tools.add("srun", {"--version": Answer(stdout="slurm 22.05.8\n"), "*": Answer(stdout=EIGHT_PROCESSES)},
                   record_to=log)
    fake_tools.add("all_reduce_perf", directory=tmp_path / "nt")
    res = _bench("--launcher", "srun", "--nranks", "2", "--nnodes", "2", "--ngpus", "4", "--gpus-per-node", "4",
                 "--nccl-tests-dir", str(tmp_path / "nt"), env={"SLURM_JOB_ID": "77"})
    assert res.exit_code == 0, res.output
    argv = _calls(log)
    assert "--ntasks-per-node=1" in argv and "--gpu-bind=none" in argv and argv[argv.index("-g") + 1] == "4"
    too_many = _bench("--launcher", "srun", "--nranks", "4", "--nnodes", "2", "--ngpus", "4", "--gpus-per-node",
                      "4", "--nccl-tests-dir", str(tmp_path / "nt"), env={"SLURM_JOB_ID": "77"})
    assert too_many.exit_code == 2 and "Duplicate GPU" in too_many.output


def test_mpirun_pass_through_forwards_the_users_variables_but_not_its_gpus(tmp_path: Path,
                                                                           fake_tools: FakeTools) -> None:
    log = tmp_path / "mpirun.json"
    fake_tools.add("mpirun", Answer(stdout=EIGHT_PROCESSES), record_to=log)
    fake_tools.add("all_reduce_perf_mpi", directory=tmp_path / "nt")
    res = _bench("--launcher", "mpirun", "--nranks", "8", "--nnodes", "2", "--nccl-tests-dir", str(tmp_path / "nt"),
                 env={"CUDA_VISIBLE_DEVICES": "5", "LD_LIBRARY_PATH": "/opt/nccl/lib", "FI_PROVIDER": "efa"})
    assert res.exit_code == 0, res.output
    argv = _calls(log)
    assert argv[:4] == ["-np", "8", "--map-by", "ppr:4:node"]
    forwarded = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert {"LD_LIBRARY_PATH", "FI_PROVIDER"} <= set(forwarded) and "CUDA_VISIBLE_DEVICES" not in forwarded
    assert _records(res.output)[0]["nranks"] == 8


@pytest.mark.parametrize(("env", "launcher"), [
    ({"SLURM_JOB_ID": "77", "SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "8"}, "srun"),
    ({"OMPI_COMM_WORLD_SIZE": "8"}, "mpirun"),
])
def test_run_as_one_of_n_tasks_it_refuses_and_gives_the_command(tmp_path: Path, fake_tools: FakeTools,
                                                                env: dict[str, str], launcher: str) -> None:
    log = tmp_path / "binary.json"
    fake_tools.nccl_tests(output=EIGHT_PROCESSES, record_to=log, directory=tmp_path / "nt")
    res = _bench("--nccl-tests-dir", str(tmp_path / "nt"), env=env)
    assert res.exit_code == 2, res.output
    assert f"one of 8 tasks started by {launcher}" in res.output
    assert f"--launcher {launcher} --nranks 8" in res.output
    assert not log.exists()  # no singleton run started
    assert "Traceback" not in res.output


def test_a_batch_script_with_several_tasks_may_run_it(tmp_path: Path, fake_tools: FakeTools) -> None:
    """SLURM_NTASKS alone (the batch script of an sbatch -n 16) is not a launch of several tasks."""
    fake_tools.nccl_tests(output=ONE_PROCESS_TWO_GPUS, directory=tmp_path / "nt")
    res = _bench("--ngpus", "2", "--nccl-tests-dir", str(tmp_path / "nt"),
                 env={"SLURM_JOB_ID": "77", "SLURM_NTASKS": "16"})
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(("engine", "args", "message"), [
    ("mpi", ["--ngpus", "2"], "--ngpus apply to --engine nccl-tests"),
    ("torch", ["--launcher", "srun", "--nranks", "2"], "--launcher, --nranks apply to --engine nccl-tests"),
    ("nccl-tests", ["--launcher", "srun"], "--launcher and --nranks go together"),
    ("nccl-tests", ["--nranks", "8"], "--launcher and --nranks go together"),
    ("nccl-tests", ["--nnodes", "2"], "--launcher and --nranks go together"),
    ("nccl-tests", ["--ngpus", "0"], "x>=1"),
])
def test_usage_errors(engine: str, args: list[str], message: str) -> None:
    res = CliRunner().invoke(main, ["bench", "--engine", engine, *LADDER, *args], env=_no_outer_launch())
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_srun_outside_an_allocation_is_a_usage_error(tmp_path: Path, fake_tools: FakeTools) -> None:
    fake_tools.add("all_reduce_perf", directory=tmp_path / "nt")
    res = _bench("--launcher", "srun", "--nranks", "8", "--nccl-tests-dir", str(tmp_path / "nt"))
    assert res.exit_code == 2 and "inside a Slurm allocation" in res.output
