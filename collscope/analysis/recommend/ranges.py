r"""Runs of adjacent measured sizes with one label merged into :class:`SizeRange`\ s (edges are measured sizes)."""

from __future__ import annotations

from collections.abc import Iterable

from collscope.analysis.recommend.records import SizeRange, SizeResult

__all__ = ["merge_ranges", "range_of"]


def merge_ranges(items: Iterable[tuple[int, str | None, SizeResult]]) -> list[SizeRange]:
    """Merge runs of adjacent sizes with the same label (None breaks a run) into SizeRanges."""
    out: list[SizeRange] = []
    run: list[tuple[int, str, SizeResult]] = []

    def close() -> None:
        if run:
            out.append(range_of(run[0][1], [s for _, _, s in run]))
            run.clear()

    for size, label, result in items:
        if label is None or (run and run[-1][1] != label):
            close()
        if label is not None:
            run.append((size, label, result))
    close()
    return out


def range_of(config: str, results: list[SizeResult]) -> SizeRange:
    gains, repeats, noises = [], [], []
    for r in results:
        assert r.baseline is not None
        cand = r.candidate(config)
        repeats.append(r.baseline.repeats if cand is None else min(r.baseline.repeats, cand.stat.repeats))
        gains.append(0.0 if cand is None else cand.gain)
        noises.append(r.baseline.spread if cand is None else cand.noise)
    return SizeRange(config=config, min_bytes=results[0].size_bytes, max_bytes=results[-1].size_bytes,
                     sizes=tuple(r.size_bytes for r in results), gain_min=min(gains), gain_max=max(gains),
                     repeats_min=min(repeats), noise_max=max(noises))
