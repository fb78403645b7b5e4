"""The fit of the network's per-call cost (collscope.analysis.nccl_model.measured.NET_EXTRA_US) on published rows.

The rows are the scorecard's multi-node rows that NCCL's model predicts (not alltoall, gather, scatter or sendrecv,
which have their own terms, and not the rows whose ``off_reason`` states why they are off). For each candidate cost the
script scores every row with the library, then leaves one source (URL) out at a time: the cost is chosen on the other
sources (most rows within 15%, the smaller cost on a tie) and the left-out source is scored with it. It prints the
shipped cost's count, the count without the term (the yardstick), and the held-out count with and without it.

    .venv/bin/python bench/net_term_fit.py
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py, the published rows' reader

import scorecard  # noqa: E402

from collscope.analysis.nccl_model import measured  # noqa: E402

COSTS_US = (0.0, 10.0, 20.0, 25.0, 30.0, 35.0, 40.0, 50.0)


def within_by_cost(rows: Sequence[scorecard.PublishedRow]) -> dict[float, list[bool]]:
    """cost -> whether each row is within 15% with the network term at that cost."""
    out = {}
    shipped = measured.NET_EXTRA_US
    try:
        for cost in COSTS_US:
            measured.NET_EXTRA_US = cost  # net_us reads the module's constant at each call
            out[cost] = [s.within for s in scorecard.score(rows)]
    finally:
        measured.NET_EXTRA_US = shipped
    return out


def main() -> int:
    rows = [r for r in scorecard.read_published()
            if r.nnodes > 1 and scorecard.on_nccl_model(r) and not r.off_reason]
    hits = within_by_cost(rows)
    sources = sorted({r.source_url for r in rows})
    print(f"{len(rows)} multi-node rows from {len(sources)} sources (point-to-point ops and rows with a stated "
          "reason left out)")
    print(f"  without the term (the yardstick): {sum(hits[0.0])}/{len(rows)} within 15%")
    print(f"  shipped cost {measured.NET_EXTRA_US:g} us: {sum(hits[measured.NET_EXTRA_US])}/{len(rows)}")
    held = held_without = 0
    for source in sources:
        train = [i for i, r in enumerate(rows) if r.source_url != source]
        test = [i for i, r in enumerate(rows) if r.source_url == source]
        cost = max(COSTS_US, key=lambda c: (sum(hits[c][i] for i in train), -c))
        ok, before = sum(hits[cost][i] for i in test), sum(hits[0.0][i] for i in test)
        held += ok
        held_without += before
        print(f"    left out {source}: cost {cost:g} us chosen on the others; {ok}/{len(test)} within 15% "
              f"({before} without the term)")
    print(f"  leaving one source out: {held}/{len(rows)} within 15% ({held_without} without the term)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
