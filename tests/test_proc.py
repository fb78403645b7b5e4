"""proc.run with real child processes: timeouts kill the whole group, results are values."""

from __future__ import annotations

import os
import sys
import time

import pytest

from collscope import proc
from collscope.errors import ToolMissingError


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); read its state to tell. The process may be reaped between the two calls: the
    # read then fails with ESRCH (ProcessLookupError) or the file is gone.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _wait_gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_success_returns_output_and_code():
    result = proc.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                      timeout_s=30)
    assert result.returncode == 3
    assert result.stdout.strip() == "out"
    assert result.stderr.strip() == "err"
    assert not result.timed_out
    assert not result.ok
    assert result.duration_s > 0


def test_sleep_past_timeout_is_killed(tmp_path):
    pidfile = tmp_path / "pid"
    code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    start = time.monotonic()
    result = proc.run([sys.executable, "-c", code], timeout_s=1.0)
    elapsed = time.monotonic() - start
    assert result.timed_out
    assert result.returncode is not None and result.returncode < 0
    assert elapsed < 10
    assert _wait_gone(int(pidfile.read_text()))


def test_grandchild_is_killed_on_timeout(tmp_path):
    pidfile = tmp_path / "grandchild"
    grandchild = "import time; time.sleep(120)"
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(120)\n"
    )
    result = proc.run([sys.executable, "-c", code], timeout_s=2.0)
    assert result.timed_out
    assert pidfile.exists()
    assert _wait_gone(int(pidfile.read_text())), "grandchild survived the timeout"


def test_grandchild_left_behind_by_a_finished_parent_is_killed(tmp_path):
    pidfile = tmp_path / "orphan"
    grandchild = "import time; time.sleep(120)"
    code = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}], stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL)\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
    )
    result = proc.run([sys.executable, "-c", code], timeout_s=30)
    assert result.returncode == 0 and not result.timed_out
    assert _wait_gone(int(pidfile.read_text())), "orphaned grandchild survived"


def test_string_argv_is_a_type_error():
    with pytest.raises(TypeError):
        proc.run("echo hi", timeout_s=5)  # type: ignore[arg-type]


def test_timeout_is_mandatory_and_positive():
    with pytest.raises(ValueError):
        proc.run(["true"], timeout_s=0)


def test_missing_tool_names_it_and_how_to_install():
    with pytest.raises(ToolMissingError) as info:
        proc.run(["collscope-no-such-tool"], timeout_s=5, install_hint="apt-get install nothing")
    assert "collscope-no-such-tool" in str(info.value)
    assert "apt-get install nothing" in str(info.value)


def test_env_and_extra_env_reach_the_child():
    result = proc.run([sys.executable, "-c", "import os; print(os.environ['A'], os.environ['B'])"],
                      timeout_s=30, env={"A": "1", "PATH": os.environ["PATH"]}, extra_env={"B": "two"})
    assert result.stdout.split() == ["1", "two"]


def test_binary_noise_is_decoded_not_raised():
    result = proc.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'\\xff\\xfeok')"], timeout_s=30)
    assert result.stdout.endswith("ok")


def test_output_path_receives_both_streams_and_result_has_tail(tmp_path):
    log = tmp_path / "point.log"
    log.write_text("earlier\n")
    code = "import sys; print('to-out'); print('to-err', file=sys.stderr)"
    result = proc.run([sys.executable, "-c", code], timeout_s=30, output_path=log)
    assert result.returncode == 0
    text = log.read_text()
    assert text.startswith("earlier\n") and "to-out" in text and "to-err" in text
    assert "to-out" in result.stdout and result.stderr == ""


def test_kill_minus_9_of_the_caller_kills_the_command_group(tmp_path):
    """The caller of proc.run dies by SIGKILL: the reaper kills the command and its children."""
    pidfile = tmp_path / "sleeper"
    grandchild = "import time; time.sleep(120)"
    command = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(120)\n"
    )
    caller = (
        "import sys\n"
        "from collscope import proc\n"
        f"proc.run([sys.executable, '-c', {command!r}], timeout_s=300, kill_on_parent_death=True)\n"
    )
    import subprocess

    parent = subprocess.Popen([sys.executable, "-c", caller])
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pidfile.exists()
    os.kill(parent.pid, 9)
    parent.wait()
    assert _wait_gone(int(pidfile.read_text()), within_s=10), "the command's child outlived kill -9 of the caller"


def test_reaper_passes_the_exit_code_through():
    result = proc.run([sys.executable, "-c", "import sys; sys.exit(7)"], timeout_s=30, kill_on_parent_death=True)
    assert result.returncode == 7


def test_timeout_under_the_reaper_kills_the_command(tmp_path):
    pidfile = tmp_path / "pid"
    code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    result = proc.run([sys.executable, "-c", code], timeout_s=2.0, kill_on_parent_death=True)
    assert result.timed_out
    assert _wait_gone(int(pidfile.read_text()))
