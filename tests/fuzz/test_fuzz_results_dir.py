"""Hostile results directories through ``sweep run`` (a resume), ``sweep status`` and ``analyze`` (issue 22).

The base is one small real sweep (``finished_mpi_sweep``: mpi engine, local launcher, 2 ranks, 8..64 B), copied per
case with one point made pending, so that every resume really launches. Each case plants what a colleague, a copy
slip or a full disk leaves: symbolic links under every name collscope writes or reads (logs, records, checks,
partial files, the old predictable temporary names, ``failures.jsonl``, ``sweep.json``, ``points/``, ``.lock``),
each pointing at canary files OUTSIDE the directory whose content and mtime must not change; hard links to a canary;
cut last lines; a full disk (a 256 KiB tmpfs, mounted in a private mount namespace by ``unshare --mount``, never in
this machine's namespace); a second writer holding the lock; files another user may not read (a real EACCES: the
commands run as ``nobody`` through ``setpriv``, since root reads every file whatever its mode). Every command must
exit 0, 1 or 2, print no traceback, and write nothing outside the results directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main

COMMANDS = (("sweep", "run"), ("sweep", "status"), ("analyze",))
CANARY = b"canary: outside the results directory\n"
ROOT = Path(__file__).resolve().parents[2]


# ---- the base and the canaries ------------------------------------------------------------------------------------
class Case:
    """A copy of the finished sweep in ``base/res`` (one point pending) and canaries in ``base/outside``."""

    def __init__(self, finished: tuple[Path, Path], base: Path) -> None:
        self.spec, source = finished
        self.base = base
        self.res = base / "res"
        shutil.copytree(source, self.res, symlinks=True)
        doc = json.loads((self.res / "sweep.json").read_text())
        self.points = [p["point_id"] for p in doc["plan"]["points"]]
        self.pending = self.points[0]
        (self.res / "points" / f"{self.pending}.jsonl").unlink()
        self.outside = base / "outside"
        self.outside.mkdir()
        for name in ("canary.txt", "canary.jsonl", "canary.log"):
            (self.outside / name).write_bytes(CANARY)
        (self.outside / "canary-dir").mkdir()
        (self.outside / "canary-dir" / "kept.txt").write_bytes(CANARY)
        (self.outside / "sweep-copy.json").write_bytes((self.res / "sweep.json").read_bytes())
        for path in self.outside.rglob("*"):
            os.utime(path, ns=(10**9, 10**9), follow_symlinks=False)
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, tuple[bytes | None, int, int]]:
        """Every entry outside the results directory: content, mode and mtime (and nothing new beside ``res``)."""
        out = {}
        for path in sorted(self.base.rglob("*")):
            if path == self.res or self.res in path.parents:
                continue
            st = path.lstat()
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            out[str(path.relative_to(self.base))] = (data, st.st_mode, st.st_mtime_ns)
        return out

    def link(self, name: str, target: str = "canary.txt") -> None:
        path = self.res / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
        path.symlink_to(self.outside / target)


def _point(case: Case, suffix: str, which: int = 0) -> str:
    return f"points/{case.points[which]}{suffix}"


def _cut(case: Case, name: str) -> None:
    path = case.res / name
    data = path.read_bytes() if path.exists() else b'{"point_id": "x", "reason": "timeout"}\n'
    path.write_bytes(data[: max(1, len(data) - 7)])


def _moved_points(case: Case) -> None:
    shutil.move(case.res / "points", case.outside / "canary-dir" / "points")
    (case.res / "points").symlink_to(case.outside / "canary-dir" / "points")


def _hardlink(case: Case, name: str) -> None:
    path = case.res / name
    path.unlink(missing_ok=True)
    os.link(case.outside / "canary.log", path)


def _cancelled_line(case: Case) -> bytes:
    """A failures.jsonl line that makes a resume run the pending point again and then append to the file."""
    return json.dumps({"point_id": case.pending, "reason": "cancelled", "detail": "SIGTERM"}).encode() + b"\n"


def _failures_link(case: Case, canary: str, hard: bool = False) -> None:
    (case.outside / canary).write_bytes(_cancelled_line(case))  # what the old code read through, then appended to
    os.utime(case.outside / canary, ns=(10**9, 10**9))
    if hard:
        _hardlink(case, "failures.jsonl")
    else:
        case.link("failures.jsonl", canary)


def _failures_cut(case: Case) -> None:
    (case.res / "failures.jsonl").write_bytes(_cancelled_line(case) + b'{"point_id": "x", "reason": "exit co')


MUTATIONS: dict[str, Callable[[Case], None]] = {
    "log of the pending point -> canary": lambda c: c.link(_point(c, ".log")),
    "log of a done point -> canary": lambda c: c.link(_point(c, ".log", 1)),
    "verify log -> canary": lambda c: c.link(_point(c, ".verify.log")),
    "records of a done point -> canary": lambda c: c.link(_point(c, ".jsonl", 1), "canary.jsonl"),
    "records of the pending point -> canary": lambda c: c.link(_point(c, ".jsonl"), "canary.jsonl"),
    "check.json -> canary": lambda c: c.link(_point(c, ".check.json")),
    "old partial name -> canary": lambda c: c.link(_point(c, ".partial.jsonl"), "canary.jsonl"),
    "old temp name of sweep.json -> canary": lambda c: c.link(f".sweep.json.{os.getpid()}.tmp"),
    "failures.jsonl -> canary": lambda c: _failures_link(c, "canary.jsonl"),
    "sweep.json -> a copy outside": lambda c: c.link("sweep.json", "sweep-copy.json"),
    "points/ -> a directory outside": _moved_points,
    ".lock -> canary": lambda c: c.link(".lock"),
    "workers/ -> a directory outside": lambda c: c.link("workers", "canary-dir"),
    "log hard-linked to canary": lambda c: _hardlink(c, _point(c, ".log")),
    "failures.jsonl hard-linked to canary": lambda c: _failures_link(c, "canary.log", hard=True),
    "failures.jsonl cut mid-line": _failures_cut,
    "records of a done point cut mid-line": lambda c: _cut(c, _point(c, ".jsonl", 1)),
    "sweep.json cut": lambda c: _cut(c, "sweep.json"),
    "records of the other point copied in": lambda c: (c.res / _point(c, ".jsonl")).write_bytes(
        (c.res / _point(c, ".jsonl", 1)).read_bytes()),
}


STAYS_READABLE = {"failures.jsonl cut mid-line", "log of the pending point -> canary", "log hard-linked to canary"}


def _check(result, what: str) -> None:
    assert result.exit_code in (0, 1, 2), (what, result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), (what, repr(result.exception))
    assert "Traceback" not in result.output and "Traceback" not in result.stderr, (what, result.stderr)


def _run_all(case: Case, what: str) -> list[int]:
    codes = []
    for command in COMMANDS:
        args = [*command, str(case.spec), "--launcher", "local", "--no-progress", "--out", str(case.res)] \
            if command == ("sweep", "run") else [*command, str(case.res)]
        result = CliRunner().invoke(main, args)
        _check(result, f"{what}: {' '.join(command)}")
        codes.append(result.exit_code)
    return codes


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_mutated_results_directory_never_escapes(finished_mpi_sweep, tmp_path, name):
    case = Case(finished_mpi_sweep, tmp_path)
    MUTATIONS[name](case)
    before = case.snapshot()  # after the mutation: moving points/ outside is part of it
    codes = _run_all(case, name)
    assert case.snapshot() == before, f"{name}: something outside the results directory changed"
    if name in STAYS_READABLE:  # the resume never glued a line onto the cut one: status and analyze still read it
        assert codes[1:] in ([0, 0], [0, 1]), (name, codes)


def test_the_untouched_copy_resumes_and_analyses(finished_mpi_sweep, tmp_path):
    case = Case(finished_mpi_sweep, tmp_path)
    assert _run_all(case, "untouched") == [0, 0, 0]
    assert (case.res / _point(case, ".jsonl")).is_file()


def test_a_second_writer_is_refused_readers_are_not(finished_mpi_sweep, tmp_path):
    case = Case(finished_mpi_sweep, tmp_path)
    code = ("import sys, time\nfrom collscope.results.lock import writer_lock\n"
            "with writer_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(120)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(case.res)], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert _run_all(case, "second writer") == [2, 0, 0]
    finally:
        holder.kill()
        holder.wait()
    assert not (case.res / _point(case, ".jsonl")).exists()
    assert case.snapshot() == case.before


def _cli_as(user_args: list[str], args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*user_args, str(Path(sys.executable).parent / "collscope"), *args], env=env,
                          capture_output=True, text=True, timeout=180, cwd=ROOT)


def _assert_clean(proc: subprocess.CompletedProcess[str], what: str) -> None:
    assert proc.returncode in (0, 1, 2), (what, proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, (what, proc.stderr)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
@pytest.mark.parametrize("private", ["a done point's records", "failures.jsonl", "sweep.json", "points/"])
def test_files_another_user_may_not_read(finished_mpi_sweep, private):
    base = Path(tempfile.mkdtemp(prefix="collscope-fuzz-"))  # outside root's 0700 pytest directory
    try:
        case = Case(finished_mpi_sweep, base)
        (case.res / ".lock").unlink(missing_ok=True)
        (case.res / "failures.jsonl").write_text(json.dumps({"point_id": case.points[1], "reason": "timeout"})
                                                 + "\n")
        for path in (base, case.res, case.res / "points"):
            path.chmod(0o777)
        for path in case.res.rglob("*"):
            if path.is_file():
                path.chmod(0o666)
        spec = base / "spec.yaml"
        shutil.copy(case.spec, spec)
        spec.chmod(0o644)
        target = {"a done point's records": case.res / _point(case, ".jsonl", 1),
                  "failures.jsonl": case.res / "failures.jsonl", "sweep.json": case.res / "sweep.json",
                  "points/": case.res / "points"}[private]
        target.chmod(0o700 if target.is_dir() else 0o600)
        before = case.snapshot()
        env = {**os.environ, "HOME": str(base)}
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        for args in (["sweep", "run", str(spec), "--launcher", "local", "--no-progress", "--out", str(case.res)],
                     ["sweep", "status", str(case.res)], ["analyze", str(case.res)]):
            _assert_clean(_cli_as(nobody, args, env), f"{private}: {args[:2]}")
        assert not list(case.res.glob("points/*.damaged-*"))  # unreadable is never damaged
        assert case.snapshot() == before
    finally:
        shutil.rmtree(base)


FULL_DISK = r"""
set -e
mount -t tmpfs -o size=256k tmpfs "$DISK"
cp -a "$SRC" "$DISK/res"
dd if=/dev/zero of="$DISK/filler" bs=4k 2>/dev/null || true   # until ENOSPC: the disk is full
truncate -s "-$LEFT" "$DISK/filler"                            # then give back LEFT bytes (whole pages)
set +e
"$CLI" sweep run "$SPEC" --launcher local --no-progress --out "$DISK/res"; echo "EXIT run $?"
"$CLI" sweep status "$DISK/res"; echo "EXIT status $?"
"$CLI" analyze "$DISK/res"; echo "EXIT analyze $?"
rm -f "$DISK/filler"
"$CLI" sweep status "$DISK/res"; echo "EXIT status-after $?"
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
@pytest.mark.parametrize("left_bytes", [0, 4096, 12288])
def test_a_full_disk_during_a_resume(finished_mpi_sweep, tmp_path, left_bytes):
    case = Case(finished_mpi_sweep, tmp_path)
    (case.res / "failures.jsonl").write_text(json.dumps({"point_id": case.points[1], "reason": "timeout"}) + "\n")
    disk = tmp_path / "disk"
    disk.mkdir()
    env = {**os.environ, "DISK": str(disk), "SRC": str(case.res), "SPEC": str(case.spec), "LEFT": str(left_bytes),
                  "CLI": str(Path(sys.executable).parent / "collscope")}
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", FULL_DISK], env=env,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    exits = [line.split() for line in proc.stdout.splitlines() if line.startswith("EXIT ")]
    assert [e[1] for e in exits] == ["run", "status", "analyze", "status-after"], (proc.stdout, proc.stderr)
    assert all(e[2] in ("0", "1", "2") for e in exits), (exits, proc.stderr)
    assert exits[-1][2] == "0", proc.stderr  # with space again, the directory reads: nothing was glued or lost
    assert not any(disk.iterdir())  # the tmpfs lived in the private namespace only
    snapshot = {k: v for k, v in case.snapshot().items() if not k.startswith("disk")}
    assert snapshot == case.before
