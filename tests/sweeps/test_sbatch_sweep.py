"""`sbatch slurm/sweep.sh --preset mpi-algos` under the real local Slurm, as users run it, to complete results."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from collscope.collectives.record import read_jsonl
from collscope.sweeps.store import ResultsDir
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
    assert status["points"] == status["done"] >= 4 and status["failed"] == 0, status
    records = [r for p in (out / "points").glob("*.jsonl") for r in read_jsonl(p)]
    assert records and all(r.ok and r.nranks == 2 for r in records)
    algos = {r.settings.get("OMPI_MCA_coll_tuned_allreduce_algorithm") for r in records if r.op == "all_reduce"}
    assert len(algos - {None}) >= 3 and None in algos
    log = next((out / "points").glob("*.log")).read_text()
    assert "srun" in log and "--mpi=pmix" in log
