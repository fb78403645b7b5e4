"""Run the mpirun command a collscope dry run printed, with its per-rank program replaced by an environment
probe: each rank prints one JSON line with its host and the value of the variables named on the command line.

    python probe_env.py DRY_RUN_OUTPUT NAME...
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys


def probe(names: list[str]) -> None:
    print(json.dumps({"host": socket.gethostname(), "env": {n: os.environ.get(n) for n in names}}), flush=True)


def main() -> int:
    if sys.argv[1] == "--probe":
        probe(sys.argv[2:])
        return 0
    lines = [ln for ln in open(sys.argv[1]).read().splitlines() if " mpirun " in ln or "/mpirun " in ln]
    words = shlex.split(lines[0])
    assert words[0] == "env"
    start = next(i for i, w in enumerate(words) if w.endswith("mpirun"))
    env = dict(w.split("=", 1) for w in words[1:start])
    program = next(i for i, w in enumerate(words) if i > start and w == "-m" and words[i + 1] == "collscope")
    argv = [*words[start:program - 1], sys.executable, os.path.abspath(__file__), "--probe", *sys.argv[2:]]
    print("+", shlex.join(argv), flush=True)
    return subprocess.run(argv, env={**os.environ, **env}, timeout=120).returncode


if __name__ == "__main__":
    sys.exit(main())
