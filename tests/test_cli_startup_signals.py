"""A signal while the command line loads (``collscope.cli``: logging, click, the group) ends it with 130 (SIGINT) or
143 (SIGTERM) and one line, never a traceback or a death by the signal (issue 22 item 14, exit codes). The moment
is pinned by an import hook that sends the process the signal when the named module is first imported; the
handlers are put back once the command line is loaded, and a signal the parent ignores stays ignored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_TRIP = textwrap.dedent("""
    import os, signal, sys
    target, signum = sys.argv[1], getattr(signal, sys.argv[2])
    class Trip:
        def find_spec(self, name, path=None, target_=None):
            if name == target:
                os.kill(os.getpid(), signum)
            return None
    sys.meta_path.insert(0, Trip())
    from collscope.cli import main
    assert signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.SIG_IGN)
    main(["--version"])
""")


def _run(module: str, name: str, *, ignore_sigint: bool = False) -> subprocess.CompletedProcess[str]:
    def child() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_sigint else signal.SIG_DFL)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", _TRIP, module, name], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=False, preexec_fn=child)


@pytest.mark.parametrize(("module", "name", "code", "said"), [
    ("logging", "SIGINT", 130, "interrupted (SIGINT)"),  # was: KeyboardInterrupt traceback, killed by SIGINT
    ("click", "SIGTERM", 143, "stopped (SIGTERM) while collscope started"),  # was: killed by SIGTERM (-15)
    ("collscope.cli._group", "SIGINT", 130, "interrupted (SIGINT)"),
])
def test_a_signal_while_the_command_line_loads_exits_with_its_code(module, name, code, said):
    done = _run(module, name)
    assert done.returncode == code, done.stderr[-2000:]
    assert done.stderr == said + "\n" and done.stdout == ""


def test_a_sigint_the_parent_ignores_stays_ignored_and_handlers_are_put_back():
    done = _run("logging", "SIGINT", ignore_sigint=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("collscope, version")
    check = ("import signal\nfrom collscope.cli import main\n"
             "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
             "signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)")
    back = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60, check=False,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert back.stdout.split() == ["True", "True"], back.stderr[-2000:]
