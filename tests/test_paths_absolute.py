"""Every path collscope writes is made absolute at the start, and a temporary file lives beside its target and
is renamed through one descriptor of their directory (issue 26 item 4).

The real condition behind ``OSError: [Errno 18] Invalid cross-device link`` is made here for real (root, in a
private mount namespace that nothing else sees): a process that entered another mount namespace keeping its
working directory (``nsenter --wd``, as ``scripts/local-cluster.sh exec`` runs ``salloc`` and every client) sits
in a directory of the other namespace's mount; a name relative to it and the same name made absolute reach one
file through two mounts, and a rename between them fails with EXDEV.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import collscope.cli.locate as cli_locate
from collscope.cli import main
from collscope.collectives.allocation import GPU_VARIABLES
from collscope.collectives.record import Measurement, write_jsonl
from collscope.files import absolute_path
from tests.cli_timeout import one_error_line
from tests.locate.test_cli_locate import RecordingFabric

REPO = Path(__file__).resolve().parents[1]
NCCL_TESTS = REPO / "tests" / "fixtures" / "nccl-tests" / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"


def _record() -> Measurement:
    return Measurement.from_timing(op="all_reduce", size_bytes=1024, nranks=2, time_us=10.0, engine="mpi",
                                   backend="mpi", count=256, dtype="float32", redop="sum", root=None, in_place=False,
                                   nnodes=1)


@pytest.fixture
def allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[1-4]")
    monkeypatch.setenv("SLURM_JOB_ID", "22")
    for name in GPU_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_absolute_path_is_taken_from_the_starting_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert absolute_path("results/x") == tmp_path / "results" / "x"
    assert absolute_path("a/../b") == tmp_path / "a" / ".." / "b"  # written as given: links never resolved
    assert absolute_path("/abs/p") == Path("/abs/p")


def test_locate_steps_are_given_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               allocation: None) -> None:
    """A step's ranks start in another directory (another node, ``srun --chdir``, a node that lacks this one):
    the record path each step is given is absolute, under the directory locate was started in."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["locate", "--rails", "2", "--out", "results/locate-22", "--dry-run"])
    assert result.exit_code == 0, result.output
    steps = [shlex.split(line) for line in result.output.splitlines() if line and not line.startswith("#")]
    outs = [argv[argv.index("--out") + 1] for argv in steps]
    assert outs, result.output
    assert all(w.startswith(f"{tmp_path}/results/locate-22/steps/") for w in outs), outs


def test_locate_with_a_relative_out_writes_and_names_it_from_where_it_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allocation: None) -> None:
    box: dict[str, Path] = {}

    def runner(options: object, work_dir: Path, timeout_s: float) -> RecordingFabric:
        box["steps"] = work_dir
        return RecordingFabric(nodes=[f"node{i}" for i in range(1, 5)], rails=2)

    monkeypatch.setattr(cli_locate, "_make_runner", runner)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["locate", "--rails", "2"])  # the default --out: results/locate-<job>
    assert result.exit_code == 0, result.output
    root = tmp_path / "results" / "locate-22"
    assert f"results: {root}" in result.output
    assert box["steps"] == root / "steps"
    assert json.loads((root / "locate.json").read_text())["out"] == str(root)
    assert list((root / "points").glob("t000-node-all.jsonl"))


def test_write_jsonl_renames_its_temporary_beside_the_target(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary is created in the target's directory and renamed by bare names relative to one descriptor of
    that directory: the two names can never resolve through different mounts."""
    (tmp_path / "d" / "points").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "d")
    calls: list[tuple[object, object, object, object]] = []
    real_replace = os.replace

    def spy(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
        calls.append((src, dst, src_dir_fd, dst_dir_fd))
        if src_dir_fd is not None:
            assert os.path.samestat(os.fstat(src_dir_fd), os.stat(tmp_path / "d" / "points"))
        real_replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(os, "replace", spy)
    write_jsonl("points/p.jsonl", [_record()])
    assert len(calls) == 1
    src, dst, src_fd, dst_fd = calls[0]
    assert src_fd is not None and src_fd == dst_fd
    assert "/" not in str(src) and str(src).startswith(".p.jsonl.") and dst == "p.jsonl"
    assert (tmp_path / "d" / "points" / "p.jsonl").read_text().count("\n") == 1
    assert os.listdir(tmp_path / "d" / "points") == ["p.jsonl"]


# ---- the real condition: a working directory from another mount namespace ----------------------------------
def _need_namespaces() -> None:
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("nsenter")):
        pytest.skip("needs root, unshare(1) and nsenter(1) for a private mount namespace")


@pytest.fixture
def other_namespace(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A process holding a private mount namespace in which ``tmp_path/shadow`` is an empty tmpfs; yields its pid
    and ``tmp_path``. Nothing outside that namespace sees the tmpfs; the process is ended by its pid."""
    _need_namespaces()
    (tmp_path / "shadow" / "hidden").mkdir(parents=True)
    ready = tmp_path / "ready"
    script = f'mount -t tmpfs -o size=1m tmpfs "{tmp_path}/shadow" && : > "{ready}" && exec sleep 120'
    holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "bash", "-c", script])
    try:
        for _ in range(100):
            if ready.exists() or holder.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"], check=False)
        if not ready.exists():
            pytest.skip("unshare --mount could not make a private mount namespace here")
        yield holder.pid, tmp_path
    finally:
        holder.kill()
        holder.wait(timeout=10)


def _entered(pid: int, wd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` run in ``pid``'s mount namespace with ``wd`` (opened here, before entering) as its directory."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(["nsenter", "-t", str(pid), "-m", f"--wd={wd}", "--", *argv], capture_output=True,
                          text=True, timeout=120, env=env)


def test_ingest_with_a_relative_out_from_a_directory_of_another_namespace(other_namespace: tuple[int, Path]) -> None:
    pid, base = other_namespace
    work = base / "work"
    work.mkdir()
    done = _entered(pid, work, sys.executable, "-m", "collscope", "ingest", str(NCCL_TESTS), "--out",
                    "out/records.jsonl")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "cross-device" not in done.stderr
    assert (work / "out" / "records.jsonl").read_text().count("\n") >= 4
    assert [p.name for p in (work / "out").iterdir()] == ["records.jsonl"]  # no temporary left


def test_a_working_directory_its_name_does_not_reach_is_refused_in_one_line(
        other_namespace: tuple[int, Path]) -> None:
    """Inside the namespace ``shadow/hidden`` is under the tmpfs: the directory's name reaches nothing there, so
    a relative --out cannot be made absolute. One line saying so, exit 2; nothing written anywhere."""
    pid, base = other_namespace
    done = _entered(pid, base / "shadow" / "hidden", sys.executable, "-m", "collscope", "ingest", str(NCCL_TESTS),
                    "--out", "records.jsonl")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "give an absolute path" in lines[0], done.stderr
    assert not (base / "shadow" / "hidden" / "records.jsonl").exists()


def test_the_one_error_line_helper_still_applies(tmp_path: Path) -> None:
    """An --out below a regular file is refused before work, named absolute (one line, exit 2)."""
    (tmp_path / "file").write_text("x")
    line = one_error_line(CliRunner().invoke(main, ["ingest", str(NCCL_TESTS), "--out",
                                                   str(tmp_path / "file" / "r.jsonl")]))
    assert str(tmp_path / "file") in line
