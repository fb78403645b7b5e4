"""A warning the command line prints is a plain line: no logging prefix ("WARNING collscope.results.store:",
"WARNING:collscope...:") in front of what the person needs to read (issue 26 item 8)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from collscope.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "results" / "mpi-algos-2rank"
NOTE = "skipped a half-written last line"


def _results_with_a_cut_failure_line(tmp_path: Path) -> Path:
    """A sweep whose failures.jsonl ends in a half-written line: reading it warns (results/store.py)."""
    root = tmp_path / "results"
    shutil.copytree(EXAMPLE, root)
    (root / "failures.jsonl").write_text('{"point_id": "lost", "reason": "exit c')
    return root


def test_a_warning_reaches_the_terminal_as_a_plain_line(tmp_path: Path) -> None:
    root = _results_with_a_cut_failure_line(tmp_path)
    run = subprocess.run([sys.executable, "-m", "collscope", "sweep", "status", str(root)], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if NOTE in line]
    assert lines == [f"{root / 'failures.jsonl'}:1: {NOTE} (no newline after it: a writer killed mid-line or a full "
                     "disk)"], run.stderr
    assert "WARNING" not in run.stderr and "collscope.results" not in run.stderr


def test_in_process_the_warning_goes_to_the_commands_stderr_once(tmp_path: Path) -> None:
    root = _results_with_a_cut_failure_line(tmp_path)
    for _ in range(2):  # a second command in the same process: still one line (one handler, today's stderr)
        result = CliRunner().invoke(main, ["sweep", "status", str(root)])
        assert result.exit_code == 0, result.output
        assert result.stderr.count(NOTE) == 1 and "WARNING" not in result.stderr, result.stderr

