"""A tiny real DDP training on 2 CPU ranks (gloo) under torch.profiler: one Kineto trace per rank.

Run as ``python ddp_job.py OUT_DIR`` (it spawns its 2 ranks), or as ``srun -N 2 --ntasks-per-node=1 python
ddp_job.py OUT_DIR`` with ``MASTER_ADDR``/``MASTER_PORT`` set (one rank per task: ``SLURM_PROCID``, 2 tasks;
OUT_DIR on a file system every node sees); it writes ``OUT_DIR/traces/rank<N>.json``, the Flight Recorder dump of
each rank (``OUT_DIR/fr/rank<N>.json``, ``_dump_fr_trace_json()``) and ``OUT_DIR/expected.json`` (the model's
parameter bytes, the explicit collectives with their sizes in nccl-tests' convention, the steps).
Used by ``test_ddp_gloo.py``; the sizes are chosen here so the test can check them exactly.

``--late-rank R --late-ms M`` plants a straggler: in every step rank R sleeps M ms just before its all_gather,
so the other rank waits about M ms inside that call (a blocking call with nothing else in flight: the gradient
buckets are done by then, so exactly one call per step carries the wait); ``expected.json`` then also holds
``late_rank`` and ``late_ms`` (``test_ddp_late_rank.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

WORLD = 2
STEPS = 5  # schedule: wait 1, warmup 1, active 3
LAYERS = [(64, 256), (256, 256), (256, 256), (256, 16)]
BUCKET_CAP_MB = 0.15  # about 39k floats: several buckets for a model of ~150k parameters
GATHER_ELEMS, SCATTER_ELEMS, BCAST_ELEMS = 3000, 4096, 1234  # per rank; float32


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(rank: int, out_dir: str, port: int, master_addr: str = "127.0.0.1", late_rank: int | None = None,
         late_ms: float = 0.0) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.update(MASTER_ADDR=master_addr, MASTER_PORT=str(port), TORCH_FR_BUFFER_SIZE="2000")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(LAYERS):
        layers.append(torch.nn.Linear(a, b))
        if i < len(LAYERS) - 1:
            layers.append(torch.nn.ReLU())
    model = DistributedDataParallel(torch.nn.Sequential(*layers), bucket_cap_mb=BUCKET_CAP_MB)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, LAYERS[0][0]), torch.randn(32, LAYERS[-1][1])

    def export(prof: profile) -> None:
        prof.export_chrome_trace(str(Path(out_dir) / "traces" / f"rank{rank}.json"))

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=STEPS - 2), on_trace_ready=export) as prof:
        for _ in range(STEPS):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            out = [torch.empty(GATHER_ELEMS) for _ in range(WORLD)]
            if rank == late_rank:  # the planted straggler: late for the all_gather, the others wait for it
                time.sleep(late_ms / 1000)
            dist.all_gather(out, torch.ones(GATHER_ELEMS))
            shard = torch.empty(SCATTER_ELEMS // WORLD)
            dist.reduce_scatter_tensor(shard, torch.ones(SCATTER_ELEMS))
            dist.broadcast(torch.ones(BCAST_ELEMS), src=0)
            prof.step()
    fr = torch._C._distributed_c10d._dump_fr_trace_json()
    (Path(out_dir) / "fr" / f"rank{rank}.json").write_text(fr if isinstance(fr, str) else fr.decode())
    if rank == 0:
        param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        expected = {"param_bytes": param_bytes, "world_size": WORLD, "active_steps": STEPS - 2, "steps": STEPS,
                    "explicit": [{"op": "all_gather", "size_bytes": GATHER_ELEMS * 4 * WORLD},
                                 {"op": "reduce_scatter", "size_bytes": SCATTER_ELEMS * 4},
                                 {"op": "broadcast", "size_bytes": BCAST_ELEMS * 4}]}
        if late_rank is not None:
            expected.update(late_rank=late_rank, late_ms=late_ms)
        (Path(out_dir) / "expected.json").write_text(json.dumps(expected))
    dist.destroy_process_group()


LATE_TOLERANCE = 0.2
"""How close the waits ``collscope trace`` finds must come to the planted delay (issue 25: within 20%)."""


def check_late_rank_report(doc: dict[str, Any], expected: dict[str, Any]) -> None:
    """Assert what ``collscope trace --json`` must say of a job run with ``--late-rank R --late-ms M``: R first in
    ``late_ranks``, last at every step's all_gather, the others' summed wait ``M x steps`` and, per all_gather,
    the other rank's ``wait_us`` and the call's ``late_by_us`` about M with R as ``late_rank``, while the transfer
    and R's own wait stay small; per step the other rank waited at least about M, more than its transfer (its step
    also holds its waits at the gradient buckets, which run concurrently and add up past the step's communication,
    so only M's lower bound holds there), and R did not.
    """
    from pytest import approx  # here: the ranks (spawned, or srun tasks) import this file without pytest

    late, planted_us, steps = expected["late_rank"], expected["late_ms"] * 1000, expected["active_steps"]
    near = {"rel": LATE_TOLERANCE}
    table = doc["late_ranks"]
    assert table and table[0]["rank"] == late, table
    top = table[0]
    assert steps <= top["last_count"] <= top["matched_calls"], top
    assert top["others_waited_us"] == approx(planted_us * steps, **near), (top, planted_us)
    gathers = [c for c in doc["collectives"] if c["op"] == "all_gather"]
    assert len(gathers) == steps * expected["world_size"], gathers
    for c in gathers:
        assert c["late_rank"] == late and c["late_by_us"] == approx(planted_us, **near), c
        assert c["transfer_us"] < LATE_TOLERANCE * planted_us, c
        if c["rank"] == late:
            assert c["wait_us"] < LATE_TOLERANCE * planted_us, c
        else:
            assert c["wait_us"] == approx(planted_us, **near), c
    assert len(doc["steps"]) == steps * expected["world_size"], doc["steps"]
    for s in doc["steps"]:
        if s["rank"] == late:
            assert s["wait_us"] < LATE_TOLERANCE * planted_us, s
        else:
            assert s["wait_us"] >= (1 - LATE_TOLERANCE) * planted_us and s["transfer_us"] < s["wait_us"], s


def main(out_dir: str, late_rank: int | None = None, late_ms: float = 0.0) -> None:
    import torch.multiprocessing as mp

    (Path(out_dir) / "traces").mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "fr").mkdir(exist_ok=True)
    if "SLURM_PROCID" in os.environ:  # one rank of an srun step
        if int(os.environ["SLURM_NTASKS"]) != WORLD:
            raise SystemExit(f"ddp_job.py runs {WORLD} ranks, srun started {os.environ['SLURM_NTASKS']}")
        _run(int(os.environ["SLURM_PROCID"]), out_dir, int(os.environ["MASTER_PORT"]), os.environ["MASTER_ADDR"],
             late_rank, late_ms)
        return
    mp.start_processes(_run, args=(out_dir, _free_port(), "127.0.0.1", late_rank, late_ms), nprocs=WORLD, join=True,
                       start_method="spawn")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--late-rank", type=int, default=None, choices=range(WORLD),
                        help="the rank made late on purpose (with --late-ms)")
    parser.add_argument("--late-ms", type=float, default=0.0, help="how late, in ms, for the all_gather of every step")
    args = parser.parse_args()
    if (args.late_rank is None) != (args.late_ms == 0.0) or args.late_ms < 0:
        parser.error(f"--late-rank and a positive --late-ms go together (got {args.late_rank}, {args.late_ms})")
    return args


if __name__ == "__main__":
    _a = _args()
    main(_a.out_dir, _a.late_rank, _a.late_ms)
