"""The GPU side of the device check (``device_check.py``): one process, one rank, one NCCL communicator.

Run as ``python tests/gpu/device_worker.py MODE --out FILE.json`` by ``device_check.py``, which judges the
figures; nothing here decides pass or fail. Modes:

``probe``   torch's version, CUDA build, visible GPUs, NCCL version (no process group; safe without CUDA).
``floor``   in-place 8 B all_reduce batches of 20/200/2000 calls, each timed by CUDA events and by the host
            clock around the same batch (the dispatch floor: on one rank NCCL enqueues no copy for an
            in-place sum, NCCL src/device/onerank.cu ``ncclLaunchOneRank``).
``gather``  out-of-place all_gather on one rank (a device-to-device copy inside NCCL, same source) against
            ``out.copy_(inp)`` at 16 MiB .. 1 GiB, batches interleaved, CUDA events.
``cost``    8 B all_reduce, 2000 calls: per-call time; the caller runs it under NCCL_DEBUG=WARN and under
            NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL.

The communicator is made as the torch harness makes it (``init_process_group("nccl")`` with rank 0 of 1 over
``MASTER_ADDR``/``MASTER_PORT`` from the environment), with ``device_id`` where this torch takes it, so NCCL's
init happens before the timed batches. Timing as the harness: ``torch.cuda.synchronize()``, a start event,
the batch, an end event, ``end.synchronize()``; the host clock is read just before the start event and just
after the end event's synchronize.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

MIB = 1 << 20
FLOOR_ITERS = (20, 200, 2000)
FLOOR_REPEATS = 7
GATHER_SIZES = (16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB)
GATHER_ROUNDS = 5
GATHER_ITERS = 10
COST_ITERS = 2000
COST_REPEATS = 3
DEVICE = "cuda"
"""Where the buffers live (a CPU test of this module's arithmetic sets ``cpu``)."""


def probe() -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:
        return {"torch": None, "error": f"import torch failed: {exc}"}
    doc: dict[str, Any] = {"torch": torch.__version__, "cuda_build": torch.version.cuda,
                           "cuda_available": bool(torch.cuda.is_available()), "device_count": 0, "devices": [],
                           "nccl": None, "nccl_available": False}
    try:
        import torch.distributed as dist

        doc["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
    except ImportError:
        pass
    if doc["cuda_available"]:
        doc["device_count"] = torch.cuda.device_count()
        doc["devices"] = [torch.cuda.get_device_name(i) for i in range(doc["device_count"])]
        try:
            v = torch.cuda.nccl.version()
            doc["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception as exc:  # a CUDA build without NCCL
            doc["nccl"] = None
            doc["error"] = f"torch.cuda.nccl.version(): {exc}"
    return doc


def _init() -> tuple[Any, Any]:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    device = torch.device("cuda", 0)
    try:
        dist.init_process_group("nccl", init_method="env://", rank=0, world_size=1, device_id=device)
    except TypeError:  # torch < 2.3 has no device_id
        dist.init_process_group("nccl", init_method="env://", rank=0, world_size=1)
    return torch, dist


def _batch_us(torch: Any, call: Callable[[], Any], iters: int) -> tuple[float, float]:
    """(CUDA-event, host) microseconds per call over one batch of ``iters`` calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    start.record()
    for _ in range(iters):
        call()
    end.record()
    end.synchronize()
    t1 = time.perf_counter_ns()
    return start.elapsed_time(end) * 1e3 / iters, (t1 - t0) / 1e3 / iters


def _small_all_reduce(torch: Any, dist: Any) -> Callable[[], Any]:
    buf = torch.zeros(2, dtype=torch.float32, device=DEVICE)  # 8 bytes, in place
    return partial(dist.all_reduce, buf)


def floor() -> dict[str, Any]:
    torch, dist = _init()
    call = _small_all_reduce(torch, dist)
    for _ in range(100):
        call()
    out: dict[str, Any] = {}
    for iters in FLOOR_ITERS:
        samples = [_batch_us(torch, call, iters) for _ in range(FLOOR_REPEATS)]
        out[str(iters)] = {"event_us": statistics.median(s[0] for s in samples),
                           "host_us": statistics.median(s[1] for s in samples),
                           "samples": [[round(e, 4), round(h, 4)] for e, h in samples]}
    dist.destroy_process_group()
    return {"per_call": out, "repeats": FLOOR_REPEATS}


def gather() -> dict[str, Any]:
    torch, dist = _init()
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    rows = []
    for size in GATHER_SIZES:
        inp = torch.arange(size // 4, dtype=torch.float32, device=DEVICE)
        out = torch.empty_like(inp)
        nccl_call = partial(all_gather, out, inp)
        copy_call = partial(out.copy_, inp)
        for _ in range(3):
            nccl_call()
            copy_call()
        nccl_us, copy_us = [], []
        for _ in range(GATHER_ROUNDS):
            nccl_us.append(_batch_us(torch, nccl_call, GATHER_ITERS)[0])
            copy_us.append(_batch_us(torch, copy_call, GATHER_ITERS)[0])
        out.zero_()
        nccl_call()
        torch.cuda.synchronize()
        rows.append({"size_bytes": size, "nccl_us": statistics.median(nccl_us), "copy_us": statistics.median(copy_us),
                     "nccl_samples": [round(x, 3) for x in nccl_us], "copy_samples": [round(x, 3) for x in copy_us],
                     "copied_right": bool(torch.equal(out, inp))})
        del inp, out
        torch.cuda.empty_cache()
    dist.destroy_process_group()
    return {"sizes": rows, "iters": GATHER_ITERS, "rounds": GATHER_ROUNDS}


def cost() -> dict[str, Any]:
    torch, dist = _init()
    call = _small_all_reduce(torch, dist)
    for _ in range(100):
        call()
    samples = [_batch_us(torch, call, COST_ITERS) for _ in range(COST_REPEATS)]
    dist.destroy_process_group()
    return {"iters": COST_ITERS, "event_us": statistics.median(s[0] for s in samples),
            "host_us": statistics.median(s[1] for s in samples), "samples": [list(s) for s in samples]}


MODES: dict[str, Callable[[], dict[str, Any]]] = {"probe": probe, "floor": floor, "gather": gather, "cost": cost}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--out", required=True, help="write the figures (JSON) here")
    args = parser.parse_args(argv)
    doc = MODES[args.mode]()
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
