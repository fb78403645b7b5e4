"""The fit of collscope's alltoall terms (collscope.analysis.nccl_model.p2p) on the published alltoall rows.

For every published alltoall row of ``bench/scorecard/published.csv`` that has no stated reason to be off (its
``off_reason`` empty) and that the library can model (a known GPU, the NIC rates where it spans NVLink domains), the
script grids the four terms (launch us, efficiency, ramp bytes per peer, and what a channel carries on Hopper and
newer, P2P_CHANNEL_GBPS's sm 90 row), counts the rows within 15% for each, and then checks the fit leaving one
system out at a time: the terms are refitted on the other systems and scored on the one left out. It prints the
shipped terms' count, the best grid point (ties: the fewest rows more than 30% off, then the first in grid order),
the held-out count, the same without the channel term, and the yardstick: the pairwise alpha-beta model's count on
the same rows.

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
    P2P_CHANNEL_GBPS,
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

LAUNCH_US = (14.0, 16.0, 18.0, 20.0, 22.0, 25.0)
EFFICIENCY = (0.8, 0.85, 0.9, 0.95)
RAMP_BYTES = (0.0, 64 * 1024, 128 * 1024, 192 * 1024, 256 * 1024, 384 * 1024)
CHANNEL_GBPS = (16.0, 18.0, 20.0, 22.0, 24.0)
NO_CHANNEL_TERM = 0.0
"""The channel rate that turns the channel term off (every row's channels carry the p2p rate)."""
Terms = tuple[float, float, float, float]


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


def _table(channel_gbps: float) -> tuple[tuple[int, float], ...]:
    """P2P_CHANNEL_GBPS with its Hopper-and-newer row at ``channel_gbps`` (none at NO_CHANNEL_TERM)."""
    if channel_gbps == NO_CHANNEL_TERM:
        return ()
    return tuple((sm, channel_gbps if sm >= 90 else rate) for sm, rate in P2P_CHANNEL_GBPS)


def _ratios(rows: Sequence[tuple[str, int, float, LinkParams]], terms: Terms) -> list[float]:
    launch, eff, ramp, channel = terms
    out = []
    for _, size, published, params in rows:
        t = p2p_time_us(params, "alltoall", size, launch_us=launch, efficiency=eff, ramp_bytes=ramp,
                        channel_table=_table(channel))
        out.append(_busbw(params, size, t) / published if t is not None else float("nan"))
    return out


def within(rows: Sequence[tuple[str, int, float, LinkParams]], terms: Terms) -> int:
    return sum(abs(r - 1) <= scorecard.TOLERANCE for r in _ratios(rows, terms))


def far(rows: Sequence[tuple[str, int, float, LinkParams]], terms: Terms) -> int:
    """Rows more than 30% off (the scorecard's second line)."""
    return sum(abs(r - 1) > 0.30 for r in _ratios(rows, terms))


def best(rows: Sequence[tuple[str, int, float, LinkParams]],
         channels: Sequence[float] = CHANNEL_GBPS) -> tuple[int, Terms]:
    """The grid point with the most rows within 15% (ties: the fewest more than 30% off, then the first in grid
    order)."""
    scored = []
    for terms in itertools.product(LAUNCH_US, EFFICIENCY, RAMP_BYTES, channels):
        ratios = _ratios(rows, terms)
        scored.append((sum(abs(r - 1) <= scorecard.TOLERANCE for r in ratios),
                       -sum(abs(r - 1) > 0.30 for r in ratios), terms))
    top = max(scored, key=lambda item: (item[0], item[1]))
    return top[0], top[2]


def _held_out(rows: Sequence[tuple[str, int, float, LinkParams]], systems: Sequence[str],
              channels: Sequence[float], show: bool) -> int:
    held = 0
    for system in systems:
        train = [r for r in rows if r[0] != system]
        test = [r for r in rows if r[0] == system]
        _, fitted = best(train, channels)
        ok = within(test, fitted)
        held += ok
        if show:
            print(f"    left out {system}: {ok}/{len(test)} within 15% with terms fitted on the others {fitted}")
    return held


def _terms_text(terms: Terms) -> str:
    channel = "no channel term" if terms[3] == NO_CHANNEL_TERM else f"{terms[3]:g} GB/s a channel"
    return f"launch {terms[0]:g} us, efficiency {terms[1]:g}, ramp {terms[2]:.0f} B/peer, {channel}"


def main() -> int:
    rows = fit_rows()
    systems = sorted({r[0] for r in rows})
    pairwise = sum(_close(_busbw(p, s, alpha_beta_time_us("alltoall", "pairwise", p, s)), b) for _, s, b, p in rows)
    hopper = next(rate for sm, rate in P2P_CHANNEL_GBPS if sm == 90)
    shipped: Terms = (P2P_LAUNCH_US, P2P_EFFICIENCY, float(P2P_RAMP_BYTES_PER_PEER), hopper)
    top, terms = best(rows)
    print(f"{len(rows)} published alltoall rows from {len(systems)} systems (rows with a stated reason left out)")
    print(f"  pairwise alpha-beta model (the yardstick): {pairwise}/{len(rows)} within 15%")
    print(f"  shipped terms ({_terms_text(shipped)}): {within(rows, shipped)}/{len(rows)}, "
          f"{far(rows, shipped)} more than 30% off")
    print(f"  best grid point ({_terms_text(terms)}): {top}/{len(rows)}, {far(rows, terms)} more than 30% off")
    plain_top, plain = best(rows, (NO_CHANNEL_TERM,))
    print(f"  best without the channel term ({_terms_text(plain)}): {plain_top}/{len(rows)}, "
          f"{far(rows, plain)} more than 30% off")
    held = _held_out(rows, systems, CHANNEL_GBPS, show=True)
    print(f"  leaving one system out: {held}/{len(rows)} within 15%")
    plain_held = _held_out(rows, systems, (NO_CHANNEL_TERM,), show=False)
    print(f"  leaving one system out, without the channel term: {plain_held}/{len(rows)} within 15%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
