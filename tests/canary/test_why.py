"""canary why (issue 28 H3): what each side chose per (op, size), the ranges where that changed, the statements per
losing range and the tuner rule restoring A's NCCL choice on B. Results directories in the real layout
(tests/fixtures/canary: sweep.json, points/<id>.jsonl, the point's nccl-tests output with NCCL INFO lines; an Open
MPI rules file), a real 2-rank mpirun sweep for Open MPI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.analysis.load import load_results
from collscope.analysis.recommend.tuner import TUNER_COLUMNS
from collscope.canary.verdict import Interval, RangeChange
from collscope.canary.why import ChoiceChange, explain
from collscope.canary.why_ompi import parse_ompi_rules, read_ompi_rules
from collscope.collectives.record import Measurement
from collscope.errors import ParseError
from collscope.results.store import ResultsDir
from collscope.vocab.ompi import DYNAMIC_RULES, OMPI_COLL_IDS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "canary"
NCCL = FIXTURES / "nccl-upgrade"
RULES = FIXTURES / "ompi-rules" / "allreduce-ring-from-64k.rules"
M = 1 << 20
TUNING_HINT = "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING"


def _record(*, size: int, time_us: float, nranks: int, nnodes: int, engine: str, backend: str, point_id: str,
            sweep_id: str, settings: dict[str, str], **extra: object) -> Measurement:
    return Measurement.from_timing(op="all_reduce", size_bytes=size, nranks=nranks, nnodes=nnodes, time_us=time_us,
                                   engine=engine, backend=backend, count=size // 4, dtype="float", redop="sum",
                                   root=None, in_place=False, wrong=0, ok=True, iters=20, warmup=5, repeat=0,
                                   settings=settings, point_id=point_id, sweep_id=sweep_id,
                                   **{"hosts": ("node-c1",), **extra})


def _frame(a: Path, b: Path) -> pd.DataFrame:
    """A canary frame of two existing results directories (as ``--from-results A B`` judges them)."""
    return pd.concat([load_results([a]).assign(side="A", block=0), load_results([b]).assign(side="B", block=0)],
                     ignore_index=True)


def _range(lo: int, hi: int, verdict: str = "loses", op: str = "all_reduce") -> RangeChange:
    change = -0.15 if verdict == "loses" else 0.15 if verdict == "gains" else 0.0
    return RangeChange(op=op, min_bytes=lo, max_bytes=hi, busbw_change=Interval(change, change - 0.02, change + 0.02),
                       time_share=0.4, verdict=verdict, a_busbw_gbps=300.0, b_busbw_gbps=300.0 * (1 + change))


def test_nvlstree_to_ring_ll128_is_one_change_with_its_statement_and_the_rule_restoring_it() -> None:
    why = explain([NCCL / "a", NCCL / "b"], _frame(NCCL / "a", NCCL / "b"), [_range(64 * M, 512 * M)])
    assert why.changes == (ChoiceChange(op="all_reduce", min_bytes=64 * M, max_bytes=512 * M,
                                        a_choice="NVLSTree/Simple", b_choice="Ring/LL128",
                                        source="NCCL TUNING log lines"),)
    assert why.statements == ("B is slower at all_reduce 64M-512M because NCCL now picks Ring/LL128 instead of "
                              "NVLSTree/Simple",)
    (rule,) = why.tuner_rules
    assert (rule.collective, rule.min_bytes, rule.max_bytes, rule.algorithm, rule.protocol) == \
        ("allreduce", 64 * M, 512 * M, "nvls_tree", "simple")
    assert (rule.nnodes, rule.nranks, rule.channels) == (2, 16, -1)
    assert why.tuner_csv is not None
    rows = [line for line in why.tuner_csv.splitlines() if not line.startswith("#")]
    assert rows == ["allreduce,67108864,536870912,nvls_tree,simple,-1,2,16,-1,-1"]
    assert f"# {TUNER_COLUMNS}" in why.tuner_csv.splitlines()
    assert all(len(row.split(",")) == len(TUNER_COLUMNS.split(",")) for row in rows)
    assert why.notes == ()
    doc = json.loads(json.dumps(why.to_dict()))
    assert doc["tuner_rules"][0]["line"] == rows[0] and doc["changes"][0]["b_choice"] == "Ring/LL128"


def test_a_loss_where_both_sides_pick_the_same_is_not_from_the_choice() -> None:
    why = explain([NCCL / "a", NCCL / "b"], _frame(NCCL / "a", NCCL / "b"), [_range(1 << 30, 1 << 30)])
    assert len(why.changes) == 1  # 64M-512M changed, but that range was not judged a loss here
    (statement,) = why.statements
    assert statement.startswith("B is slower at all_reduce 1G, but NCCL picks the same on both sides there "
                                "(Ring/Simple), so the loss is not from the algorithm choice")
    assert "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET" in statement
    assert why.tuner_rules == () and why.tuner_csv is None


def test_a_loss_with_the_same_choice_names_the_settings_the_sides_differ_in() -> None:
    frame = _frame(NCCL / "a", NCCL / "b")
    frame["NCCL_IB_HCA"] = pd.Categorical([None if side == "A" else "=mlx5_0:1" for side in frame["side"]])
    frame["COLLSCOPE_CANARY_SIDE"] = frame["side"]  # collscope's own marker: never named
    (statement,) = explain([NCCL / "a", NCCL / "b"], frame, [_range(1 << 30, 1 << 30)]).statements
    assert "so the loss is not from the algorithm choice: the sides differ in nccl_version (A: 2.26.6, " \
        "B: 2.27.7); NCCL_IB_HCA (A: unset, B: =mlx5_0:1) (" in statement
    assert "COLLSCOPE_CANARY_SIDE" not in statement


def test_identical_sides_have_no_change_and_a_gain_is_said_too() -> None:
    same = explain([NCCL / "a"], _frame(NCCL / "a", NCCL / "a"), [_range(16 * M, 32 * M)])
    assert same.changes == () and same.tuner_rules == ()
    assert "picks the same on both sides there (Ring/LL128)" in same.statements[0]
    reverse = explain([NCCL / "b", NCCL / "a"], _frame(NCCL / "b", NCCL / "a"), [_range(64 * M, 256 * M, "gains")])
    assert reverse.statements == ("B is faster at all_reduce 64M-256M because NCCL now picks NVLSTree/Simple "
                                  "instead of Ring/LL128",)
    assert reverse.tuner_rules == ()  # only a loss gets a rule


def test_without_ranges_the_changes_are_stated_plainly() -> None:
    why = explain([NCCL / "a", NCCL / "b"], _frame(NCCL / "a", NCCL / "b"))
    assert why.statements == ("At all_reduce 64M-512M NCCL picks Ring/LL128 on B instead of NVLSTree/Simple on A",)
    assert why.tuner_rules == ()


def test_a_side_without_tuning_lines_gets_a_note_naming_what_would_supply_them() -> None:
    why = explain([NCCL / "a", NCCL / "b-nolog"], _frame(NCCL / "a", NCCL / "b-nolog"), [_range(64 * M, 512 * M)])
    assert why.changes == () and why.tuner_rules == ()
    (note,) = why.notes
    assert note.startswith("side B: no record of what NCCL chose at all_reduce 16M-1G: ") and TUNING_HINT in note
    assert why.statements[0].startswith("B is slower at all_reduce 64M-512M; what side B chose there is not known")
    assert TUNING_HINT in why.statements[0]


def test_both_sides_in_one_results_directory_are_told_apart_by_point_id(tmp_path: Path) -> None:
    root = tmp_path / "canary"
    shutil.copytree(NCCL / "a", root)
    b_points = NCCL / "b" / "points"
    frame_b = load_results([NCCL / "b"])
    records = [_record(size=int(size), time_us=float(t), nranks=16, nnodes=2, engine="nccl-tests", backend="nccl",
                       point_id="all-reduce-b-r0", sweep_id="nccl-2.26.6", settings={}, hosts=("gpu-b07", "gpu-b08"),
                       gpu="NVIDIA H200", nccl_version="2.26.6")
               for size, t in zip(frame_b["size_bytes"], frame_b["time_us"], strict=True)]
    ResultsDir(root).finish_point("all-reduce-b-r0", records)
    shutil.copy(b_points / "all-reduce-default-r0.log", root / "points" / "all-reduce-b-r0.log")
    frame = load_results([root])
    frame["side"] = frame["point_id"].map({"all-reduce-default-r0": "A", "all-reduce-b-r0": "B"})
    why = explain([root], frame, [_range(64 * M, 512 * M)])
    assert [(c.min_bytes, c.max_bytes, c.a_choice, c.b_choice) for c in why.changes] == \
        [(64 * M, 512 * M, "NVLSTree/Simple", "Ring/LL128")]


def _nccl_results(root: Path, settings: dict[str, str], log: str | None, check: dict[str, object] | None) -> Path:
    results = ResultsDir(root)
    results.points_dir.mkdir(parents=True)
    pid = "all-reduce-r0"
    records = [_record(size=size, time_us=10.0 + size / 1e5, nranks=8, nnodes=1, engine="nccl-tests", backend="nccl",
                       point_id=pid, sweep_id=root.name, settings=settings) for size in (8192, M)]
    results.finish_point(pid, records)
    if log is not None:
        (results.points_dir / f"{pid}.verify.log").write_text(log)
    if check is not None:
        results.write_check(pid, check)
    results.sweep_json.write_text(json.dumps({"sweep_id": root.name, "plan": {"points": []}}))
    return root


def _algo_check(algo: str) -> dict[str, object]:
    """The check.json of a point that forced NCCL_ALGO (collscope.sweeps.verification.SettingsCheck.to_dict)."""
    return {"applied": True, "effects": {"NCCL_ALGO": {"applied": True, "forced": algo, "outside": [],
                                                       "used": [algo]}}, "unchecked": []}


def test_check_json_names_the_algorithm_only_so_no_rule_and_a_note_says_why(tmp_path: Path) -> None:
    a = _nccl_results(tmp_path / "a", {"NCCL_ALGO": "Tree"}, None, _algo_check("Tree"))
    b = _nccl_results(tmp_path / "b", {"NCCL_ALGO": "Ring"}, None, _algo_check("Ring"))
    why = explain([a, b], _frame(a, b), [_range(8192, M)])
    assert why.changes == (ChoiceChange(op="all_reduce", min_bytes=8192, max_bytes=M, a_choice="Tree",
                                        b_choice="Ring", source="check.json effects (NCCL_ALGO used)"),)
    assert why.statements == ("B is slower at all_reduce 8K-1M because NCCL now picks Ring instead of Tree",)
    assert why.tuner_rules == ()
    assert any(n.startswith("all_reduce 8K-1M: no tuner rule: A's protocol is not known") and TUNING_HINT in n
               for n in why.notes)


TABLE_LOG = FIXTURES / "tuning-table" / "nccl2.19.3-8gpu-tuning-table-no-choice-lines.log"
"""NCCL 2.19's TUNING table of one communicator (blocks layout), without per-call choice lines (before 2.21)."""


