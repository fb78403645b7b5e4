"""The Slurm scripts: syntax, slurm/sweep.sh's #SBATCH header (golden) and the command it builds (with a fake
collscope that records its argv), and, when a Slurm answers `scontrol ping`, real jobs on the single-node
cluster that `scripts/local-slurm.sh install && scripts/local-slurm.sh start` runs (CI does).

:func:`submit_and_wait` submits with ``sbatch --parsable`` and polls ``scontrol show job -o`` (no accounting
database needed); the end-to-end ``sbatch slurm/sweep.sh --preset ...`` test builds on it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from collscope import proc
from tests.fakes import FakeTools

REPO = Path(__file__).resolve().parents[2]
SWEEP = REPO / "slurm" / "sweep.sh"
LOCAL_SLURM = REPO / "scripts" / "local-slurm.sh"
SLURM_DIR = Path(os.environ.get("COLLSCOPE_SLURM_DIR", "/tmp/collscope-slurm"))

SWEEP_HEADER = [
    "#SBATCH --job-name=collscope-sweep",
    "#SBATCH --nodes=1",
    "#SBATCH --ntasks-per-node=2",
    "#SBATCH --time=01:00:00",
    "#SBATCH --output=collscope-sweep-%j.out",
    "#SBATCH --requeue",
    "#SBATCH --open-mode=append",
]

# States after which a job never runs again (a requeued job passes through REQUEUED/PENDING instead).
TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                             "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"})
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


# --- helpers -------------------------------------------------------------------------------------------------

def slurm_env(**extra: str) -> dict[str, str]:
    """This process's environment without an outer job's SLURM_* variables, pointed at the local Slurm's
    slurm.conf when SLURM_CONF is unset and /etc/slurm/slurm.conf does not exist."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
    local_conf = SLURM_DIR / "slurm.conf"
    if "SLURM_CONF" not in env and not Path("/etc/slurm/slurm.conf").exists() and local_conf.exists():
        env["SLURM_CONF"] = str(local_conf)
    env.update(extra)
    return env


def slurm_unavailable() -> str | None:
    """Why no Slurm can run jobs here, or None when `scontrol ping` reports the controller UP."""
    for tool in ("sbatch", "scontrol", "srun"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH: scripts/local-slurm.sh install && scripts/local-slurm.sh start"
    res = proc.run(["scontrol", "ping"], timeout_s=15, env=slurm_env())
    if res.timed_out or res.returncode != 0 or "UP" not in res.stdout:
        return (f"Slurm is not running (scontrol ping: {(res.stdout + res.stderr).strip()[-200:]!r}): "
                "scripts/local-slurm.sh start")
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    reason = slurm_unavailable()
    if reason is not None:
        if os.environ.get("CI"):  # .ci/run starts Slurm: a missing one there is a failure, not a skip
            pytest.fail(f"CI started Slurm but it is unusable: {reason}")
        pytest.skip(reason)


@dataclass(frozen=True)
class JobResult:
    job_id: str
    state: str
    """Final JobState (COMPLETED, FAILED, ...), or PURGED when the controller forgot the job (MinJobAge)."""
    exit_code: str
    """scontrol's ExitCode, ``status:signal``."""
    output: str
    """The job's stdout/stderr file, as text ("" when it does not exist)."""


def job_fields(job_id: str, env: dict[str, str]) -> dict[str, str] | None:
    """`scontrol show job -o ID` as key -> value (values that contain spaces are cut at the space; the fields
    read here never do), or None when the controller does not know the job (any more)."""
    res = proc.run(["scontrol", "show", "job", "-o", job_id], timeout_s=15, env=env)
    if res.returncode != 0:
        if "Invalid job id" in res.stderr:
            return None
        raise RuntimeError(f"scontrol show job {job_id} failed: {res.stderr.strip()}")
    return dict(re.findall(r"(\w+)=(\S*)", res.stdout))


def submit_and_wait(argv: list[str], timeout_s: float, *, cwd: Path, output: Path,
                    env: dict[str, str] | None = None, poll_s: float = 0.5) -> JobResult:
    """Submit ``sbatch --parsable --output=OUTPUT ARGV...`` from ``cwd`` and wait until the job ends.

    ``argv`` is what follows ``sbatch`` (options, then a script and its arguments, or ``--wrap CMD``). On
    timeout the job is cancelled and TimeoutError raised with its last state and output tail.
    """
    env = slurm_env() if env is None else env
    res = proc.run(["sbatch", "--parsable", f"--output={output}", *argv], timeout_s=30, env=env, cwd=cwd)
    if res.returncode != 0:
        raise RuntimeError(f"sbatch {argv} failed ({res.returncode}): {res.stderr.strip()}")
    job_id = res.stdout.strip().split(";")[0]
    deadline = time.monotonic() + timeout_s
    fields: dict[str, str] | None = {}
    while time.monotonic() < deadline:
        fields = job_fields(job_id, env)
        if fields is None or fields.get("JobState") in TERMINAL_STATES:
            break
        time.sleep(poll_s)
    else:
        proc.run(["scancel", job_id], timeout_s=15, env=env)
        text = output.read_text(errors="replace") if output.exists() else ""
        raise TimeoutError(f"job {job_id} ({argv}) still {fields.get('JobState') if fields else '?'} after "
                           f"{timeout_s}s; cancelled. Output tail:\n{text[-2000:]}")
    text = output.read_text(errors="replace") if output.exists() else ""
    if fields is None:
        return JobResult(job_id, "PURGED", "", text)
    return JobResult(job_id, fields["JobState"], fields.get("ExitCode", ""), text)


@pytest.fixture()
def fake_collscope(tmp_path: Path, fake_tools: FakeTools) -> tuple[Path, Path]:
    """A fake ``collscope`` (not on PATH) that records how slurm/sweep.sh called it: argv, cwd, environment."""
    log = tmp_path / "fake-collscope.json"
    return fake_tools.add("collscope", record_to=log, directory=tmp_path / "bin"), log


def run_sweep_sh(args: list[str], env: dict[str, str], cwd: Path) -> proc.ProcResult:
    return proc.run(["bash", str(SWEEP), *args], timeout_s=30, env=env, cwd=cwd)


def sweep_env(fake: tuple[Path, Path], **slurm: str) -> dict[str, str]:
    exe, _ = fake
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k != "COLLSCOPE_OUT"}
    env.update({"COLLSCOPE": str(exe), **slurm})
    return env


