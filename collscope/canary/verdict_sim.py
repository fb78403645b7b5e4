"""Synthetic canary frames with known truth: what the verdict's tests and ``bench/canary_power.py`` judge.

One op measured over a size grid on both sides in ABBA blocks (even blocks run A then B, odd blocks B then A),
times from a latency + bandwidth model, multiplied by

* ``effect(size)``: B's true time ratio at each size (1.30 = B 30% slower there), 1 for A;
* lognormal run noise: ``noise`` per (run, size), plus ``shared_noise`` per run common to all its sizes (a busy
  neighbour slows a whole run);
* ``drift``: a linear slowdown per run in time order (``1 + drift * position``), the same for both sides.

Each cell holds ``repeats`` out-of-place records and as many in-place ones (nccl-tests' shape; the in-place
ones 5% slower, which the verdict must ignore). ``interleaved=False`` gives A's runs all before B's (two
result sets taken at different times), ``block`` being the run index within each side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from collscope.vocab.ops import busbw_factor

__all__ = ["DEFAULT_SIZES", "synthetic_frame"]

DEFAULT_SIZES: tuple[int, ...] = tuple(2**k for k in range(10, 29, 2))
"""1K to 256M by factors of 4 (10 sizes)."""


def _no_effect(size_bytes: int) -> float:
    return 1.0


def synthetic_frame(*, blocks: int = 8, sizes: Sequence[int] = DEFAULT_SIZES, op: str = "all_reduce",
                    nranks: int = 2, noise: float = 0.03, shared_noise: float = 0.0,
                    effect: Callable[[int], float] = _no_effect, drift: float = 0.0, repeats: int = 1,
                    interleaved: bool = True, seed: int | np.random.Generator = 0,
                    alpha_us: float = 20.0, busbw_gbps: float = 10.0) -> pd.DataFrame:
    """A canary frame with the columns the verdict reads (op, size_bytes, time_us, busbw_gbps, in_place,
    nranks, nnodes, side, block, point_id); see the module docstring for the model."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    factor = busbw_factor(op, nranks)
    base = alpha_us + sizes_arr * factor / (busbw_gbps * 1e3)
    truth = {"A": np.ones(len(sizes_arr)), "B": np.array([effect(int(s)) for s in sizes_arr])}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("size_bytes", "time_us", "in_place", "side", "block")}
    for block in range(blocks):
        order = ("A", "B") if block % 2 == 0 else ("B", "A")
        for slot, side in enumerate(order):
            position = 2 * block + slot if interleaved else (0 if side == "A" else blocks) + block
            run = (1 + drift * position) * np.exp(rng.normal(0.0, shared_noise))
            cell = base * truth[side] * run * np.exp(rng.normal(0.0, noise, len(sizes_arr)))
            for in_place, slower in ((False, 1.0), (True, 1.05)):
                for _ in range(repeats):
                    jitter = np.exp(rng.normal(0.0, noise / 10, len(sizes_arr)))
                    cols["size_bytes"].append(sizes_arr)
                    cols["time_us"].append(cell * slower * jitter)
                    cols["in_place"].append(np.full(len(sizes_arr), in_place))
                    cols["side"].append(np.full(len(sizes_arr), side))
                    cols["block"].append(np.full(len(sizes_arr), block))
    size = np.concatenate(cols["size_bytes"])
    time_us = np.concatenate(cols["time_us"])
    side_col = np.concatenate(cols["side"])
    block_col = np.concatenate(cols["block"])
    return pd.DataFrame({
        "op": op, "size_bytes": size, "time_us": time_us,
        "busbw_gbps": size / (time_us * 1e3) * factor, "in_place": np.concatenate(cols["in_place"]),
        "nranks": nranks, "nnodes": 1, "side": side_col, "block": block_col,
        "point_id": [f"{s}-{b:03d}" for s, b in zip(side_col, block_col, strict=True)]})
