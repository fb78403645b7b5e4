"""Two forms of the size ramp (collscope.analysis.nccl_model.measured.ramp_us) held against the published rows.

The min form charges min(fill, S) bytes at the algorithm's bandwidth (fill = nranks x channels x k, S the message):
the whole fill once the message is larger, the message again when it is smaller. The smooth form, shipped
(``measured.RAMP_FORM``, k = ``measured.RAMP_BYTES_PER_RANK_CHANNEL``), charges fill x S / (fill + S), which is
half the fill where S = fill instead of all of it. For each form and fill size the script scores the scorecard's
rows that NCCL's model predicts (not alltoall, gather, scatter or sendrecv, which have their own terms, and not the
rows whose ``off_reason`` states why they are off) of the sources the terms were chosen on
(``scorecard.FIT_TIME_SOURCES``), then leaves one source (URL) out at a time: the form and size are chosen on the
other sources and the left-out source is scored with them. It prints each candidate's count and the held-out count
against the shipped ramp's on the same rows (the yardstick). The rows of the sources added since are not used to
choose: the last line only reports the candidate the fit rows choose, and the shipped ramp, on them, so that they
stay out of sample (choosing on them would need a refit that names their sources in FIT_TIME_SOURCES).

    .venv/bin/python bench/ramp_form_fit.py
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py, the published rows' reader

import scorecard  # noqa: E402

from collscope.analysis.nccl_model import measured  # noqa: E402
from collscope.analysis.nccl_model.model import NcclGraphInputs  # noqa: E402

KIB = 1024
Candidate = tuple[str, int]
SHIPPED: Candidate = (measured.RAMP_FORM, measured.RAMP_BYTES_PER_RANK_CHANNEL)
CANDIDATES: tuple[Candidate, ...] = (SHIPPED, *(c for c in (
    *(("min", k * KIB) for k in (64, 96, 128, 160, 192, 256)),
    *(("smooth", k * KIB) for k in (96, 128, 160, 192, 224, 256, 320, 384))) if c != SHIPPED))
"""The shipped ramp first: where candidates tie, the first is chosen."""


_SHIPPED_RAMP = measured.ramp_us
"""The library's ramp, taken before any candidate stands in for it."""


def ramp_form(form: str, bytes_per_rank_channel: int) -> Callable[..., float]:
    """A stand-in for ``ramp_us``: the library's ramp with the given form and fill per rank and channel."""
    return functools.partial(_SHIPPED_RAMP, form=form, bytes_per_rank_channel=bytes_per_rank_channel)


def within_by_candidate(rows: Sequence[scorecard.PublishedRow]) -> dict[Candidate, list[bool]]:
    """candidate -> whether each row is within 15% with the ramp of that form and size."""
    shipped = measured.ramp_us
    out = {}
    try:
        for cand in CANDIDATES:
            measured.ramp_us = ramp_form(*cand)  # measured_extra_us reads the module's function at each call
            out[cand] = [s.within for s in scorecard.score(rows)]
    finally:
        measured.ramp_us = shipped
    return out


RING_FILLS_KIB = (48, 64, 96, 128, 160, 192)
"""Candidate fills for Ring alone in the per-algorithm check (:func:`per_algorithm_check`)."""
OTHER_FILLS_KIB = (128, 160, 192, 224, 256)
"""Candidate fills for the other algorithms (Tree, NVLS, NVLSTree, CollNet, PAT) in the same check."""


def per_algorithm_ramp(ring_bytes: int, other_bytes: int) -> Callable[..., float]:
    """A stand-in for ``ramp_us``: the shipped form, one fill for Ring and another for every other algorithm."""
    def ramp(inputs: NcclGraphInputs, op: str, algo: str, proto: str, size_bytes: int, *, version: str = "2.30",
             **_: object) -> float:
        fill = ring_bytes if algo == "Ring" else other_bytes
        return _SHIPPED_RAMP(inputs, op, algo, proto, size_bytes, version=version, form=measured.RAMP_FORM,
                             bytes_per_rank_channel=fill)
    return ramp


