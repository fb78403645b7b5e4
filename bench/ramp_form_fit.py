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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
