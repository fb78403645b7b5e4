"""A sweep under srun inside an allocation whose shape cannot hold its steps stops before the first point, exit 2,
naming the shape and the fix (issue 22 item 5: srun would refuse every point alike with "More processors
requested than permitted"); nothing is run or written down. The allocations are the variables salloc/sbatch set
(Slurm's salloc(1) OUTPUT ENVIRONMENT VARIABLES); no Slurm runs here."""

from __future__ import annotations

import json

from click.testing import CliRunner

from collscope.cli import main
from collscope.sweeps.slurm_shape import allocated_nodes, cpus_per_node, step_misfit
from tests.fakes import Answer

# salloc -N 4 --ntasks-per-node 1 (no --exclusive: one CPU per node on a cons_tres cluster)
ONE_TASK_PER_NODE = {"SLURM_JOB_ID": "77", "SLURM_JOB_NUM_NODES": "4", "SLURM_NNODES": "4", "SLURM_NTASKS": "4",
                     "SLURM_NTASKS_PER_NODE": "1", "SLURM_TASKS_PER_NODE": "1(x4)", "SLURM_JOB_CPUS_PER_NODE": "1(x4)",
                     "SLURM_JOB_NODELIST": "cn[01-04]"}
# sbatch -N 2 --ntasks-per-node=8 --cpus-per-task=16 on 128-CPU nodes
EIGHT_PER_NODE = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "16",
                  "SLURM_NTASKS_PER_NODE": "8", "SLURM_TASKS_PER_NODE": "8(x2)", "SLURM_CPUS_PER_TASK": "16",
                  "SLURM_JOB_CPUS_PER_NODE": "128(x2)"}


def test_one_task_per_node_cannot_hold_four_ranks_per_node():
    misfit = step_misfit(8, 2, ONE_TASK_PER_NODE)
    assert misfit is not None
    assert misfit.startswith("this allocation has 1 task(s) per node on 4 node(s), 1 CPU(s) on its smallest node "
                             "(SLURM_JOB_NUM_NODES=4, SLURM_NTASKS=4, SLURM_NTASKS_PER_NODE=1, "
                             "SLURM_TASKS_PER_NODE=1(x4), SLURM_JOB_CPUS_PER_NODE=1(x4)); the sweep needs 8 ranks on 2 "
                             "node(s) (4 per node)")
    assert "More processors requested than permitted" in misfit
    assert "salloc -N 2 --ntasks-per-node 4 (or --exclusive)" in misfit


def test_what_fits_and_what_says_nothing():
    assert step_misfit(16, 2, EIGHT_PER_NODE) is None
    assert step_misfit(16, 2, EIGHT_PER_NODE, cpus_per_task=16) is None  # 8 x 16 = 128 CPUs per node
    assert "17 CPUs each" in (step_misfit(16, 2, EIGHT_PER_NODE, cpus_per_task=17) or "")
    assert step_misfit(8, 2, ONE_TASK_PER_NODE, overcommit=True) is None
    assert step_misfit(8, 2, {k: v for k, v in ONE_TASK_PER_NODE.items() if k != "SLURM_JOB_ID"}) is None
    assert step_misfit(8, 2, {"SLURM_JOB_ID": "5"}) is None  # no shape variables: nothing to say, nothing guessed
    more_nodes = step_misfit(8, 4, EIGHT_PER_NODE)
    assert more_nodes is not None and "on 4 node(s)" in more_nodes and "more nodes than the job has" in more_nodes
    # heterogeneous nodes: the smallest decides; not Slurm's form: unknown
    assert cpus_per_node({"SLURM_JOB_CPUS_PER_NODE": "4(x2),2"}) == 2
    assert cpus_per_node({"SLURM_JOB_CPUS_PER_NODE": "lots"}) is None
    assert allocated_nodes({"SLURM_NNODES": "3"}) == 3 and allocated_nodes({}) is None


def test_sweep_run_in_a_one_task_per_node_allocation_exits_2_and_runs_nothing(tmp_path, fake_tools, monkeypatch):
    for name, value in ONE_TASK_PER_NODE.items():
        monkeypatch.setenv(name, value)
    calls = tmp_path / "srun-call.json"
    fake_tools.add("srun", Answer(stderr="srun: error: Unable to create step for job 77: More processors requested "
                                         "than permitted\n", exit_code=1), record_to=calls)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: shape\nengine: mpi\nops: [all_reduce]\nmin_bytes: 8\nmax_bytes: 64\nnranks: 8\nnnodes: 2\n")
    out = tmp_path / "res"
    result = CliRunner().invoke(main, ["sweep", "run", str(spec), "--launcher", "srun", "--out", str(out),
                                       "--no-progress"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: this allocation has 1 task(s) per node on 4 node(s)")
    assert "the sweep needs 8 ranks on 2 node(s) (4 per node)" in errors[0]
    assert "salloc -N 2 --ntasks-per-node 4" in errors[0] and "nothing was run or recorded" in errors[0]
    assert "Traceback" not in result.output
    assert not calls.exists() or "--ntasks" not in json.loads(calls.read_text())["argv"]  # no step was started
    assert not (out / "failures.jsonl").exists() and not list(out.glob("points/*"))
