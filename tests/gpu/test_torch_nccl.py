"""The torch NCCL harness on real GPUs: 2 ranks when there are 2 GPUs, else 1. Skipped without CUDA.

The sizes a run must report come from the ladder itself (:func:`expected_sizes`), never from a number written
here: ``-b 8 -e 64M -f 8`` ends at 16 MiB (8 * 8**7), and a hard-coded 32 MiB once failed on every GPU machine.
``tests/collectives/test_torch_gpu_paths.py`` checks :func:`expected_sizes` on CPU.
"""

from __future__ import annotations

import pytest

from collscope.collectives.measure import ELEM_SIZE
from collscope.collectives.record import busbw_factor
from collscope.collectives.sizes import size_ladder
from collscope.units import parse_size
from tests.collectives.launch import clean_env, need_torchrun, records, run, torchrun_argv

LADDER = ("-b", "8", "-e", "64M", "-f", "8")
"""The sizes every op runs: collscope bench's -b/-e/-f, as nccl-tests takes them."""


def expected_sizes(op: str, nranks: int, ladder: tuple[str, ...] = LADDER, dtype: str = "float32") -> list[int]:
    """The sizes ``collscope bench <ladder>`` measures for ``op`` on ``nranks`` ranks (collscope.collectives.sizes)."""
    args = dict(zip(ladder[::2], ladder[1::2], strict=True))
    return size_ladder(parse_size(args["-b"]), parse_size(args["-e"]), float(args["-f"]), elem_size=ELEM_SIZE[dtype],
                       op=op, nranks=nranks)

torch = pytest.importorskip("torch", reason="torch not installed: pip install 'collscope[torch]'")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")

OPS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"]


def _nranks() -> int:
    return min(2, torch.cuda.device_count())


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "cuda-graph"])
def test_nccl_harness(tmp_path, op, graph):
    torchrun = need_torchrun()
    n = _nranks()
    out = tmp_path / "r.jsonl"
    args = ["--engine", "torch", "--backend", "nccl", "--op", op, *LADDER, "--iters", "20",
            "--warmup", "5", "--check", "--out", str(out)] + (["--cuda-graph"] if graph else [])
    res = run(torchrun_argv(torchrun, n, *args), clean_env(), timeout_s=300)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = records(out)
    assert [r.size_bytes for r in recs] == expected_sizes(op, n)
    for r in recs:
        assert (r.engine, r.backend, r.nranks) == ("torch", "nccl", n)
        assert r.wrong == 0 and r.ok and r.time_us > 0
        assert r.nccl_version and r.nccl_version[0].isdigit()
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * busbw_factor(op, n))
