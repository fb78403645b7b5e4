"""Judging two existing result sets (``canary --from-results``): the frame of each shape users post before/after
tables in (tests/fixtures/canary_results/README.md names the posts), the refusals, and the not-interleaved verdict."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collscope.canary.compare_results import NOT_INTERLEAVED, judge_results, results_frame
from collscope.errors import ConfigError, ParseError
from tests.analysis.recommend_frames import cell_rows, write_results

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "canary_results"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "results" / "mpi-algos-2rank"


def _f(name: str) -> Path:
    return FIXTURES / name


# (A files, B files, options, blocks per side, sizes kept, the shape)
JUDGED = [
    (["full-output-good.txt"], ["full-output-bad.txt"], {}, 1, 9, "full outputs, sizes stepped in bytes"),
    (["srun-three-runs-a.txt"], ["srun-three-runs-b.txt"], {}, 3, 11, "three runs pasted in one file, srun lines"),
    (["table-only-before.txt"], ["table-only-after.txt"], {"op": "all_reduce"}, 1, 1, "column header, one row"),
    (["info-in-table-old-columns-a.txt"], ["info-in-table-old-columns-b.txt"], {"op": "all_reduce", "nranks": 32},
     1, 15, "old columns, NCCL INFO inside the table"),
    (["tag-output-a.txt"], ["tag-output-b.txt"], {}, 1, 13, "mpirun --tag-output prefixes"),
    (["markdown-eaten-hashes-a.txt"], ["markdown-eaten-hashes-b.txt"], {}, 1, 16, "'#' eaten by markdown"),
    (["threads-version-line-a.txt"], ["threads-version-line-b.txt"], {"op": "all_reduce"}, 1, 1,
     "threads of one process, NCCL version line"),
    ([f"json-all_gather-a-run{i}.json" for i in range(3)], [f"json-all_gather-b-run{i}.json" for i in range(3)], {},
     3, 7, "nccl-tests -J JSON, three runs a side"),
]


@pytest.mark.parametrize(("a", "b", "options", "blocks", "sizes", "shape"), JUDGED, ids=[j[-1] for j in JUDGED])
def test_every_posted_shape_becomes_a_canary_frame(a: list[str], b: list[str], options: dict[str, object],
                                                   blocks: int, sizes: int, shape: str) -> None:
    frame = results_frame([_f(n) for n in a], [_f(n) for n in b], **options)  # type: ignore[arg-type]
    assert set(frame["side"]) == {"A", "B"}
    for side in ("A", "B"):
        part = frame[frame["side"] == side]
        assert sorted(part["block"].unique().tolist()) == list(range(blocks)), shape
        # every block of a side holds each of its cells once: one nccl-tests run
        assert not part.duplicated(["block", "op", "dtype", "in_place", "size_bytes"]).any()
    assert frame["size_bytes"].nunique() == sizes
    assert frame.attrs["interleaved"] is False
    assert frame.attrs["inputs"]["A"] == [str(_f(n)) for n in a]
    for column in ("op", "size_bytes", "time_us", "busbw_gbps", "in_place", "nranks", "nnodes", "point_id"):
        assert column in frame


def test_three_pasted_runs_are_three_blocks_in_the_order_of_the_text() -> None:
    frame = results_frame([_f("srun-three-runs-a.txt")], [_f("srun-three-runs-b.txt")])
    a = frame[(frame["side"] == "A") & (frame["size_bytes"] == 1 << 30) & ~frame["in_place"]]
    # the first out-of-place 1 GiB row of each run in srun-three-runs-a.txt (lines 25, 64, 103)
    text = _f("srun-three-runs-a.txt").read_text().splitlines()
    times = [float(line.split()[5]) for line in text if line.strip().startswith("1073741824 ")]
    assert a.sort_values("block")["time_us"].tolist() == pytest.approx(times)


def test_a_side_of_several_files_numbers_its_runs_over_the_files_in_order() -> None:
    frame = results_frame([_f("json-all_gather-a-run1.json"), _f("json-all_gather-a-run0.json")],
                          [_f("json-all_gather-b-run0.json")])
    a = frame[frame["side"] == "A"]
    first = a[a["block"] == 0]["input"].astype(str).unique().tolist()
    assert first == [str(_f("json-all_gather-a-run1.json"))]
    assert sorted(frame[frame["side"] == "B"]["block"].unique().tolist()) == [0]


def test_the_frame_keeps_load_results_columns_as_categoricals() -> None:
    frame = results_frame([_f("tag-output-a.txt")], [_f("tag-output-b.txt")])
    assert isinstance(frame["op"].dtype, pd.CategoricalDtype)
    assert isinstance(frame["input"].dtype, pd.CategoricalDtype)
    assert frame["block"].dtype == "int64"


def test_a_table_without_its_header_is_refused_naming_the_option_that_supplies_the_op() -> None:
    with pytest.raises(ParseError, match=r"--op"):
        results_frame([_f("table-only-before.txt")], [_f("table-only-after.txt")])


def test_a_table_without_rank_evidence_is_refused_naming_nranks() -> None:
    with pytest.raises(ParseError, match=r"--nranks"):
        results_frame([_f("info-in-table-old-columns-a.txt")], [_f("info-in-table-old-columns-b.txt")],
                      op="all_reduce")


def test_other_rank_counts_are_refused_as_a_change_of_geometry() -> None:
    with pytest.raises(ConfigError, match=r"nranks: A \[4\], B \[16\].*geometry"):
        results_frame([_f("full-output-good.txt")], [_f("tag-output-b.txt")])


def test_other_node_counts_are_refused_as_a_change_of_geometry() -> None:
    # 4 ranks on 2 nodes against 4 ranks of one process on one node
    with pytest.raises(ConfigError, match=r"nnodes: A \[2\], B \[1\]"):
        results_frame([_f("full-output-good.txt")], [_f("threads-version-line-b.txt")], op="all_reduce")


def test_other_ops_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"different ops: A all_reduce; B all_gather"):
        results_frame([_f("srun-three-runs-a.txt")], [_f("json-all_gather-b-run0.json")])


def test_results_of_several_ops_are_refused_offering_the_common_one_which_op_picks(tmp_path: Path) -> None:
    sizes = [1 << 20, 1 << 21]
    a = write_results(tmp_path / "a", cell_rows(sizes=sizes, busbw=10.0, sweep_id="a"),
                      cell_rows(op="all_gather", sizes=sizes, busbw=10.0, sweep_id="a"))
    b = write_results(tmp_path / "b", cell_rows(sizes=sizes, busbw=9.0, sweep_id="b"))
    with pytest.raises(ConfigError, match=r"A all_gather, all_reduce; B all_reduce; pass --op all_reduce"):
        results_frame([a], [b])
    frame = results_frame([a], [b], op="all_reduce")
    assert set(frame["op"].astype(str)) == {"all_reduce"}
    assert len(frame) == 2 * len(sizes) * 3


def test_op_names_what_an_nccl_tests_output_is_so_another_op_s_output_is_an_error() -> None:
    with pytest.raises(ParseError, match=r"expected output of all_reduce \(as passed\)"):
        results_frame([_f("json-all_gather-a-run0.json")], [_f("json-all_gather-b-run0.json")], op="all_reduce")


def test_no_common_size_is_refused_with_both_sides_sizes(tmp_path: Path) -> None:
    a = write_results(tmp_path / "a", cell_rows(sizes=[1 << 20, 1 << 21], busbw=10.0, sweep_id="a"))
    b = write_results(tmp_path / "b", cell_rows(sizes=[1 << 22], busbw=10.0, sweep_id="b"))
    with pytest.raises(ConfigError, match=r"no common size: A measured 1M, 2M; B 4M"):
        results_frame([a], [b])


def test_results_directories_give_one_block_per_repeat_and_cells_of_one_side_are_left_out_by_name(
        tmp_path: Path) -> None:
    a = write_results(tmp_path / "a", cell_rows(sizes=[1 << 20, 1 << 21, 1 << 22], busbw=10.0, sweep_id="a"))
    b = write_results(tmp_path / "b", cell_rows(sizes=[1 << 20, 1 << 21], busbw=9.0, sweep_id="b",
                                                repeats=(0.99, 1.0, 1.01, 1.0)))
    frame = results_frame([a], [b])
    assert sorted(frame[frame["side"] == "A"]["block"].unique().tolist()) == [0, 1, 2]
    assert sorted(frame[frame["side"] == "B"]["block"].unique().tolist()) == [0, 1, 2, 3]
    assert sorted(frame["size_bytes"].unique().tolist()) == [1 << 20, 1 << 21]
    assert frame.attrs["canary_notes"] == ["1 cell(s) only side A measured, left out: all_reduce 4M out-of-place"]


def test_a_sweep_of_several_configurations_is_not_a_side() -> None:
    with pytest.raises(ConfigError, match=r"side A holds \d+ configurations of all_gather .*one results directory"):
        results_frame([EXAMPLE], [EXAMPLE])


def test_no_paths_for_a_side_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"side B: no results given"):
        results_frame([_f("tag-output-a.txt")], [])


def test_unknown_node_counts_are_noted() -> None:
    frame = results_frame([_f("table-only-before.txt")], [_f("table-only-after.txt")], op="all_reduce")
    assert any("side A's nnodes is unknown" in n for n in frame.attrs["canary_notes"])


def test_two_tables_in_one_post_are_two_runs_of_one_side() -> None:
    """nccl #1222's shape: both versions' tables in one text under version labels, without run headers.
    load_results reads them as one run (no header between them); the cells that come again start a second block,
    so the side has two blocks, one per version: the file must be split in two to judge one against the other
    (reported for load_results: the label lines between the tables are not read)."""
    frame = results_frame([_f("two-tables-one-post.txt")], [_f("two-tables-one-post.txt")], op="all_reduce")
    a = frame[frame["side"] == "A"]
    medians = a.groupby("block")["busbw_gbps"].median()
    assert len(medians) == 2 and medians[1] < 0.95 * medians[0]  # the second table is the slower version


def test_the_caveat_says_the_sides_were_not_interleaved() -> None:
    assert "not interleaved" in NOT_INTERLEAVED and "not paired" in NOT_INTERLEAVED


@pytest.mark.parametrize(("a", "b", "options", "blocks", "sizes", "shape"), JUDGED, ids=[j[-1] for j in JUDGED])
def test_every_posted_shape_is_judged_with_the_not_interleaved_caveat(a: list[str], b: list[str],
                                                                      options: dict[str, object], blocks: int,
                                                                      sizes: int, shape: str) -> None:
    verdict = judge_results([_f(n) for n in a], [_f(n) for n in b], n_boot=400, **options)  # type: ignore[arg-type]
    assert verdict.interleaved is False
    assert any("not interleaved" in c for c in verdict.caveats), verdict.caveats
    assert verdict.blocks == blocks
    if blocks < 2:  # one run a side, as most posts have: no interval, and the verdict says what would give one
        assert verdict.decision == "inconclusive"
        assert any("at least 2" in r for r in verdict.reasons), verdict.reasons


def test_three_runs_a_side_with_b_nine_percent_slower_from_64m_is_a_no_go_naming_the_range() -> None:
    verdict = judge_results([_f("srun-three-runs-a.txt")], [_f("srun-three-runs-b.txt")])
    assert verdict.decision == "no-go" and verdict.exit_code == 1
    losing = [(r.op, r.min_bytes, r.max_bytes) for r in verdict.ranges if r.verdict == "loses"]
    assert losing and all(op == "all_reduce" and lo >= 64 << 20 and hi <= 1 << 30 for op, lo, hi in losing)
    assert not [r for r in verdict.ranges if r.max_bytes < 64 << 20 and r.verdict == "loses"]
    assert verdict.workload_change.low > 0.05


def test_the_same_results_on_both_sides_are_never_a_no_go() -> None:
    verdict = judge_results([_f("srun-three-runs-a.txt")], [_f("srun-three-runs-a.txt")])
    assert verdict.decision != "no-go"  # unpaired runs with 1.6% noise: the interval is wider than 1%
    assert abs(verdict.workload_change.estimate) < 1e-9
    assert not [r for r in verdict.ranges if r.verdict != "same"]


def test_json_runs_with_b_faster_are_a_go() -> None:
    verdict = judge_results([_f(f"json-all_gather-a-run{i}.json") for i in range(3)],
                            [_f(f"json-all_gather-b-run{i}.json") for i in range(3)])
    assert verdict.decision == "go"  # B 3% faster
    assert verdict.workload_change.high < 0


def test_the_frame_s_notes_reach_the_verdict_s_caveats(tmp_path: Path) -> None:
    a = write_results(tmp_path / "a", cell_rows(sizes=[1 << 20, 1 << 21, 1 << 22], busbw=10.0, sweep_id="a"))
    b = write_results(tmp_path / "b", cell_rows(sizes=[1 << 20, 1 << 21], busbw=10.0, sweep_id="b"))
    verdict = judge_results([a], [b])
    assert "1 cell(s) only side A measured, left out: all_reduce 4M out-of-place" in verdict.caveats


def _runs_on_other_nodes(tmp_path: Path) -> list[Path]:
    """srun-three-runs-a.txt's three runs, each on another pair of nodes, one file per run."""
    text = _f("srun-three-runs-a.txt").read_text()
    starts = [i for i, line in enumerate(text.splitlines()) if line.endswith("queued and waiting for resources")]
    lines = text.splitlines()
    files = []
    for k, (lo, hi) in enumerate(zip(starts, [*starts[1:], len(lines)], strict=True)):
        run = "\n".join(lines[lo:hi]).replace("lnode0412", f"lnode09{k}1").replace("lnode0418", f"lnode09{k}2")
        path = tmp_path / f"run{k}.txt"
        path.write_text(run + "\n")
        files.append(path)
    return files


def test_runs_of_a_side_on_other_nodes_in_their_own_files_are_its_blocks(tmp_path: Path) -> None:
    frame = results_frame(_runs_on_other_nodes(tmp_path), [_f("srun-three-runs-b.txt")])
    a = frame[frame["side"] == "A"]
    assert sorted(a["block"].unique().tolist()) == [0, 1, 2]
    assert a.groupby("block")["hosts"].first().astype(str).tolist() == [
        "lnode0901,lnode0902", "lnode0911,lnode0912", "lnode0921,lnode0922"]


def test_runs_on_other_nodes_pasted_into_one_file_are_refused_by_load_results(tmp_path: Path) -> None:
    """Reported for load_results: its one-machine rule refuses one file whose pasted runs ran on other nodes (a
    side's repeats in other allocations); one file per run is the way round it today."""
    one = tmp_path / "three-runs.txt"
    one.write_text("".join(p.read_text() for p in _runs_on_other_nodes(tmp_path)))
    with pytest.raises(ConfigError, match=r"records from 3 different machines"):
        results_frame([one], [_f("srun-three-runs-b.txt")])
