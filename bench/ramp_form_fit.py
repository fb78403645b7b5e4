"""Two forms of the size ramp (collscope.analysis.nccl_model.measured.ramp_us) held against the published rows.

The shipped ramp charges min(fill, S) bytes at the algorithm's bandwidth (fill = nranks x channels x 128 KiB, S the
message): the whole fill once the message is larger, the message again when it is smaller. The smooth form charges
fill x S / (fill + S), which is half the fill where S = fill instead of all of it. For each form and fill size the
script scores the scorecard's rows that NCCL's model predicts (not alltoall, which has its own terms, and not the
rows whose ``off_reason`` states why they are off), then leaves one source (URL) out at a time: the form and size are
chosen on the other sources and the left-out source is scored with them. It prints each candidate's count and the
held-out count against the shipped ramp's on the same rows (the yardstick).

    .venv/bin/python bench/ramp_form_fit.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py, the published rows' reader

import scorecard  # noqa: E402

from collscope.analysis.nccl_model import measured  # noqa: E402
from collscope.analysis.nccl_model import model as nccl  # noqa: E402

KIB = 1024
Candidate = tuple[str, int]
SHIPPED: Candidate = ("min", measured.RAMP_BYTES_PER_RANK_CHANNEL)
CANDIDATES: tuple[Candidate, ...] = (*(("min", k * KIB) for k in (64, 96, 128, 160, 192, 256)),
                                     *(("smooth", k * KIB) for k in (96, 128, 160, 192, 224, 256, 320, 384)))


def ramp_form(form: str, bytes_per_rank_channel: int) -> Callable[..., float]:
    """A stand-in for ``ramp_us`` with the given form and fill per rank and channel."""
    def ramp(inputs: nccl.NcclGraphInputs, op: str, algo: str, proto: str, size_bytes: int, *,
             version: str = "2.30") -> float:
        if proto != "Simple" or size_bytes <= 0:
            return 0.0
        bw = nccl.nccl_bandwidth(inputs, op, algo, proto, version=version)
        if bw <= 0:
            return 0.0
        fill = inputs.nranks * measured.runtime_channels(inputs, algo) * bytes_per_rank_channel
        charged = min(fill, size_bytes) if form == "min" else fill * size_bytes / (fill + size_bytes)
        return charged / (1000 * bw)
    return ramp


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
    rows = [r for r in scorecard.read_published() if r.op not in scorecard.FIT_OPS and not r.off_reason]
    hits = within_by_candidate(rows)
    sources = sorted({r.source_url for r in rows})
    print(f"{len(rows)} rows from {len(sources)} sources (alltoall and rows with a stated reason left out)")
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
