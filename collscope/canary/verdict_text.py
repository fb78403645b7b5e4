"""The words of the canary verdict: one sentence per rule that fired (with its numbers), and the terminal text
(:func:`collscope.canary.verdict.render_verdict` calls :func:`render_lines`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from collscope.analysis.recommend.timing import format_us
from collscope.canary.verdict_stats import MORE_BLOCKS_CAP
from collscope.canary.verdict_types import RangeChange
from collscope.errors import printable
from collscope.units import format_size

__all__ = ["pct", "share_pct", "range_label", "decision_reasons", "render_lines"]

Row = tuple[str, str, float, float, str, str, str]


def pct(x: float) -> str:
    """``0.0734`` -> ``+7.3%`` (two decimals under 1%: ``+0.21%``); ``n/a`` when not a number."""
    if not math.isfinite(x):
        return "n/a"
    return f"{x * 100:+.2f}%" if abs(x) < 0.01 else f"{x * 100:+.1f}%"


def share_pct(x: float) -> str:
    return f"{x * 100:.1f}%" if x * 100 >= 0.05 or x == 0 else "<0.1%"


def _limit(x: float) -> str:
    return f"{x * 100:g}%"


def range_label(min_bytes: int, max_bytes: int) -> str:
    """``64K-4M``, or one size."""
    if min_bytes == max_bytes:
        return format_size(min_bytes)
    return f"{format_size(min_bytes)}-{format_size(max_bytes)}"


def _interval(change: tuple[float, float, float]) -> str:
    return f"{pct(change[0])} [{pct(change[1])}, {pct(change[2])}]"


def _range_words(r: RangeChange, noise: tuple[float, float]) -> str:
    c = r.busbw_change
    per_block, threshold = noise
    noise_text = (f"the {threshold * 100:.1f}% an A/A canary of these blocks stays within at every size (A/A "
                  f"noise {per_block * 100:.1f}% per block)" if math.isfinite(threshold) else "the A/A noise")
    return (f"{r.op} {range_label(r.min_bytes, r.max_bytes)} {r.verdict}: busbw "
            f"{_interval((c.estimate, c.low, c.high))}, beyond {noise_text}")


def decision_reasons(*, decision: str, change: tuple[float, float, float], confidence: float, n: int,
                     interleaved: bool, max_loss: float, range_share: float, ranges: Sequence[RangeChange],
                     range_noise: Sequence[tuple[float, float]], heavy: Sequence[int], more: int | None) -> list[str]:
    """One plain sentence per rule that fired, in the order the rules are applied."""
    over = f"over {n} blocks" if interleaved else f"over {n} runs per side, not interleaved"
    head = f"workload time {_interval(change)} ({confidence * 100:g}% CI {over})"
    limit = _limit(max_loss)
    out = []
    if change[1] > max_loss:
        out.append(f"{head}, entirely above the {limit} max loss")
    elif change[2] <= max_loss:
        better = " (B is faster)" if change[2] < -max_loss else ""
        out.append(f"{head}, entirely below the {limit} max loss{better}")
    else:
        out.append(f"{head} straddles the {limit} max loss")
    for i in heavy:
        r = ranges[i]
        out.append(f"{_range_words(r, range_noise[i])} and the {limit} max loss, and carries "
                   f"{share_pct(r.time_share)} of the workload's time (more than {_limit(range_share)})")
    if decision != "no-go":
        light = [i for i, r in enumerate(ranges) if r.verdict == "loses"]
        for i in light:
            out.append(f"{_range_words(ranges[i], range_noise[i])}, but carries only "
                       f"{share_pct(ranges[i].time_share)} of the workload's time (at most {_limit(range_share)})")
        out.append(f"no range carrying more than {_limit(range_share)} of the workload's time loses beyond noise")
    if decision == "inconclusive":
        unit = "blocks" if interleaved else "runs per side"
        if more is not None:
            out.append(f"about {more} more {unit} would narrow the interval enough to decide, at the observed "
                       "noise")
        else:
            out.append(f"no practical number of more {unit} (up to {MORE_BLOCKS_CAP}) would decide: the "
                       f"estimate {pct(change[0])} sits too close to the {limit} max loss")
    return out


def _table(rows: Sequence[Row], confidence: float) -> list[str]:
    head = ("op", "sizes", "A GB/s", "B GB/s", f"busbw change [{confidence * 100:g}% CI]", "time share", "verdict")
    cells = [head] + [(printable(op), sizes, f"{a:.3g}", f"{b:.3g}", change, share, verdict)
                      for op, sizes, a, b, change, share, verdict in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    right = {2, 3, 5}
    return ["  " + "  ".join(c.rjust(w) if i in right else c.ljust(w)
                             for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
            for row in cells]


def render_lines(*, decision: str, exit_code: int, change: tuple[float, float, float], confidence: float,
                 a_time_us: float, b_time_us: float, blocks: int, interleaved: bool, aa_noise: float,
                 source: str, rows: Sequence[Row], reasons: Sequence[str], caveats: Sequence[str]) -> str:
    lines = [f"{decision.upper()} (exit {exit_code}): workload time B against A {_interval(change)}, "
             f"{confidence * 100:g}% CI"]
    how = f"{blocks} ABBA blocks" if interleaved else f"{blocks} runs per side, not interleaved"
    times = (f"A {format_us(a_time_us)}, B {format_us(b_time_us)}" if math.isfinite(a_time_us) else "n/a")
    lines.append(f"time per step: {times} (medians over {how})")
    lines.append(f"workload: {printable(source)}")
    noise = f"{aa_noise * 100:.1f}% per block" if math.isfinite(aa_noise) else "unknown (needs 3 blocks)"
    lines.append(f"A/A noise of the workload time: {noise}")
    if rows:
        lines.append("ranges (B against A):")
        lines += _table(rows, confidence)
    lines.append("reasons:")
    lines += [f"  - {printable(r)}" for r in reasons]
    if caveats:
        lines.append("caveats:")
        lines += [f"  - {printable(c)}" for c in caveats]
    return "\n".join(lines) + "\n"