def test_the_tuning_table_predicts_a_choice_said_to_be_a_prediction(tmp_path: Path) -> None:
    # NCCL's model: 8K: Ring/LL 8.0 + 8192/6000 = 9.4 us is the fastest cell; 1M: Ring/Simple 28 + 13.1 = 41.1 us
    a = _nccl_results(tmp_path / "a", {}, TABLE_LOG.read_text(), None)
    b_log = "".join(f"node-c1:7100:7100 [0] NCCL INFO AllReduce: {size} Bytes -> Algo TREE proto LL128 "
                    "channel{Lo..Hi}={0..7}\n" for size in (8192, M))
    b = _nccl_results(tmp_path / "b", {}, "NCCL version 2.24.3+cuda12.4\n" + b_log, None)
    why = explain([a, b], _frame(a, b), [_range(M, M)])
    assert [(c.min_bytes, c.a_choice, c.b_choice) for c in why.changes] == [(8192, "Ring/LL", "Tree/LL128"),
                                                                            (M, "Ring/Simple", "Tree/LL128")]
    assert why.changes[1].source == ("A: NCCL TUNING table (its cost model's fastest cell: predicted, not logged); "
                                     "B: NCCL TUNING log lines")
    assert [r.line() for r in why.tuner_rules] == ["allreduce,1048576,1048576,ring,simple,-1,1,8,-1,-1"]


