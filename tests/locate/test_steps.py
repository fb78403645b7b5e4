"""Step command lines (golden), rail variables, and the srun runner against a fake srun at the process boundary."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from collscope.errors import ConfigError
from collscope.locate.model import TestSpec
from collscope.locate.srun import SrunRunner
from collscope.locate.steps import StepOptions, launch_env, rail_env, step_argv

PY = "/venv/bin/python"


def test_pair_step_golden():
    spec = TestSpec(kind="pair", nodes=("node3", "node1"), rail=1)
    argv = step_argv(spec, StepOptions(python=PY, size_bytes=16 << 20, rank_timeout_s=54), "/var/tmp/o/s1.jsonl")
    assert argv == ["srun", "--ntasks", "2", "--nodes", "2", "--nodelist", "node[1,3]", "--job-name", "locate-pair",
                    "--ntasks-per-node=1", "--export=ALL", "--kill-on-bad-exit=1", "--mpi=pmix",
                    PY, "-m", "collscope", "bench", "--engine", "mpi", "--op", "all_reduce", "--sizes", "16777216",
                    "--iters", "10", "--warmup", "3", "--dtype", "float32", "--out", "/var/tmp/o/s1.jsonl",
                    "--timeout", "54"]


def test_node_step_runs_two_ranks_inside_the_node_on_cpu_and_one_per_gpu():
    spec = TestSpec(kind="node", nodes=("gpu07",))
    cpu = step_argv(spec, StepOptions(python=PY), "o.jsonl")
    assert cpu[1:9] == ["--ntasks", "2", "--nodes", "1", "--nodelist", "gpu07", "--job-name", "locate-node"]
    assert cpu[9] == "--ntasks-per-node=2"
    gpu = step_argv(spec, StepOptions(engine="nccl-tests", gpus_per_node=8, nccl_tests_binary="/nt/all_reduce_perf",
                                      srun_mpi=None, size_bytes=1 << 30, rank_timeout_s=100,
                                      slurm_version=(22, 5, 8)), "o.jsonl")
    assert gpu == ["srun", "--ntasks", "8", "--nodes", "1", "--nodelist", "gpu07", "--job-name", "locate-node",
                   "--ntasks-per-node=8", "--cpu-bind=cores", "--gpu-bind=none", "--export=ALL",
                   "--kill-on-bad-exit=1", "/nt/all_reduce_perf", "-b", "1073741824", "-e", "1073741824", "-f", "2",
                   "-n", "10", "-w", "3", "-c", "0", "-g", "1", "-a", "3", "-T", "100", "-d", "float"]


def test_rail_variables():
    assert rail_env(None, StepOptions()) == {}
    assert rail_env(1, StepOptions(engine="mpi")) == {"OMPI_MCA_btl_tcp_if_include": "cl1",
                                                      "OMPI_MCA_oob_tcp_if_include": "cl1"}
    assert rail_env(0, StepOptions(engine="torch")) == {"GLOO_SOCKET_IFNAME": "cl0"}
    gpu = StepOptions(engine="nccl-tests", gpus_per_node=8, rail_nics=("mlx5_0", "mlx5_3"))
    assert rail_env(1, gpu) == {"NCCL_IB_HCA": "=mlx5_3"}
    with pytest.raises(ConfigError, match="--rail-nics"):
        rail_env(2, gpu)


def test_launch_env_keeps_a_modex_setting_the_user_made():
    spec = TestSpec(kind="pair", nodes=("n3", "n2"))
    assert launch_env(spec, StepOptions(), {}) == {"SLURM_JOB_NODELIST": "n[2-3]", "SLURM_NODELIST": "n[2-3]",
                                                   "OMPI_MCA_pmix_base_async_modex": "1"}
    assert "OMPI_MCA_pmix_base_async_modex" not in launch_env(spec, StepOptions(),
                                                              {"OMPI_MCA_pmix_base_async_modex": "0"})
    assert "OMPI_MCA_pmix_base_async_modex" not in launch_env(spec, StepOptions(engine="torch"), {})


def test_bad_step_options():
    with pytest.raises(ConfigError, match="needs GPUs"):
        StepOptions(engine="nccl-tests")
    with pytest.raises(ConfigError, match="8 bytes or more"):
        StepOptions(size_bytes=4)


# ---- the runner against a fake srun ----------------------------------------------------------------------

FAKE_SRUN = r'''#!PYTHON
"""Fake srun: behaves by the node names. 'dead' hangs (with a child), 'broken' fails, 'slow' is slow, 'flaky'
fails its first step only."""
import json, os, subprocess, sys, time
argv = sys.argv[1:]
nodes = argv[argv.index("--nodelist") + 1]
log = os.environ["FAKE_SRUN_LOG"]
with open(log, "a") as fh:
    fh.write(json.dumps({"argv": argv, "rail": os.environ.get("OMPI_MCA_btl_tcp_if_include"),
                         "job_nodes": os.environ.get("SLURM_JOB_NODELIST"),
                         "nodes": os.environ.get("SLURM_NODELIST"),
                         "modex": os.environ.get("OMPI_MCA_pmix_base_async_modex")}) + "\n")
if "dead" in nodes:
    child = subprocess.Popen(["sleep", "300"])
    with open(log + ".child", "w") as fh:
        fh.write(str(child.pid))
    time.sleep(300)
if "flaky" in nodes and not os.path.exists(log + ".flaky"):
    open(log + ".flaky", "w").close()
    print("srun: error: flaky1: task 1: Segmentation fault", file=sys.stderr)
    sys.exit(139)
if "broken" in nodes:
    print("srun: error: broken1: task 0: Exited with exit code 1", file=sys.stderr)
    sys.exit(1)
out = argv[argv.index("--out") + 1]
size = int(argv[argv.index("--sizes") + 1])
busbw = 0.05 if "slow" in nodes else 4.0
rec = {"engine": "mpi", "backend": "mpi", "op": "all_reduce", "size_bytes": size, "count": size // 4,
       "dtype": "float32", "redop": "sum", "root": None, "in_place": False, "nranks": 2, "nnodes": 2,
       "time_us": size / (busbw * 1e3), "algbw_gbps": busbw, "busbw_gbps": busbw}
with open(out, "a") as fh:
    fh.write(json.dumps(rec) + "\n")
print("# fake all_reduce done")
'''


@pytest.fixture
def fake_srun(tmp_path, monkeypatch):
    path = tmp_path / "bin" / "srun"
    path.parent.mkdir()
    path.write_text(FAKE_SRUN.replace("PYTHON", sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "srun.log"
    monkeypatch.setenv("FAKE_SRUN_LOG", str(log))
    return path, log


def _runner(tmp_path, srun, timeout_s=20.0):
    return SrunRunner(options=StepOptions(srun=str(srun), python=PY), work_dir=tmp_path / "steps",
                      timeout_s=timeout_s)


def test_runner_collects_one_sample_per_repeat_on_the_rail(tmp_path, fake_srun):
    srun, log = fake_srun
    got = _runner(tmp_path, srun)(TestSpec(kind="pair", nodes=("a1", "a2"), rail=1), 3)
    assert got.failure is None and got.busbw_gbps == (4.0, 4.0, 4.0)
    assert [r.repeat for r in got.records] == [0, 1, 2]
    assert got.records[0].settings == {"OMPI_MCA_btl_tcp_if_include": "cl1", "OMPI_MCA_oob_tcp_if_include": "cl1"}
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 3 and {c["rail"] for c in calls} == {"cl1"}
    # srun sees the step's nodes as the allocation's (Slurm 22.05's PMIx plugin routes by that list)
    assert {(c["job_nodes"], c["nodes"]) for c in calls} == {("a[1-2]", "a[1-2]")}
    assert {c["modex"] for c in calls} == {"1"}  # no modex fence in MPI_Init: Open MPI 5.0's race
    assert len(got.logs) == 3 and all(Path(p).exists() for p in got.logs)


def test_runner_reports_a_step_failing_twice_with_its_message(tmp_path, fake_srun):
    srun, log = fake_srun
    got = _runner(tmp_path, srun)(TestSpec(kind="pair", nodes=("broken1", "a2")), 3)
    assert got.failure == "failed" and got.detail.startswith("repeat 1 failed once and was run again")
    assert got.detail.count("Exited with exit code 1") == 2
    assert len(log.read_text().splitlines()) == 2  # run once more, then given up: not 3 repeats
    assert len(got.logs) == 2


def test_runner_reruns_a_step_that_fails_once_and_says_so(tmp_path, fake_srun):
    srun, log = fake_srun
    got = _runner(tmp_path, srun)(TestSpec(kind="pair", nodes=("flaky1", "a2")), 3)
    assert got.failure is None and got.busbw_gbps == (4.0, 4.0, 4.0)
    assert "repeat 1 failed once and was run again: exit code 139" in got.detail and "Segmentation" in got.detail
    assert len(log.read_text().splitlines()) == 4 and len(got.logs) == 4
    assert [r.repeat for r in got.records] == [0, 1, 2]


def test_runner_kills_a_hung_step_and_its_children(tmp_path, fake_srun):
    srun, log = fake_srun
    start = time.monotonic()
    got = _runner(tmp_path, srun, timeout_s=2.0)(TestSpec(kind="pair", nodes=("dead1", "a2")), 3)
    assert got.failure == "timeout" and time.monotonic() - start < 15
    child = int(Path(str(log) + ".child").read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the hung step's child {child} survived")
