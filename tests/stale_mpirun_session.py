"""Run as pid 1 of a fresh pid namespace (``unshare --pid --fork --mount-proc``): shows for real what a killed
mpirun's session directory does to a later mpirun that gets the same pid, with and without proc's private base.

1. mpirun is started with TMPDIR=T and killed with SIGKILL once its session directory T/ompi.<pid> holds its
   PMIx rendezvous files, which leaves that directory behind (what a timeout's SIGKILL does).
2. That directory is copied for every pid a later mpirun of this small namespace can get (the pid in its file
   names changed to match), as if each of them had been left by an earlier killed mpirun.
3. proc.run starts mpirun with the session base pinned to T (``PRTE_MCA_prte_local_tmpdir_base``): proc then
   adds nothing, and the stale directory of its pid is in the way.
4. The same without the pin: proc gives the launch a base of its own.

Prints one JSON object: the victim's pid, the stale files, and for 3 and 4 the exit code and the first line of
output, and whether proc's private base was removed afterwards.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from collscope import proc
from collscope.sweeps.launch_options import ROOT_ENV

PIDS_COVERED = range(2, 400)


def _leave_stale_session(mpirun: str, env: dict[str, str], tmpdir: str) -> tuple[int, str]:
    victim = subprocess.Popen([mpirun, "-np", "1", "--oversubscribe", "sleep", "60"], env=env,
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stale = os.path.join(tmpdir, f"ompi.{victim.pid}")
    deadline = time.monotonic() + 30
    while not glob.glob(os.path.join(stale, "pmix.*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    subprocess.run(["pkill", "-KILL", "-x", "sleep"], check=False)  # the rank, in a process group of its own
    return victim.pid, stale


def _copy_for(stale: str, victim_pid: int, pid: int) -> None:
    target = os.path.join(os.path.dirname(stale), f"ompi.{pid}")
    if os.path.exists(target):
        return
    shutil.copytree(stale, target)
    for root, dirs, files in os.walk(target, topdown=False):
        for name in files + dirs:
            renamed = name.replace(f".{victim_pid}", f".{pid}").replace(f"-{victim_pid}@", f"-{pid}@")
            if renamed != name:
                os.rename(os.path.join(root, name), os.path.join(root, renamed))


def _outcome(result: proc.ProcResult) -> dict[str, object]:
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip("- ")]
    return {"returncode": result.returncode, "first_line": lines[0] if lines else ""}


def main(mpirun: str) -> int:
    tmpdir = tempfile.mkdtemp(prefix="stale-")
    env = {**os.environ, **ROOT_ENV, "TMPDIR": tmpdir}
    for name in ("PRTE_MCA_prte_local_tmpdir_base", "PRTE_MCA_prte_tmpdir_base"):
        env.pop(name, None)
    victim_pid, stale = _leave_stale_session(mpirun, env, tmpdir)
    report: dict[str, object] = {"victim_pid": victim_pid, "stale_files": sorted(os.listdir(stale))}
    for pid in PIDS_COVERED:
        _copy_for(stale, victim_pid, pid)
    argv = [mpirun, "-np", "1", "--oversubscribe", "true"]
    report["pinned"] = _outcome(proc.run(argv, timeout_s=60, env={**env, "PRTE_MCA_prte_local_tmpdir_base": tmpdir}))
    before = set(os.listdir(tmpdir))
    report["private"] = _outcome(proc.run(argv, timeout_s=60, env=env))
    report["left_in_tmpdir"] = sorted(set(os.listdir(tmpdir)) - before)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
