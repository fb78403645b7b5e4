"""rccl-tests results files (``-x``/``-X FILE -Z json|csv``): every shape its writer has had, read as nccl-tests
runs through ``parse_nccl_tests`` and ``collscope ingest`` (fixtures: tests/fixtures/rccl-tests/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.cli import main
from collscope.collectives.nccl_tests.parse import looks_like_nccl_tests, parse_nccl_tests
from collscope.collectives.nccl_tests.rccl_results import looks_like_rccl_tests_results, parse_rccl_tests_results
from collscope.collectives.nccl_tests.runs import parse_nccl_tests_runs
from collscope.errors import ParseError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rccl-tests"
FILES = sorted(p for p in FIX.iterdir() if p.suffix in (".json", ".csv"))
MB = 1 << 20


def _read(name: str):
    path = FIX / name
    return parse_nccl_tests(path.read_text(), source=str(path))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_shape_reads_as_an_rccl_run(path: Path) -> None:
    text = path.read_text()
    assert looks_like_nccl_tests(text)
    run = parse_nccl_tests(text, source=str(path))
    assert run.backend == "rccl" and run.records
    assert all(r.backend == "rccl" and r.engine == "nccl-tests" and r.source == str(path) for r in run.records)
    assert [r.in_place for r in run.records[:2]] == [False, True]  # out-of-place then in-place, as printed
    assert parse_nccl_tests_runs(text, source=str(path))[0].records == run.records


def test_json_list_without_mpi() -> None:
    run = _read("all_reduce-results-list.json")
    assert run.op == "all_reduce" and run.op_evidence == "the records' name 'AllReduce'"
    assert run.sizes == (MB, 4 * MB, 16 * MB, 64 * MB, 256 * MB)
    first, last = run.records[0], run.records[-1]
    assert (first.size_bytes, first.in_place, first.time_us, first.busbw_gbps) == (MB, False, 38.23, 47.999163)
    assert (last.size_bytes, last.in_place, last.algbw_gbps, last.busbw_gbps) == (256 * MB, True, 178.734149,
                                                                                   312.78476)
    assert {r.dtype for r in run.records} == {"float32"} and {r.redop for r in run.records} == {"sum"}
    assert all(r.wrong == 0 and r.ok for r in run.records) and run.complete and not run.failed
    assert run.nranks == 8 and run.nnodes == 1 and all(r.nranks == 8 and r.nnodes == 1 for r in run.records)
    assert "the file's gpus 8 (a build without MPI: one process drives every rank)" in run.geometry.nranks.evidence
    assert run.geometry.nnodes.evidence == ("the file's gpus field: a build without MPI, one process on one node",)
    assert run.geometry.value("ranks_per_node") == 8
    assert run.geometry.gpus_per_node.evidence == ("the file's gpus 8: one process on one node drives them all",)


def test_mpi_list_ranks_from_the_fields_and_nodes_not_taken_from_nodes() -> None:
    run = _read("all_reduce-results-mpi-list.json")
    assert run.nranks == 16 and run.world_nranks == 16 and run.groups == 1
    assert ("the file's ranksPerNode 16 x gpusPerRank 1 (MPI processes of the communicator x GPUs each)"
            in run.geometry.nranks.evidence)
    # ranksPerNode is the communicator's MPI processes (src/common.cu passes args->nProcs): nodes=1 says nothing
    assert run.nnodes is None and run.geometry.value("nnodes") is None
    assert any("nodes=1 is not a node count" in w for w in run.warnings)
    assert parse_nccl_tests((FIX / "all_reduce-results-mpi-list.json").read_text(), nnodes=2).nnodes == 2


def test_wrong_elements_are_kept_and_fail_the_run() -> None:
    run = _read("all_reduce-results-mpi-list-wrong-values.json")
    bad = [r for r in run.records if not r.ok]
    assert [(r.size_bytes, r.in_place, r.wrong) for r in bad] == [(64 * MB, True, 1536)]
    assert run.failed and sum(r.ok for r in run.records) == 7


def test_unchecked_values_are_unknown_not_zero() -> None:
    text = (FIX / "all_reduce-results-list.json").read_text().replace('"wrong":"0"', '"wrong":"N/A"')
    run = parse_nccl_tests(text, source="ar.json")
    assert all(r.wrong is None and r.ok for r in run.records)


def test_csv_header_without_nodes_is_read_by_position_with_a_note() -> None:
    run = _read("all_reduce-results-mpi-header-without-nodes.csv")
    note = next(w for w in run.warnings if "header has 13 columns but the rows 14" in w)
    assert "ROCm/rocm-systems #6004" in note and "numcycle,collective,nodes,ranks,rankspernode" in note
    # by name the columns would shift: ranks=1, size=1 and type=1048576 (the example); by position:
    assert run.sizes == (MB, 8 * MB, 64 * MB, 512 * MB) and run.nranks == 16
    assert {r.dtype for r in run.records} == {"float32"} and {r.redop for r in run.records} == {"sum"}
    assert run.records[0].busbw_gbps == 27.440056 and run.records[1].in_place
    fixed = _read("all_reduce-results-mpi.csv")
    assert not any("header has" in w for w in fixed.warnings) and fixed.nranks == 16 and fixed.sizes == run.sizes


def test_older_spaced_csv_and_csv_without_mpi() -> None:
    a2a = _read("alltoall-results-mpi-spaced-header-without-nodes.csv")
    assert a2a.op == "alltoall" and a2a.nranks == 16 and a2a.sizes == (MB, 16 * MB, 128 * MB)
    assert {r.redop for r in a2a.records} == {None} and not a2a.complete
    assert any("header has 12 columns but the rows 13" in w for w in a2a.warnings)
    ag = _read("all_gather-results-single-process.csv")
    assert ag.op == "all_gather" and ag.nranks == 8 and ag.nnodes == 1 and ag.complete
    assert ag.records[0].busbw_gbps == pytest.approx(ag.records[0].algbw_gbps * 7 / 8, rel=1e-5)


def test_objects_per_line_with_one_ranks_sizes_are_scaled_to_the_total() -> None:
    run = _read("reduce_scatter-results-objects-per-line.json")
    assert run.op == "reduce_scatter" and run.nranks == 8 and not run.complete
    assert run.sizes == (8 * MB, 64 * MB, 256 * MB)  # the file says 1, 8, 32 MiB: one rank's receive buffer
    assert any("sizes scaled by 8" in w for w in run.warnings)
    r = run.records[0]
    assert r.algbw_gbps * r.time_us * 1e3 == pytest.approx(r.size_bytes, rel=1e-3)


def test_pr93_hash_wrong_key_and_sorted_keys_read_the_same() -> None:
    line = ('{"#wrong":"0","algBw":21.5,"busBw":32.25,"gpus":4,"inPlace":0,"name":"AllReduce","redop":"sum",'
            '"size":1048576,"time":48.77,"type":"float"}\n')
    run = parse_nccl_tests(line, source="pr93.json")
    assert (run.op, run.nranks, run.records[0].wrong, run.records[0].busbw_gbps) == ("all_reduce", 4, 0, 32.25)


def test_op_passed_must_match_the_file() -> None:
    text = (FIX / "all_reduce-results-list.json").read_text()
    assert parse_rccl_tests_results(text, op="all_reduce").op_evidence == "--op (as passed)"
    with pytest.raises(ParseError, match="results of all_gather"):
        parse_rccl_tests_results(text, source="ar.json", op="all_gather")


def test_truncated_json_names_file_and_line() -> None:
    lines = (FIX / "all_reduce-results-mpi-list.json").read_text().splitlines(keepends=True)
    cut = "".join(lines[:4]) + lines[4][:60]
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(cut, source="runs/ar.json")
    assert err.value.source == "runs/ar.json" and err.value.line == 5 and "cut off" in str(err.value)
    with pytest.raises(ParseError, match=r"runs/ar\.json:.*closing '\]'"):
        parse_nccl_tests("".join(lines[:5]), source="runs/ar.json")  # whole records, the ']' missing


def test_csv_row_with_a_non_numeric_busbw_names_file_line_and_column() -> None:
    lines = (FIX / "all_reduce-results-mpi.csv").read_text().splitlines()
    fields = lines[3].split(",")
    fields[12] = "fast"
    lines[3] = ",".join(fields)
    with pytest.raises(ParseError) as err:
        parse_nccl_tests("\n".join(lines), source="ar.csv")
    assert err.value.line == 4 and str(err.value).startswith("ar.csv:4: expected a number >= 0 for busBw")
    assert "'fast'" in str(err.value)


def test_json_record_errors_name_the_record_and_line() -> None:
    text = (FIX / "all_reduce-results-list.json").read_text().replace('"inPlace":1', '"inPlace":2', 1)
    with pytest.raises(ParseError, match=r"ar\.json:3: expected 0 or 1 for inPlace \(record 1\)"):
        parse_nccl_tests(text, source="ar.json")
    other = (FIX / "all_reduce-results-list.json").read_text().replace('"gpus":8', '"gpus":4', 1)
    with pytest.raises(ParseError, match="the geometry of line 2"):
        parse_nccl_tests(other, source="ar.json")


def test_row_count_mismatch_other_than_nodes_is_an_error() -> None:
    text = "numCycle,collective,gpus,size,type,redop,inplace,time,algbw,busbw,#wrong\n0,\"AllReduce\",8,1024\n"
    with pytest.raises(ParseError, match=r"x\.csv:2: expected a row of the 11 columns"):
        parse_nccl_tests(text, source="x.csv")


def test_launcher_prefixed_text_is_not_taken_for_a_json_list() -> None:
    text = "[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8\n"
    assert not looks_like_rccl_tests_results(text) and not looks_like_rccl_tests_results("[gpu-a01:311] # x\n")
    assert looks_like_rccl_tests_results(" [\n{") and looks_like_rccl_tests_results("[\n]\n")
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(text, source="log.txt")
    assert "rccl-tests' JSON" not in str(err.value)


def test_cli_ingest_reads_rccl_results(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    result = CliRunner().invoke(main, ["ingest", str(FIX / "all_reduce-results-mpi-header-without-nodes.csv"),
                                       str(FIX / "all_gather-results-single-process.csv"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "all_reduce (rccl), 16 ranks (nodes unknown), 4 sizes, 8 records" in result.output
    assert "all_gather (rccl), 8 ranks on 1 node, 4 sizes, 8 records" in result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 16 and {r["backend"] for r in records} == {"rccl"}
    failed = CliRunner().invoke(main, ["ingest", str(FIX / "all_reduce-results-mpi-list-wrong-values.json")])
    assert failed.exit_code == 1 and "1 records not ok" in failed.output


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_damaged_files_raise_only_parse_error(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(FILES)).read_text()
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    damaged = text[:start] + data.draw(st.text(max_size=8)) + text[end:]
    try:
        parse_nccl_tests(damaged, source="damaged")
    except ParseError:
        pass
