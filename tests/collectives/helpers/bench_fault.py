"""`collscope bench` with a fault injected on one rank: for tests only, never used by the library.

COLLSCOPE_TEST_DIE_RANK=R picks the rank; COLLSCOPE_TEST_DIE_MODE says what it does at its second size:
``raise`` an exception, ``exit`` the process at once (os._exit(3)), ``hang`` (sleep for an hour), or
``corrupt`` one element of every checked result (the run completes with wrong values).
"""

from __future__ import annotations

import os
import time
from typing import Any

from collscope.cli import main
from collscope.collectives.harness import mpi as mpi_bench
from collscope.collectives.harness import torch as torch_bench
from collscope.collectives.ranks import rank_info


def _faulty(original: Any, mode: str) -> Any:
    calls = [0]

    def timed(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] >= 2:
            if mode == "raise":
                raise RuntimeError("injected failure (tests/collectives/helpers/bench_fault.py)")
            if mode == "exit":
                os._exit(3)
            if mode == "hang":
                time.sleep(3600)
        return original(*args, **kwargs)

    return timed


def _corrupting(original: Any) -> Any:
    def wrong(self: Any) -> int:
        self.out[0] += 1
        return int(original(self))

    return wrong


def _install() -> None:
    die = os.environ.get("COLLSCOPE_TEST_DIE_RANK")
    if die is None or rank_info(os.environ).rank != int(die):
        return
    mode = os.environ.get("COLLSCOPE_TEST_DIE_MODE", "raise")
    if mode == "corrupt":
        mpi_bench._Buffers.out = property(lambda self: self.recv)  # type: ignore[attr-defined]
        mpi_bench._Buffers.wrong = _corrupting(mpi_bench._Buffers.wrong)  # type: ignore[method-assign]
        torch_bench._Tensors.wrong = _corrupting(torch_bench._Tensors.wrong)  # type: ignore[method-assign]
        return
    mpi_bench.time_batch_ns = _faulty(mpi_bench.time_batch_ns, mode)
    torch_bench.time_batch_ns = _faulty(torch_bench.time_batch_ns, mode)
    torch_bench._time_batch_cuda = _faulty(torch_bench._time_batch_cuda, mode)


if __name__ == "__main__":
    _install()
    main(prog_name="collscope")
