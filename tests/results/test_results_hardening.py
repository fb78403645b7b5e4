"""A results directory that others can write into (issue 22 items 6-10): nothing in it is followed, a cut log line
is never glued onto, one writer at a time, files readable by the group, records that belong to their point.

Real files and links in tmp_path; the CLI in-process (CliRunner) on a copy of one small real mpi sweep
(``finished_mpi_sweep`` in tests/conftest.py); a second writer and another user (EACCES: root reads everything,
so the reader runs as ``nobody`` through ``setpriv``) are real processes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.atomic import append_bytes, write_text_atomic
from collscope.cli import main
from collscope.results import ResultsDir
from collscope.results.lock import ResultsLockedError, writer_lock

CANARY_TEXT = "canary: outside the results directory, must never change\n"


def _canary(path: Path) -> tuple[Path, bytes, int]:
    path.write_text(CANARY_TEXT)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    return path, path.read_bytes(), path.stat().st_mtime_ns


def _unchanged(canary: tuple[Path, bytes, int]) -> None:
    path, data, mtime = canary
    assert path.read_bytes() == data and path.stat().st_mtime_ns == mtime, f"{path} was written through a link"


def _copy(finished: tuple[Path, Path], dst: Path) -> tuple[Path, ResultsDir, list[str]]:
    spec, out = finished
    shutil.copytree(out, dst, symlinks=True)
    results = ResultsDir(dst)
    points = [p["point_id"] for p in json.loads(results.sweep_json.read_text())["plan"]["points"]]
    return spec, results, points


def _resume(spec: Path, results: ResultsDir):
    return CliRunner().invoke(main, ["sweep", "run", str(spec), "--launcher", "local", "--out", str(results.root),
                                     "--no-progress"])


def _one_error_line(result, *fragments: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert all(f in errors[0] for f in fragments), errors[0]
    return errors[0]


# ---- item 6: links are never followed ------------------------------------------------------------------------
def test_a_log_planted_as_a_symlink_is_moved_aside_and_its_target_untouched(finished_mpi_sweep, tmp_path):
    spec, results, points = _copy(finished_mpi_sweep, tmp_path / "res")
    canary = _canary(tmp_path / "outside.txt")
    results.records_path(points[0]).unlink()  # pending again
    log = results.log_path(points[0])
    log.unlink()
    log.symlink_to(canary[0])
    result = _resume(spec, results)
    assert result.exit_code == 0, result.output
    _unchanged(canary)
    aside = sorted(results.points_dir.glob(f"{log.name}.damaged-*"))
    assert len(aside) == 1 and aside[0].is_symlink(), sorted(p.name for p in results.points_dir.iterdir())
    assert log.is_file() and not log.is_symlink() and "collscope attempt" in log.read_text()
    assert results.is_done(points[0])


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_failure_never_copies_a_linked_file_into_failures_jsonl(tmp_path, link):
    results = ResultsDir(tmp_path / "res")
    results.prepare("sw", {}, {"points": [{"point_id": "p"}]}, {})
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT\n")
    if link == "symlink":
        results.log_path("p").symlink_to(secret)
    else:
        os.link(secret, results.log_path("p"))
    results.record_failure("p", "exit code", "exit code 1")
    text = results.failures_path.read_text()
    assert "TOP-SECRET-CONTENT" not in text
    assert ("symbolic link" if link == "symlink" else "hard link") in json.loads(text)["log_tail"]


def test_a_verify_log_planted_as_a_symlink_is_never_truncated(tmp_path):
    results = ResultsDir(tmp_path / "res")
    results.prepare("sw", {}, {"points": [{"point_id": "p"}]}, {})
    canary = _canary(tmp_path / "outside.txt")
    (results.points_dir / "p.verify.log").symlink_to(canary[0])
    with results.open_log("p", ".verify.log", truncate=True) as log:
        log.write("verification output\n")
        assert log.read_from(0) == "verification output\n" and "symbolic link" in str(log.note)
    _unchanged(canary)


@pytest.mark.parametrize("name", ["sweep.json", "p.check.json", "workload.json"])
def test_a_link_under_the_old_predictable_temporary_name_is_not_written_through(tmp_path, name):
    canary = _canary(tmp_path / "outside.txt")
    target = tmp_path / "dir" / name
    target.parent.mkdir()
    (target.parent / f".{name}.{os.getpid()}.tmp").symlink_to(canary[0])
    write_text_atomic(target, '{"ok": true}\n')
    _unchanged(canary)
    assert target.read_text() == '{"ok": true}\n' and not target.is_symlink()


@pytest.mark.parametrize("name", ["points", "failures.jsonl", "sweep.json"])
def test_points_dir_or_a_top_file_as_a_link_stops_the_sweep_with_one_line(finished_mpi_sweep, tmp_path, name):
    spec, results, points = _copy(finished_mpi_sweep, tmp_path / "res")
    outside = tmp_path / "outside"
    outside.mkdir()
    entry = results.root / name
    if name == "points":
        shutil.move(entry, outside / "points")
        entry.symlink_to(outside / "points")
        (outside / "points" / f"{points[0]}.jsonl").unlink()  # a pending point that would write there
    else:
        if entry.exists():
            shutil.move(entry, outside / name)
        else:
            (outside / name).write_text(CANARY_TEXT)
        entry.symlink_to(outside / name)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in outside.rglob("*") if p.is_file()}
    _one_error_line(_resume(spec, results), str(entry), "symbolic link")
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in outside.rglob("*") if p.is_file()}
    assert after == before


# ---- item 7: a cut line is never glued onto ------------------------------------------------------------------
def test_a_cut_last_failure_line_and_a_resume_leave_the_directory_readable(tmp_path, caplog):
    results = ResultsDir(tmp_path / "res")
    results.prepare("sw", {}, {"points": [{"point_id": p} for p in ("a", "b", "c")]}, {})
    results.record_failure("a", "timeout", "timeout after 5 s")
    with results.failures_path.open("ab") as fh:
        fh.write(b'{"point_id": "b", "reason": "exit co')  # a writer killed mid-line (or a full disk)
    results.record_failure("c", "exit code", "exit code 2")  # the next append (a resume)
    lines = results.failures_path.read_bytes().split(b"\n")
    assert lines[1] == b'{"point_id": "b", "reason": "exit co' and json.loads(lines[2])["point_id"] == "c"
    assert sorted(results.failures()) == ["a", "c"]
    for args in (["sweep", "status", str(results.root)], ["sweep", "status", "--json", str(results.root)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
    assert json.loads(CliRunner().invoke(main, ["sweep", "status", "--json", str(results.root)]).stdout)["failed"] == 2


def test_append_repairs_a_missing_newline_and_writes_every_byte(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_bytes(b'{"cut": ')
    line = json.dumps({"x": "y" * 100_000}).encode() + b"\n"
    append_bytes(log, line)
    assert log.read_bytes() == b'{"cut": \n' + line


# ---- item 8: one writer ---------------------------------------------------------------------------------------
def _holder(root: Path, shard: str = "None") -> subprocess.Popen[str]:
    code = ("import sys, time\nfrom collscope.results.lock import writer_lock\n"
            f"with writer_lock(sys.argv[1], {shard}):\n    print('held', flush=True)\n    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_sweep_into_the_same_out_is_refused_naming_the_holder(finished_mpi_sweep, tmp_path):
    spec, results, points = _copy(finished_mpi_sweep, tmp_path / "res")
    results.records_path(points[0]).unlink()
    holder = _holder(results.root)
    try:
        line = _one_error_line(_resume(spec, results), f"host {socket.gethostname()}", f"pid {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    assert "being written by another sweep" in line
    assert not results.records_path(points[0]).exists()  # nothing ran
    result = _resume(spec, results)  # the holder is gone: the kernel released its lock
    assert result.exit_code == 0, result.output


def test_shards_of_one_split_share_the_directory_others_are_refused(tmp_path):
    root = tmp_path / "res"
    holder = _holder(root, "(0, 2)")
    try:
        with writer_lock(root, (1, 2)):
            pass
        for shard in ((0, 2), (0, 3), None):
            with pytest.raises(ResultsLockedError, match=f"pid {holder.pid}"):
                with writer_lock(root, shard):
                    pass
    finally:
        holder.kill()
        holder.wait()


def test_two_writers_never_share_a_partial_file(tmp_path):
    one, two = ResultsDir(tmp_path), ResultsDir(tmp_path)
    assert one.partial_path("p") != two.partial_path("p")
    assert one.partial_path("p").name.endswith(".partial.jsonl") and one.partial_path("p") == one.partial_path("p")


# ---- item 9: the group can read what one member wrote ---------------------------------------------------------
def test_files_get_the_umasks_mode(tmp_path):
    old = os.umask(0o002)
    try:
        results = ResultsDir(tmp_path / "res")
        results.prepare("sw", {}, {"points": [{"point_id": "p"}]}, {})
        results.finish_point("p", [])
        results.write_check("p", {"applied": None})
        results.record_failure("q", "timeout", "t")
        with results.open_log("p"):
            pass
    finally:
        os.umask(old)
    for path in (results.sweep_json, results.records_path("p"), results.check_path("p"), results.failures_path,
                 results.log_path("p")):
        assert path.stat().st_mode & 0o777 == 0o664, (path.name, oct(path.stat().st_mode))


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_a_point_another_user_may_not_read_is_unreadable_never_damaged(finished_mpi_sweep):
    base = Path(tempfile.mkdtemp(prefix="collscope-shared-"))  # outside root's 0700 pytest directory
    try:
        spec, results, points = _copy(finished_mpi_sweep, base / "res")
        (results.root / ".lock").unlink(missing_ok=True)
        for path in (base, results.root, results.points_dir):
            path.chmod(0o777)
        for path in (results.sweep_json, *results.points_dir.iterdir()):
            path.chmod(0o644)
        private = results.records_path(points[1])
        private.chmod(0o600)  # written by a member whose umask was 077
        shutil.copy(spec, base / "spec.yaml")
        (base / "spec.yaml").chmod(0o644)
        cli = [str(Path(sys.executable).parent / "collscope")]
        env = {**os.environ, "HOME": str(base)}
        status = subprocess.run([*NOBODY, *cli, "sweep", "status", "--json", str(results.root)], env=env,
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        doc = json.loads(status.stdout)
        assert (doc["unreadable"], doc["damaged"], doc["done"]) == (1, 0, 1), doc
        assert "Permission denied" in doc["unreadable_points"][0]["problem"]
        run = subprocess.run([*NOBODY, *cli, "sweep", "run", str(base / "spec.yaml"), "--launcher", "local",
                              "--out", str(results.root), "--no-progress"], env=env, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        assert "may not read" in run.stderr and private.name in run.stderr
        analyze = subprocess.run([*NOBODY, *cli, "analyze", str(results.root)], env=env, capture_output=True,
                                 text=True, timeout=120)
        assert analyze.returncode == 2 and "Traceback" not in analyze.stderr, analyze.stderr
        assert "1 point file(s) this user may not read" in analyze.stderr and "damaged" not in analyze.stderr
        assert sorted(p.name for p in results.points_dir.glob("*.damaged-*")) == []
        assert private.stat().st_mode & 0o777 == 0o600
    finally:
        shutil.rmtree(base)


# ---- item 10: records that belong to their point --------------------------------------------------------------
@pytest.mark.parametrize("damage", ["another point's records", "every size twice"])
def test_records_that_are_not_the_points_are_damaged_and_measured_again(finished_mpi_sweep, tmp_path, damage):
    spec, results, points = _copy(finished_mpi_sweep, tmp_path / "res")
    forced = results.records_path(points[1])
    planted = (results.records_path(points[0]).read_bytes() if damage == "another point's records"
               else forced.read_bytes() * 2)
    forced.write_bytes(planted)
    status = results.status()
    assert (status.done, status.damaged) == (1, 1)
    problem = status.damaged_points[0].problem
    assert ("the plan says" in problem) if damage == "another point's records" else ("repeats size" in problem)
    analyzed = CliRunner().invoke(main, ["analyze", str(results.root)])  # no zero-spread "repeats" analysed
    assert analyzed.exit_code == 2 and forced.name in analyzed.stderr, analyzed.output
    result = _resume(spec, results)
    assert result.exit_code == 0, result.output
    aside = sorted(results.points_dir.glob(f"{forced.name}.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == planted
    records = results.read_point(points[1])
    assert {r.point_id for r in records} == {points[1]} and len({r.size_bytes for r in records}) == len(records)
    assert results.status().done == 2