# --- static checks ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("script", [SWEEP, LOCAL_SLURM], ids=lambda p: p.name)
def test_bash_syntax(script: Path) -> None:
    res = proc.run(["bash", "-n", str(script)], timeout_s=15)
    assert res.returncode == 0, res.stderr
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if re.search(r"\beval\b", line)], "no eval: arguments pass as \"$@\""
    assert os.access(script, os.X_OK), f"{script} is not executable"


def test_sweep_sbatch_header() -> None:
    lines = SWEEP.read_text().splitlines()
    assert [line for line in lines if line.startswith("#SBATCH")] == SWEEP_HEADER
    # sbatch stops reading #SBATCH lines at the first command: all of them must come before it.
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < first_command


def test_local_slurm_usage() -> None:
    res = proc.run(["bash", str(LOCAL_SLURM), "no-such-command"], timeout_s=15)
    assert res.returncode == 2
    assert "start" in res.stderr and "stop" in res.stderr and "install" in res.stderr


# --- slurm/sweep.sh's command, with a fake collscope (no Slurm needed) ------------------------------------------

HOSTILE = "a b;c 'd' \"e\"\nf $HOME"


@pytest.mark.parametrize(("args", "slurm", "expected"), [
    (["--preset", "mpi-algos"], {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "2"},
     ["sweep", "run", "--launcher", "srun", "--nranks", "2", "--out", "results/sweep-42", "--preset", "mpi-algos"]),
    # What the user passes wins, in both spellings; the values are passed through untouched.
    (["spec.yaml", "--out=mine", "--launcher", "mpirun", "--nranks", "4", "--max-bytes", HOSTILE],
     {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "2"},
     ["sweep", "run", "spec.yaml", "--out=mine", "--launcher", "mpirun", "--nranks", "4", "--max-bytes", HOSTILE]),
    (["--preset", "x", "--out", "my dir"], {"SLURM_JOB_ID": "42", "COLLSCOPE_OUT": "ignored"},
     ["sweep", "run", "--launcher", "srun", "--preset", "x", "--out", "my dir"]),
    (["--preset", "x"], {"SLURM_JOB_ID": "42", "COLLSCOPE_OUT": "/scratch/run 1"},
     ["sweep", "run", "--launcher", "srun", "--out", "/scratch/run 1", "--preset", "x"]),
    # Array jobs: one directory per array (SLURM_ARRAY_JOB_ID), shard index relative to the first task id.
    (["--preset", "x"], {"SLURM_JOB_ID": "43", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "3",
                         "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_NTASKS": "8"},
     ["sweep", "run", "--launcher", "srun", "--nranks", "8", "--out", "results/sweep-40", "--shard", "2/3",
      "--preset", "x"]),
    (["--preset", "x", "--shard", "0/9"], {"SLURM_JOB_ID": "43", "SLURM_ARRAY_JOB_ID": "40",
                                           "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"},
     ["sweep", "run", "--launcher", "srun", "--out", "results/sweep-40", "--preset", "x", "--shard", "0/9"]),
], ids=["defaults", "user-options-win", "user-out", "env-out", "array", "user-shard"])
def test_sweep_sh_command(tmp_path: Path, fake_collscope: tuple[Path, Path], args: list[str],
                          slurm: dict[str, str], expected: list[str]) -> None:
    res = run_sweep_sh(args, sweep_env(fake_collscope, **slurm), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(fake_collscope[1].read_text())["argv"] == expected


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--preset", "x"], {}, "not inside a Slurm allocation"),
    ([], {"SLURM_JOB_ID": "1"}, "no sweep given"),
    (["--preset", "x"], {"SLURM_JOB_ID": "1", "COLLSCOPE": "/nonexistent/collscope"}, "is not an executable"),
    (["--preset", "x"], {"SLURM_JOB_ID": "1", "COLLSCOPE": "", "PATH": "/usr/bin:/bin"}, "collscope not found"),
    (["--preset", "x"], {"SLURM_JOB_ID": "1", "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "0",
                         "SLURM_ARRAY_TASK_COUNT": "3"}, "contiguous --array=0-2"),
], ids=["outside-slurm", "no-args", "bad-COLLSCOPE", "not-on-path", "array-gap"])
def test_sweep_sh_errors(tmp_path: Path, fake_collscope: tuple[Path, Path], args: list[str],
                         env: dict[str, str], message: str) -> None:
    res = run_sweep_sh(args, sweep_env(fake_collscope, **env), cwd=tmp_path)
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr
    assert not fake_collscope[1].exists()


