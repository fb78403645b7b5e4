"""Issue 11, finding 2: one noise rule (collscope.analysis.noise) for wins, crossovers, heatmap boxes and spread."""

from __future__ import annotations

from typing import Any

from collscope.analysis.compare import analyze
from collscope.analysis.fit import aggregate
from collscope.analysis.noise import Sample, beyond_noise, cell_verdict
from collscope.analysis.plots import gain_heatmap
from collscope.analysis.recommend.core import recommend
from tests.analysis.recommend_frames import MIB, RING_SIMPLE, cell_rows, default_bw, frame, ll_rows
from tests.analysis.recommend_frames import SIZES_1G as SIZES


def cell(median: float, spread: float = 0.02, repeats: int = 3) -> Sample:
    return Sample(median_gbps=median, min_gbps=median * (1 - spread / 2), max_gbps=median * (1 + spread / 2),
                  repeats=repeats)


def test_the_rule_at_one_size():
    base = cell(10.0)
    assert cell_verdict(cell(11.0), base, 0.03) == "beats"  # +10% against 4% of noise
    assert cell_verdict(cell(10.2), base, 0.03) == "below min gain"
    assert cell_verdict(cell(10.5, spread=0.05), base, 0.03) == "within noise"  # +5% against 7%
    assert cell_verdict(cell(11.0, repeats=2), base, 0.03) == "too few repeats"


def test_the_rule_needs_two_adjacent_sizes():
    win, tie = (cell(11.0), cell(10.0)), (cell(10.0), cell(10.0))
    assert beyond_noise([tie, win, tie, win, win, tie], 0.03) == [False, False, False, True, True, False]
    assert beyond_noise([win, (None, cell(10.0)), win], 0.03) == [False, False, False]  # a gap breaks the run
    assert beyond_noise([], 0.03) == []


def within_noise_rows() -> list[list[dict[str, Any]]]:
    """A config 2% above the default at every other size and 2% below in between, while the repeats spread 6%:
    the best median changes at every size, by noise only."""
    spread = (0.97, 1.0, 1.03)
    return [cell_rows(sizes=SIZES[:12], busbw=default_bw, repeats=spread),
            cell_rows(knobs=RING_SIMPLE, sizes=SIZES[:12], repeats=spread,
                      busbw=lambda s: default_bw(s) * (1.02 if SIZES.index(s) % 2 else 0.98))]


def test_a_crossover_within_noise_is_not_listed():
    assert analyze(frame(*within_noise_rows())).crossovers == ()


def test_a_crossover_beyond_noise_is_listed_once():
    crossovers = analyze(frame(*ll_rows())).crossovers
    assert [(c.size_bytes, c.from_config, c.to_config) for c in crossovers] == [(MIB, "NCCL_PROTO=LL", "default")]


def test_heatmap_boxes_only_differences_beyond_noise():
    fig = gain_heatmap(aggregate(frame(*within_noise_rows())), "all_reduce")
    ax = fig.axes[0]
    rows = [label.get_text() for label in ax.get_yticklabels()]
    boxed = {round(p.get_xy()[1] + 0.5) for p in ax.patches}
    assert {rows[r] for r in boxed} == {"default"}


def test_wins_need_two_adjacent_sizes_and_three_repeats():
    one_size = frame(cell_rows(sizes=SIZES[:8], busbw=default_bw),
                     cell_rows(knobs=RING_SIMPLE, sizes=SIZES[:8],
                               busbw=lambda s: default_bw(s) * (1.2 if s == 64 else 1.0)))
    rec = recommend(one_size)
    assert not rec.any_winner
    assert [c.verdict for s in rec.groups[0].sizes for c in s.candidates if s.size_bytes == 64] == ["single size"]
    two_repeats = frame(cell_rows(sizes=SIZES[:8], busbw=default_bw, repeats=(0.99, 1.01)),
                        cell_rows(knobs=RING_SIMPLE, sizes=SIZES[:8], busbw=lambda s: default_bw(s) * 1.2,
                                  repeats=(0.99, 1.01)))
    rec = recommend(two_repeats)
    assert not rec.any_winner and rec.env == ()
    assert {c.verdict for s in rec.groups[0].sizes for c in s.candidates} == {"too few repeats"}




def test_a_dip_counts_only_beyond_noise():
    sizes = SIZES[20:]  # 8 MiB .. 1 GiB, where busbw is nearly flat
    deep = {sizes[4]: 0.6}  # 40% below both neighbours

    def rows(spread: tuple[float, ...]) -> list[dict[str, Any]]:
        return cell_rows(sizes=sizes, busbw=lambda s: default_bw(s) * deep.get(s, 1.0), repeats=spread)

    quiet = analyze(frame(rows((0.99, 1.0, 1.01))))
    assert [(a.kind, a.size_bytes) for a in quiet.anomalies if a.kind == "dip"] == [("dip", sizes[4])]
    noisy_cells = analyze(frame(rows((0.7, 1.0, 1.3))))  # 60% spread per cell: a 40% dip is within noise
    assert [a for a in noisy_cells.anomalies if a.kind in ("dip", "non_monotone")] == []
    assert {a.kind for a in noisy_cells.anomalies} == {"spread"}
