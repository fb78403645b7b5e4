"""The fit of collscope's alltoall terms (collscope.analysis.nccl_model.p2p) on the published alltoall rows.

For every published alltoall row of ``bench/scorecard/published.csv`` that has no stated reason to be off (its
``off_reason`` empty) and that the library can model (a known GPU, the NIC rates where it spans NVLink domains), the
script grids the three terms (launch us, efficiency, ramp bytes per peer), counts the rows within 15% for each, and
then checks the fit leaving one system out at a time: the terms are refitted on the other systems and scored on the
one left out. It prints the shipped terms' count, the best grid point, the held-out count, and the yardstick: the
pairwise alpha-beta model's count on the same rows.

    .venv/bin/python bench/p2p_fit.py
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py, the published rows' reader

import scorecard  # noqa: E402

from collscope.analysis.model_types import LinkParams  # noqa: E402
from collscope.analysis.models import alpha_beta_time_us  # noqa: E402
from collscope.analysis.nccl_model.p2p import (  # noqa: E402
    P2P_EFFICIENCY,
    P2P_FITTED_OPS,
    P2P_LAUNCH_US,
    P2P_RAMP_BYTES_PER_PEER,
    p2p_time_us,
)
from collscope.analysis.params import link_params  # noqa: E402
from collscope.errors import CollscopeError  # noqa: E402
from collscope.units import algbw_gbps  # noqa: E402
from collscope.vocab.ops import busbw_factor  # noqa: E402

LAUNCH_US = (5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0)
EFFICIENCY = (0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)
RAMP_BYTES = (0.0, 64 * 1024, 256 * 1024, 1 << 20)
Terms = tuple[float, float, float]


def fit_rows() -> list[tuple[str, int, float, LinkParams]]:
    """(system, size, published busbw, link params) of each alltoall row the fit uses."""
    out = []
    for r in scorecard.read_published():
        if r.op not in P2P_FITTED_OPS or r.off_reason:
            continue
        try:
            params = link_params(None, gpu=r.gpu, nranks=r.nranks, nnodes=r.nnodes, nvl_domain=r.nvl_domain,
                                 nic_gbit=r.nic_gbit if r.nnodes > 1 else None,
                                 nics_per_node=r.nics_per_node if r.nnodes > 1 else None)
        except CollscopeError:
            continue
        out.append((r.system, r.size_bytes, r.busbw_gbps, params))
    return out


def _busbw(params: LinkParams, size: int, time_us: float) -> float:
    return algbw_gbps(size, time_us) * busbw_factor("alltoall", params.nranks)


def _close(predicted: float, published: float) -> bool:
    """Within the scorecard's yardstick (scorecard.TOLERANCE, 15%)."""
    return abs(predicted / published - 1) <= scorecard.TOLERANCE


def within(rows: Sequence[tuple[str, int, float, LinkParams]], terms: Terms) -> int:
    launch, eff, ramp = terms
    count = 0
    for _, size, published, params in rows:
        t = p2p_time_us(params, "alltoall", size, launch_us=launch, efficiency=eff, ramp_bytes=ramp)
        count += t is not None and _close(_busbw(params, size, t), published)
    return count


def best(rows: Sequence[tuple[str, int, float, LinkParams]]) -> tuple[int, Terms]:
    """The grid point with the most rows within 15% (ties: the first in grid order)."""
    scored = [(within(rows, terms), terms) for terms in itertools.product(LAUNCH_US, EFFICIENCY, RAMP_BYTES)]
    return max(scored, key=lambda pair: pair[0])


def main() -> int:
    rows = fit_rows()
    systems = sorted({r[0] for r in rows})
    pairwise = sum(_close(_busbw(p, s, alpha_beta_time_us("alltoall", "pairwise", p, s)), b) for _, s, b, p in rows)
    shipped: Terms = (P2P_LAUNCH_US, P2P_EFFICIENCY, float(P2P_RAMP_BYTES_PER_PEER))
    top, terms = best(rows)
    print(f"{len(rows)} published alltoall rows from {len(systems)} systems (rows with a stated reason left out)")
    print(f"  pairwise alpha-beta model (the yardstick): {pairwise}/{len(rows)} within 15%")
    print(f"  shipped terms (launch {shipped[0]:g} us, efficiency {shipped[1]:g}, ramp {shipped[2]:.0f} B/peer): "
          f"{within(rows, shipped)}/{len(rows)}")
    print(f"  best grid point (launch {terms[0]:g} us, efficiency {terms[1]:g}, ramp {terms[2]:.0f} B/peer): "
          f"{top}/{len(rows)}")
    held = 0
    for system in systems:
        train = [r for r in rows if r[0] != system]
        test = [r for r in rows if r[0] == system]
        _, fitted = best(train)
        ok = within(test, fitted)
        held += ok
        print(f"    left out {system}: {ok}/{len(test)} within 15% with terms fitted on the others {fitted}")
    print(f"  leaving one system out: {held}/{len(rows)} within 15%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
