"""Fake external tools: executables written into a bin directory (the ``fake_tools`` fixture of conftest.py).

Where a tool cannot run here (nvidia-smi, ibstat, ibdev2netdev, all_reduce_perf, ...), a fake answers at
the process boundary with recorded output in the real tool's format (``tests/fixtures/``, or the capture
files of the bundled sample node). Each fake is a small Python program driven by a JSON file beside it:
the first answer whose pattern matches its arguments wins (stdout from a file, stderr, exit code, an
optional hang); other arguments fail with exit code 9, like an unknown option.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NCCL_TESTS_FIXTURES = FIXTURES / "nccl-tests"
INFINIBAND_FIXTURES = FIXTURES / "infiniband"
NVIDIA_SMI_FIXTURES = FIXTURES / "nvidia-smi"

_PROGRAM = r'''#!{python} -S
# A fake {name} for collscope's tests (tests/conftest.py): behaviour in {config}.
import fnmatch, json, os, sys, time
config = json.load(open({config!r}))
args = sys.argv[1:]
if config["record_to"]:
    with open(config["record_to"], "w") as f:
        json.dump({{"argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}}, f)
for answer in config["answers"]:
    if fnmatch.fnmatchcase(" ".join(args), answer["args"]):
        break
else:
    sys.stderr.write("fake {name}: unexpected arguments: %s\n" % " ".join(args))
    sys.exit(9)
echo = ["%s set by environment to %s" % (k, os.environ[k]) for k in config["echo_env"] if k in os.environ]
lines = open(answer["stdout_file"]).read().splitlines(True) if answer["stdout_file"] else []
if config["info_at_debug_info"] and os.environ.get("NCCL_DEBUG", "").upper() != "INFO":
    lines, echo = [l for l in lines if " NCCL INFO " not in l], []  # as NCCL: INFO lines only at NCCL_DEBUG=INFO
out = []
for line in lines:
    if echo and not line.startswith("#"):
        out += ["%s:%d:%d [0] NCCL INFO %s\n" % (config["host"], os.getpid(), os.getpid(), e) for e in echo]
        echo = []
    out.append(line)
debug_file = os.environ.get("NCCL_DEBUG_FILE") if config["info_at_debug_info"] else None
if debug_file:  # as NCCL: its own lines go to NCCL_DEBUG_FILE, not to stdout
    with open(debug_file, "a") as f:
        f.write("".join(l for l in out if " NCCL INFO " in l))
    out = [l for l in out if " NCCL INFO " not in l]
sys.stdout.write("".join(out))
sys.stdout.flush()
sys.stderr.write(answer["stderr"])
sys.stderr.flush()
if answer["hang_as"]:
    os.execvp("sleep", [answer["hang_as"], "300"])
sys.exit(answer["exit_code"])
'''


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What a fake tool does for one pattern of arguments."""

    stdout: Path | str | None = None
    """A file whose content is printed (``Path``), literal text (``str``), or nothing."""
    stderr: str = ""
    exit_code: int = 0
    hang_as: str | None = None
    """After printing, hang (``sleep 300``) under this process name, to be killed by a timeout."""