# --- the real single-node Slurm ------------------------------------------------------------------------------

def test_sbatch_wait_srun_two_tasks(slurm: None, tmp_path: Path) -> None:
    out = tmp_path / "hostname.out"
    res = proc.run(["sbatch", "--wait", "-n", "2", f"--output={out}", "--wrap", "srun -n 2 hostname"],
                   timeout_s=120, env=slurm_env(), cwd=tmp_path)
    assert res.returncode == 0, (res.stdout, res.stderr, out.read_text() if out.exists() else "")
    lines = out.read_text().split()
    assert len(lines) == 2
    assert lines == [socket.gethostname()] * 2


def test_submit_and_wait_two_ranks(slurm: None, tmp_path: Path) -> None:
    job = submit_and_wait(["-n", "2", "--wrap", "srun bash -c 'echo rank=$SLURM_PROCID of $SLURM_NTASKS'"],
                          120, cwd=tmp_path, output=tmp_path / "ranks.out")
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.output
    assert sorted(line for line in job.output.splitlines()) == ["rank=0 of 2", "rank=1 of 2"]


def test_submit_and_wait_reports_failure(slurm: None, tmp_path: Path) -> None:
    job = submit_and_wait(["--wrap", "echo before; exit 3"], 120, cwd=tmp_path, output=tmp_path / "fail.out")
    assert (job.state, job.exit_code) == ("FAILED", "3:0")
    assert job.output == "before\n"


def test_sweep_sh_under_sbatch(slurm: None, tmp_path: Path, fake_collscope: tuple[Path, Path]) -> None:
    """The real sbatch accepts the header; the script runs in the submit directory with the allocation's
    task count and a job-id results directory."""
    env = slurm_env(COLLSCOPE=str(fake_collscope[0]))
    env.pop("COLLSCOPE_OUT", None)
    job = submit_and_wait([str(SWEEP), "--preset", "mpi-algos", "--max-bytes", "1M"], 120, cwd=tmp_path,
                          output=tmp_path / "sweep.out", env=env)
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.output
    seen = json.loads(fake_collscope[1].read_text())
    assert seen["argv"] == ["sweep", "run", "--launcher", "srun", "--nranks", "2", "--nnodes", "1", "--out",
                            f"results/sweep-{job.job_id}", "--preset", "mpi-algos", "--max-bytes", "1M"]
    assert Path(seen["cwd"]).resolve() == tmp_path.resolve()
    assert seen["env"]["SLURM_JOB_NAME"] == "collscope-sweep"
    assert seen["env"]["SLURM_NTASKS"] == "2"
    assert f"collscope-sweep: job {job.job_id} (restart 0)" in job.output


MPI_PROGRAM = ("from mpi4py import MPI; c = MPI.COMM_WORLD; "
               "print(c.Get_rank(), c.Get_size(), c.allreduce(c.Get_rank() + 1), flush=True)")


def test_srun_pmix_mpi4py(slurm: None, tmp_path: Path) -> None:
    """Open MPI 5 (pip) ranks started by `srun --mpi=pmix` form one world. (Under --mpi=none or pmi2 each rank
    would silently be a size-1 singleton.) PMIX_MCA_psec=native: pip's PMIx has no munge security component,
    which Slurm's PMIx server offers first; without it the job still works but prints a warning per rank."""
    pytest.importorskip("mpi4py", reason="mpi4py not installed: pip install 'collscope[mpi]'")
    listed = proc.run(["srun", "--mpi=list"], timeout_s=30, env=slurm_env())
    if "pmix" not in listed.stdout + listed.stderr:
        pytest.skip("this Slurm has no pmix MPI plugin (srun --mpi=list)")
    program = f"srun --mpi=pmix {sys.executable} -c '{MPI_PROGRAM}'"
    job = submit_and_wait(["-n", "2", "--wrap", program], 120, cwd=tmp_path, output=tmp_path / "mpi.out",
                          env=slurm_env(PMIX_MCA_psec="native", **ROOT_ENV))
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.output
    assert sorted(job.output.splitlines()) == ["0 2 3", "1 2 3"], job.output
