"""One line per (op, size) that says whether the job got what its fabric gives at that size."""

from __future__ import annotations

__all__ = ["verdict", "human_bytes", "human_us"]


def human_bytes(size_bytes: int) -> str:
    """Decimal units, as nccl-tests' GB/s: 26255360 -> ``26.3 MB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size_bytes >= scale:
            value = size_bytes / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{size_bytes} B"


def human_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} us"


def verdict(op: str, size_bytes: int, calls_per_step: float | None, busbw: float | None, bench: float | None,
            model: float | None, exposed_per_step_us: float | None, *, has_steps: bool = True) -> str:
    what = f"{op} {human_bytes(size_bytes)}"
    if calls_per_step and calls_per_step >= 1.5:
        what += f" (x{calls_per_step:.3g} {'per step' if has_steps else 'per rank in the trace'})"
    if busbw is None:
        head = f"{what}: bandwidth unknown (no duration)"
    elif bench:
        head = (f"{what}: {busbw / bench:.0%} of what this fabric gives at that size "
                f"({busbw:.3g} vs {bench:.3g} GB/s busbw in the sweep)")
    elif model:
        head = f"{what}: {busbw / model:.0%} of the model's {model:.3g} GB/s busbw ({busbw:.3g} GB/s)"
    else:
        head = f"{what}: {busbw:.3g} GB/s busbw (no sweep or model to compare with)"
    if exposed_per_step_us is not None:
        head += f"; {human_us(exposed_per_step_us)} exposed per step"
    return head
