"""`sbatch slurm/sweep.sh --preset mpi-algos` under the real local Slurm, as users run it, to complete results."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from collscope.results.decode import read_jsonl
from collscope.results.store import ResultsDir
from tests.sweeps.test_slurm_scripts import slurm, slurm_env, submit_and_wait  # noqa: F401  (slurm: fixture)

REPO = Path(__file__).resolve().parents[2]


def test_sbatch_sweep_sh_mpi_algos_runs_to_completion(slurm: None, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "results"
    env = slurm_env(COLLSCOPE=str(Path(sys.executable).parent / "collscope"),
                    PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    job = submit_and_wait(
        ["-n", "2", str(REPO / "slurm" / "sweep.sh"), "--preset", "mpi-algos", "--max-bytes", "4K", "--iters", "5",
         "--out", str(out), "--no-progress"],
        timeout_s=400, cwd=tmp_path, output=tmp_path / "job.out", env=env)
    assert job.state == "COMPLETED", job.output[-3000:]
    status = ResultsDir(out).status()
    assert status.points == status.done >= 4 and status.failed == 0, status
    records = [r for p in (out / "points").glob("*.jsonl") for r in read_jsonl(p)]
    assert records and all(r.ok and r.nranks == 2 for r in records)
    algos = {r.settings.get("OMPI_MCA_coll_tuned_allreduce_algorithm") for r in records if r.op == "all_reduce"}
    assert len(algos - {None}) >= 3 and None in algos
    log = next((out / "points").glob("*.log")).read_text()
    assert "srun" in log and "--mpi=pmix" in log


def test_srun_with_a_pmi_open_mpi_does_not_speak_fails_instead_of_measuring_nothing(slurm: None,  # noqa: F811
                                                                                     tmp_path: Path) -> None:
    """Open MPI 5 under `srun --mpi=pmi2` starts one-rank worlds; bench must refuse, not report busbw 0."""
    from collscope import proc

    env = slurm_env(PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    argv = ["srun", "-n", "2", "--mpi=pmi2", sys.executable, "-m", "collscope", "bench", "--engine", "mpi", "--op",
            "all_reduce", "-b", "8", "-e", "64", "--out", str(tmp_path / "r.jsonl")]
    res = proc.run(argv, timeout_s=120, env=env, cwd=tmp_path)
    assert res.returncode != 0
    assert "srun started 2 tasks but MPI sees a world of 1" in res.stdout + res.stderr
    assert not (tmp_path / "r.jsonl").exists()