def _mpi_results(root: Path, settings: dict[str, str], sizes: list[int]) -> Path:
    results = ResultsDir(root)
    results.points_dir.mkdir(parents=True)
    pid = "all-reduce-r0"
    records = [_record(size=size, time_us=5.0 + size / 2e3, nranks=2, nnodes=1, engine="mpi", backend="mpi",
                       point_id=pid, sweep_id=root.name, settings=settings) for size in sizes]
    results.finish_point(pid, records)
    results.sweep_json.write_text(json.dumps({"sweep_id": root.name, "plan": {"points": []}}))
    return root


def test_open_mpi_rules_file_on_b_is_read_as_data_and_named_with_its_line(tmp_path: Path) -> None:
    sizes = [8192 << i for i in range(8)]  # 8K .. 1M
    a = _mpi_results(tmp_path / "a", {}, sizes)
    b = _mpi_results(tmp_path / "b", {DYNAMIC_RULES: "1", "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(RULES)},
                     sizes)
    why = explain([a, b], _frame(a, b), [_range(8192, 32768, "same"), _range(65536, M)])
    (change,) = why.changes
    assert (change.op, change.min_bytes, change.max_bytes, change.a_choice, change.b_choice) == \
        ("all_reduce", 65536, M, "fixed decisions", "ring (4)")
    assert change.source.endswith("B: OMPI_MCA_coll_tuned_dynamic_rules_filename (its rule for 2 ranks)")
    assert why.statements == ("B is slower at all_reduce 64K-1M because Open MPI now picks ring (4) instead of "
                              "fixed decisions",)
    assert why.tuner_rules == () and why.tuner_csv is None
    assert f"side B: all_reduce 64K-1M: ring (4) from the rules file: {RULES}:11: 65536 4 0 0" in why.notes
    assert any(n.startswith("all_reduce 64K-1M: Open MPI has no tuner plugin; to run A's fixed decisions on B: in "
                            "B's rules file, '65536 0 0 0'") for n in why.notes)


def test_open_mpi_forced_on_a_gives_the_variable_that_restores_it(tmp_path: Path) -> None:
    sizes = [M, 4 * M]
    a = _mpi_results(tmp_path / "a", {DYNAMIC_RULES: "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": "3"}, sizes)
    b = _mpi_results(tmp_path / "b", {DYNAMIC_RULES: "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}, sizes)
    why = explain([a, b], _frame(a, b), [_range(M, 4 * M)])
    assert [(c.a_choice, c.b_choice) for c in why.changes] == [("recursive doubling (3)", "ring (4)")]
    assert any("OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=3" in n
               for n in why.notes)


def test_an_unreadable_rules_file_is_a_note_not_a_traceback(tmp_path: Path) -> None:
    a = _mpi_results(tmp_path / "a", {}, [M])
    b = _mpi_results(tmp_path / "b", {DYNAMIC_RULES: "1",
                                      "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(tmp_path / "gone.rules")}, [M])
    why = explain([a, b], _frame(a, b), [_range(M, M)])
    assert why.changes == ()
    assert any("gone.rules could not be read" in n and "no such file" in n for n in why.notes)
    assert why.statements[0].startswith("B is slower at all_reduce 1M; what side B chose there is not known")


def test_a_real_two_rank_sweep_forcing_ring_is_explained(finished_mpi_sweep: tuple[Path, Path]) -> None:
    _, results = finished_mpi_sweep
    frame = load_results([results])
    frame["side"] = frame["config"].map(lambda c: "A" if c == "default" else "B")
    sizes = sorted(int(s) for s in frame["size_bytes"].unique())
    why = explain([results], frame, [_range(sizes[0], sizes[-1])])
    (change,) = why.changes
    assert (change.a_choice, change.b_choice, change.min_bytes, change.max_bytes) == \
        ("fixed decisions", "ring (4)", sizes[0], sizes[-1])
    assert "OMPI_MCA_coll_tuned_allreduce_algorithm=4 (the records' settings)" in change.source
    assert why.statements[0].endswith("because Open MPI now picks ring (4) instead of fixed decisions")
    assert any("unset OMPI_MCA_coll_tuned_allreduce_algorithm on B" in n for n in why.notes)


def test_rules_file_parser_reads_the_classic_format_and_refuses_damage() -> None:
    rules = read_ompi_rules(RULES)
    assert rules.version == 2 and [r.text() for r in rules.rules] == ["0 0 0 0", "65536 4 0 0"]
    assert rules.rule_for("allreduce", 2, 65535).algorithm == 0  # type: ignore[union-attr]
    assert rules.rule_for("allreduce", 64, 1 << 30).algorithm == 4  # type: ignore[union-attr]
    assert rules.rule_for("bcast", 2, 8) is None
    # two communicator sizes, hex and octal as %li reads them, a comment in the middle of a line
    two = parse_ompi_rules("1\n7 # bcast\n2\n2 1 0 6 0 0\n16 2\n0 0x6 0 0\n010 7 0 0\n", "two.rules")
    assert two.rule_for("bcast", 4, 100).algorithm == 6  # type: ignore[union-attr]
    assert two.rule_for("bcast", 32, 8).algorithm == 7  # type: ignore[union-attr]
    assert two.rule_for("bcast", 1, 8).algorithm == 6  # type: ignore[union-attr]  # below every size: the first
    with pytest.raises(ParseError, match=r"cut\.rules:3: expected a message size, found .the end of the file"):
        parse_ompi_rules("1\n2\n1 2 1\n", "cut.rules")
    with pytest.raises(ParseError, match=r"late\.rules:2: expected the first message rule .* at 0 bytes"):
        parse_ompi_rules("1 2 1 2 1\n1024 4 0 0\n", "late.rules")
    with pytest.raises(ParseError, match="JSON rules are not read"):
        parse_ompi_rules('{"collectives": {}}', "new.json")


def test_a_damaged_point_log_withholds_the_choice(tmp_path: Path) -> None:
    a = _nccl_results(tmp_path / "a", {}, TABLE_LOG.read_text(), None)
    b = _nccl_results(tmp_path / "b", {}, "\x00garbage AllReduce: x Bytes -> Algo\n\xff|||\n", None)
    why = explain([a, b], _frame(a, b), [_range(8192, M)])
    assert why.changes == () and why.tuner_rules == ()
    assert why.notes == (f"side B: no record of what NCCL chose at all_reduce 8K-1M: run that side with "
                         f"{TUNING_HINT} (NCCL >= 2.21 logs the algorithm and protocol of every call; a sweep's "
                         "verification run keeps it in points/<id>.verify.log)",)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("0123456789 \n#x-rulefvsion{"), max_size=200))
def test_the_rules_parser_raises_only_parse_errors(text: str) -> None:
    try:
        rules = parse_ompi_rules(text, "fuzz.rules")
    except ParseError:
        return
    for coll, coll_id in OMPI_COLL_IDS.items():
        rule = rules.rule_for(coll, 4, 1 << 20)
        assert rule is None or (rule.coll_id == coll_id and rule.msg_bytes <= 1 << 20)
