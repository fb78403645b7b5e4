"""Where NCCL's versions disagree on the choice: the figures behind collscope.analysis.nccl_model.choice.NEAR_TIE.

For every distinct geometry and size of the scorecard's rows that NCCL's model predicts (bench/scorecard/published.csv,
not the grouped point-to-point ops), the script asks the library for NCCL's choice under the 2.19 and the 2.30 tables.
Where they differ it prints how much slower the 2.19 pick is in 2.30's model than 2.30's own choice, and counts the
sizes where that gap is under the near-tie threshold: the leads that NCCL's versions overturn, against the threshold
collscope calls a near tie (the yardstick).

    .venv/bin/python bench/near_tie_versions.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # scorecard.py, the published rows' reader

import scorecard  # noqa: E402

from collscope.analysis.nccl_model.choice import NEAR_TIE  # noqa: E402
from collscope.analysis.predict import predict  # noqa: E402
from collscope.errors import CollscopeError  # noqa: E402


def version_gaps() -> tuple[int, list[float]]:
    """(sizes where both versions choose the same pair, the 2.30-model gaps of the 2.19 pick where they differ)."""
    seen: set[tuple[object, ...]] = set()
    same, gaps = 0, []
    for r in scorecard.read_published():
        key = (*scorecard.model_inputs(r), r.size_bytes)
        if not scorecard.on_nccl_model(r) or key in seen:
            continue
        seen.add(key)
        kwargs = dict(gpu=r.gpu, nranks=r.nranks, nnodes=r.nnodes, nvl_domain=r.nvl_domain, sizes=[r.size_bytes],
                      nic_gbit=r.nic_gbit if r.nnodes > 1 else None,
                      nics_per_node=r.nics_per_node if r.nnodes > 1 else None, algos=r.algos, protos=r.protos,
                      collnet=r.collnet)
        try:
            new, old = predict(r.op, version="2.30", **kwargs), predict(r.op, version="2.19", **kwargs)  # type: ignore[arg-type]
        except CollscopeError:
            continue
        if not new.nccl_choice or not old.nccl_choice:
            continue
        a, b = new.nccl_choice[0], old.nccl_choice[0]
        if (a.algo, a.proto) == (b.algo, b.proto):
            same += 1
            continue
        other = [p.time_us for p in new.predictions if p.model == "nccl" and (p.algo, p.proto) == (b.algo, b.proto)]
        gaps.append(other[0] / a.time_us - 1 if other else float("inf"))
    return same, sorted(gaps)


def main() -> int:
    same, gaps = version_gaps()
    near = sum(g < NEAR_TIE for g in gaps)
    print(f"{same + len(gaps)} distinct scorecard sizes on NCCL's model: the 2.19 and 2.30 tables choose the same "
          f"pair at {same}, another at {len(gaps)}")
    print(f"  where they differ, the 2.19 pick is within {NEAR_TIE:.0%} of 2.30's choice in 2.30's model at {near} "
          f"(the near-tie threshold, collscope.analysis.nccl_model.choice.NEAR_TIE)")
    print("  gaps: " + ", ".join("not in 2.30" if g == float("inf") else f"{g:.1%}" for g in gaps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