def per_algorithm_check(rows: Sequence[scorecard.PublishedRow]) -> None:
    """Would a Ring fill apart from the other algorithms' pay? NCCL chunks them differently (src/enqueue.cc: Ring
    Simple 2 MiB chunks of 512 KiB steps, NVLS chunks cut to 64, 32 and 16 KiB as the message shrinks), and at
    8-512 MiB the models' Ring/Simple figures sit 6-13% below the published ones (geometric mean by op and scope)
    where the NVLS and NVLSTree ones sit within 4%. Chosen on every claimed row of every source (no row is out of
    sample here), then checked leaving one source out at a time; it prints the rows within 15% and the rows more
    than 30% off with no stated reason, beside the shipped ramp's."""
    shipped = measured.ramp_us
    pairs = [(r * KIB, o * KIB) for r in RING_FILLS_KIB for o in OTHER_FILLS_KIB]
    hits: dict[tuple[int, int], list[bool]] = {}
    far: dict[tuple[int, int], int] = {}
    try:
        for pair in pairs:
            measured.ramp_us = per_algorithm_ramp(*pair)
            scored = scorecard.score(rows)
            hits[pair] = [s.within for s in scored]
            far[pair] = sum(s.unexplained for s in scored)
    finally:
        measured.ramp_us = shipped
    base = (SHIPPED[1], SHIPPED[1])
    best = max(pairs, key=lambda p: (sum(hits[p]), p == base))
    held = 0
    for source in sorted({r.source_url for r in rows}):
        train = [i for i, r in enumerate(rows) if r.source_url != source]
        test = [i for i, r in enumerate(rows) if r.source_url == source]
        choice = max(pairs, key=lambda p: (sum(hits[p][i] for i in train), p == base))
        held += sum(hits[choice][i] for i in test)
    print(f"  per algorithm, on all {len(rows)} claimed rows of {len({r.source_url for r in rows})} sources: the "
          f"shipped ramp {sum(hits[base])} within 15% ({far[base]} more than 30% off, unexplained); the best Ring "
          f"fill {best[0] // KIB} KiB with {best[1] // KIB} KiB for the others {sum(hits[best])} ({far[best]}); "
          f"leaving one source out {held}")


def main() -> int:
    claimed = [r for r in scorecard.read_published() if scorecard.on_nccl_model(r) and not r.off_reason]
    rows = [r for r in claimed if r.source_url in scorecard.FIT_TIME_SOURCES]
    later = [r for r in claimed if r.source_url not in scorecard.FIT_TIME_SOURCES]
    hits = within_by_candidate(rows)
    sources = sorted({r.source_url for r in rows})
    print(f"{len(rows)} rows from {len(sources)} sources the terms were chosen on (point-to-point ops and rows "
          "with a stated reason left out)")
    for cand in CANDIDATES:
        mark = "  (shipped)" if cand == SHIPPED else ""
        print(f"  {cand[0]:<6} {cand[1] // KIB:>4} KiB per rank and channel: {sum(hits[cand])}/{len(rows)}{mark}")
    held = held_shipped = 0
    for source in sources:
        train = [i for i, r in enumerate(rows) if r.source_url != source]
        test = [i for i, r in enumerate(rows) if r.source_url == source]
        best = max(CANDIDATES, key=lambda c: sum(hits[c][i] for i in train))  # ties: the first, the shipped form
        held += sum(hits[best][i] for i in test)
        held_shipped += sum(hits[SHIPPED][i] for i in test)
    print(f"  leaving one source out: {held}/{len(rows)} within 15% with the form and size chosen on the others "
          f"(the shipped ramp: {held_shipped})")
    if later:
        chosen = max(CANDIDATES, key=lambda c: sum(hits[c]))
        on_later = within_by_candidate(later)
        print(f"  {len(later)} rows of {len({r.source_url for r in later})} sources added since (not used to choose): "
              f"{sum(on_later[SHIPPED])} within 15% with the shipped ramp, {sum(on_later[chosen])} with "
              f"{chosen[0]} {chosen[1] // KIB} KiB (the fit rows' choice)")
        best_later = max(CANDIDATES, key=lambda c: sum(on_later[c]))
        print(f"  (the best candidate on them alone, {best_later[0]} {best_later[1] // KIB} KiB: "
              f"{sum(on_later[best_later])}; a refit that chooses on them makes them in-sample)")
    per_algorithm_check(claimed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