class FakeTools:
    """Writes fake executables into ``bin_dir`` (or another directory) and knows the usual tool set."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        self._texts = 0

    def add(self, name: str, answers: Answer | Mapping[str, Answer] | None = None, *,
            record_to: Path | None = None, echo_env: Sequence[str] = (), host: str = "gpu-a01",
            directory: Path | None = None, info_at_debug_info: bool = False) -> Path:
        """Write the fake ``name``; ``answers`` maps an argument pattern (``fnmatch``, ``"*"`` for any) to an
        :class:`Answer`. ``record_to`` receives ``{"argv", "cwd", "env"}`` of the last call; ``echo_env``
        names NCCL variables echoed as ``NCCL INFO X set by environment to V`` before the first line of
        output that is not a ``#`` header, as NCCL does when they are set; ``info_at_debug_info``: the ``NCCL INFO``
        lines (recorded and echoed) appear only when ``NCCL_DEBUG=INFO``, and go to ``NCCL_DEBUG_FILE`` instead of
        stdout when it is set, as with NCCL. Returns the executable's path."""
        where = self.bin_dir if directory is None else directory
        where.mkdir(parents=True, exist_ok=True)
        if answers is None:
            answers = Answer()
        table = {"*": answers} if isinstance(answers, Answer) else dict(answers)
        config = where / f".{name}.fake.json"
        config.write_text(json.dumps({
            "answers": [{"args": pattern, "stdout_file": self._stdout_file(where, a.stdout), "stderr": a.stderr,
                         "exit_code": a.exit_code, "hang_as": a.hang_as} for pattern, a in table.items()],
            "record_to": None if record_to is None else str(record_to),
            "echo_env": list(echo_env),
            "info_at_debug_info": info_at_debug_info,
            "host": host,
        }))
        return write_executable(where / name, _PROGRAM.format(python=sys.executable, name=name, config=str(config)))

    def _stdout_file(self, where: Path, stdout: Path | str | None) -> str | None:
        if stdout is None or isinstance(stdout, Path):
            if stdout is not None and not stdout.is_file():
                raise FileNotFoundError(f"fake tool output {stdout} does not exist")
            return None if stdout is None else str(stdout)
        self._texts += 1
        path = where / f".fake-output-{self._texts}.txt"
        path.write_text(stdout)
        return str(path)

    # ---- the usual tools ---------------------------------------------------------------------------------

    def nvidia_smi(self, captures: Path) -> Path:
        """nvidia-smi answering ``topo -m``, ``--query-gpu=...``, ``nvlink -s`` and ``-q`` from a capture directory
        (``-q`` from the 8 x H100 fixture with the bundled sample's bus ids where the directory has none)."""
        own_q = captures / "nvidia-smi-q.txt"
        return self.add("nvidia-smi", {
            "topo*": Answer(stdout=captures / "nvidia-smi-topo.txt"),
            "--query-gpu*": Answer(stdout=captures / "nvidia-smi-query-gpu.csv"),
            "nvlink*": Answer(stdout=captures / "nvidia-smi-nvlink.txt"),
            "-q": Answer(stdout=own_q if own_q.exists() else NVIDIA_SMI_FIXTURES / "q-h100-hgx-8gpu-zero-cluster.txt"),
        })

    def ibstat(self, output: Path = INFINIBAND_FIXTURES / "ibstat-tabs-vpi-dualport-roce.txt") -> Path:
        return self.add("ibstat", Answer(stdout=output))

    def ibdev2netdev(self, answer: Answer | None = None) -> Path:
        """``ibdev2netdev -v``; by default the plain listing of ``tests/fixtures/infiniband``."""
        return self.add("ibdev2netdev", answer or Answer(stdout=INFINIBAND_FIXTURES / "ibdev2netdev-plain.txt"))

    def node(self, captures: Path, *, ibdev2netdev: Answer | None = None) -> None:
        """nvidia-smi and ibstat of one captured node (ibdev2netdev from the captures when they hold it)."""
        self.nvidia_smi(captures)
        self.ibstat(captures / "ibstat.txt")
        own = captures / "ibdev2netdev.txt"
        self.ibdev2netdev(ibdev2netdev or (Answer(stdout=own) if own.exists() else None))

    def nccl_tests(self, op: str = "all_reduce",
                   output: Path = NCCL_TESTS_FIXTURES / "all_reduce_perf-v2.19.6-2x4-wrong-redop-root.txt", *,
                   exit_code: int = 0, hang_as: str | None = None, record_to: Path | None = None,
                   echo_env: Sequence[str] = (), directory: Path | None = None,
                   info_at_debug_info: bool = False) -> Path:
        """``<op>_perf`` printing a recorded nccl-tests output, whatever its arguments."""
        return self.add(f"{op}_perf", Answer(stdout=output, exit_code=exit_code, hang_as=hang_as),
                        record_to=record_to, echo_env=echo_env, directory=directory,
                        info_at_debug_info=info_at_debug_info)

    def env(self) -> dict[str, str]:
        """This process's environment (``PATH`` already starts with the bin directory)."""
        return dict(os.environ)


def write_executable(path: Path, body: str) -> Path:
    """Write ``body`` to ``path`` (parents created) and make it executable by everyone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path
