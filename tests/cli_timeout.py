"""Run the CLI in-process with a time limit, for inputs that could make it block (a FIFO given as a file)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from collscope.cli import main

__all__ = ["invoke_with_timeout"]


def invoke_with_timeout(args: list[str], fifo: Path, timeout_s: float = 20.0) -> Result:
    """``collscope ARGS`` through CliRunner in a thread; when it is still running after ``timeout_s`` a reader
    blocked on ``fifo`` is released (a writer opens and closes it) and the test fails, so the suite never hangs."""
    box: list[Result] = []
    worker = threading.Thread(target=lambda: box.append(CliRunner().invoke(main, args)), daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        _release(fifo)
        worker.join(5)
        pytest.fail(f"collscope {' '.join(args)} blocked on the FIFO {fifo}")
    return box[0]


def _release(fifo: Path) -> None:
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # no reader is waiting
        return
    os.close(fd)


def one_error_line(result: Result) -> str:
    """The single ``error: ...`` line of a command that refused its input: exit 2, no traceback, one line."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]
