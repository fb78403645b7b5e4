"""A damaged results directory through the real CLI: exit 2 and one line per problem, never a traceback, and
nothing silently dropped or counted (issue 10). Each test builds a small real directory with ResultsDir."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.collectives.record import Measurement
from collscope.errors import ParseError
from collscope.results import ResultsDir
from collscope.results.schema import decode_failure_lines

POINTS = ("p-default-r0", "p-default-r1", "p-default-r2")
READERS = (("analyze",), ("recommend",), ("sweep", "status"))


def _rec(size: int, point_id: str, repeat: int) -> Measurement:
    return Measurement.from_timing(op="all_reduce", size_bytes=size, nranks=2, time_us=3.0 + size / 1e3,
                                   engine="mpi", backend="mpi", count=size // 4, dtype="float32", redop="sum",
                                   root=None, in_place=False, nnodes=1, point_id=point_id, sweep_id="sw",
                                   repeat=repeat, hosts=("h1",))


def _results(root: Path) -> ResultsDir:
    """A finished three-point sweep, as ResultsDir.prepare and finish_point write it."""
    results = ResultsDir(root)
    plan = {"sweep_id": "sw", "skipped": [],
            "points": [{"point_id": p, "op": "all_reduce", "settings": {}, "repeat": i} for i, p in enumerate(POINTS)]}
    results.prepare("sw", {"name": "t", "engine": "mpi"}, plan,
                    {"versions": {"collscope": "0"}, "hosts": ["h1"], "slurm_job_id": None, "topology_hash": None,
                     "strategy": "grid"})
    for i, p in enumerate(POINTS):
        results.finish_point(p, [_rec(s, p, i) for s in (8, 64, 512, 4096)])
    return results


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def _assert_user_error(result, *fragments: str) -> str:
    """Exit 2, an ``error:`` line on stderr naming every fragment, and no traceback (no exception escaped)."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    err = result.stderr
    assert err.startswith("error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


def _sweep_json(results: ResultsDir) -> dict:
    return json.loads(results.sweep_json.read_text())


# ---- sweep.json ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", READERS + (("report",),))
def test_binary_sweep_json_is_named_with_its_line(tmp_path, cmd):
    results = _results(tmp_path / "r")
    results.sweep_json.write_bytes(b'{"sweep_id": "sw",\n\xff\xfe\x00garbage')
    args = [*cmd, str(results.root)] + (["--out", str(tmp_path / "rep")] if cmd == ("report",) else [])
    err = _assert_user_error(_invoke(*args), f"{results.sweep_json}:2:", "not UTF-8")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("cmd", READERS)
def test_plan_as_a_list_names_the_field_and_the_type(tmp_path, cmd):
    results = _results(tmp_path / "r")
    doc = _sweep_json(results)
    doc["plan"] = [1, 2]
    results.sweep_json.write_text(json.dumps(doc))
    _assert_user_error(_invoke(*cmd, str(results.root)), str(results.sweep_json), "plan of type object",
                       "[1, 2] (array)")


@pytest.mark.parametrize("cmd", READERS)
def test_plan_points_holding_strings_name_the_point(tmp_path, cmd):
    results = _results(tmp_path / "r")
    doc = _sweep_json(results)
    doc["plan"]["points"][1] = "p-default-r1"
    results.sweep_json.write_text(json.dumps(doc))
    _assert_user_error(_invoke(*cmd, str(results.root)), "plan.points[1] of type object", '"p-default-r1" (str)')


def test_sweep_json_types_and_unknown_fields_are_errors_never_coerced(tmp_path):
    results = _results(tmp_path / "r")
    doc = _sweep_json(results)
    for change, fragments in [({"sweep_id": 7}, ("sweep_id of type str", "7 (int)")),
                              ({"plan": {**doc["plan"], "points": [{"point_id": "a", "repeat": "1"}]}},
                               ("plan.points[0].repeat of type int", '"1" (str)')),
                              ({"hosts": "h1"}, ("hosts of type array", '"h1" (str)')),
                              ({"sweep_idd": "sw"}, ("only the known fields of sweep.json", "sweep_idd"))]:
        results.sweep_json.write_text(json.dumps({**doc, **change}))
        with pytest.raises(ParseError) as info:
            results.status()
        assert all(f in str(info.value) for f in fragments), str(info.value)


def test_older_sweep_json_without_later_fields_still_loads(tmp_path):
    results = _results(tmp_path / "r")
    results.sweep_json.write_text(json.dumps({"sweep_id": "sw", "plan": {"points": [{"point_id": p} for p in POINTS]}}))
    status = results.status()
    assert (status.points, status.done, status.damaged) == (3, 3, 0)


# ---- points/ -----------------------------------------------------------------------------------------------
def test_binary_point_file_is_damaged_not_done(tmp_path):
    results = _results(tmp_path / "r")
    results.records_path(POINTS[1]).write_bytes(b"\x00\xff\xfe binary\n")
    result = _invoke("sweep", "status", str(results.root), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["done"], doc["damaged"], doc["pending"]) == (2, 1, 0)
    assert doc["damaged_points"][0]["point_id"] == POINTS[1]
    assert f"{results.records_path(POINTS[1])}:1" in doc["damaged_points"][0]["problem"]


@pytest.mark.parametrize("cmd", [("analyze",), ("recommend",)])
def test_a_fifo_in_points_is_never_opened_for_a_blocking_read(tmp_path, cmd):
    results = _results(tmp_path / "r")
    fifo = results.records_path(POINTS[0])
    fifo.unlink()
    os.mkfifo(fifo)
    err = _assert_user_error(_invoke(*cmd, str(results.root)), "1 damaged point file", str(fifo), "FIFO")
    assert len(err.strip().splitlines()) == 2  # the header and one line for the one damaged file
    status = _invoke("sweep", "status", str(results.root))
    assert status.exit_code == 0
    assert "1 damaged" in status.stdout and f"{POINTS[0]}: damaged: {fifo}" in status.stdout


def test_emptied_point_is_damaged_in_status_not_done(tmp_path):
    results = _results(tmp_path / "r")
    results.records_path(POINTS[2]).write_bytes(b"")
    result = _invoke("sweep", "status", str(results.root))
    assert result.exit_code == 0, result.output
    assert "2 done, 0 failed, 0 pending, 1 damaged" in result.stdout
    assert f"{POINTS[2]}: damaged: {results.records_path(POINTS[2])}: expected at least one Measurement record" \
        in result.stdout


@pytest.mark.parametrize("cmd", [("analyze",), ("recommend",), ("report",)])
def test_emptied_point_stops_analysis_naming_every_damaged_file(tmp_path, cmd):
    results = _results(tmp_path / "r")
    results.records_path(POINTS[0]).write_bytes(b"")
    results.records_path(POINTS[2]).write_bytes(b"\n\n")
    args = [*cmd, str(results.root)] + (["--out", str(tmp_path / "rep")] if cmd == ("report",) else [])
    err = _assert_user_error(_invoke(*args), "2 damaged point file", "an empty file", "only blank lines")
    lines = err.strip().splitlines()
    assert len(lines) == 3 and str(results.records_path(POINTS[0])) in lines[1]
    assert str(results.records_path(POINTS[2])) in lines[2]


@pytest.mark.parametrize("cmd", [("analyze",), ("recommend",), ("sweep", "status")])
def test_results_dir_without_points_says_what_is_missing(tmp_path, cmd):
    results = _results(tmp_path / "r")
    for path in results.points_dir.iterdir():
        path.unlink()
    results.points_dir.rmdir()
    err = _assert_user_error(_invoke(*cmd, str(results.root)), f"{results.points_dir}: expected the points/ directory",
                             "no such directory")
    assert "numpy" not in err and "pd.array" not in err


def test_results_dir_with_no_finished_point_is_an_empty_frame(tmp_path):
    from collscope.analysis.load import load_results

    results = _results(tmp_path / "r")
    for p in POINTS:
        results.records_path(p).unlink()
    frame = load_results(results.root)
    assert len(frame) == 0 and frame.attrs["failures"] == []


# ---- failures.jsonl ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", READERS)
def test_binary_failures_jsonl_is_named_with_its_line(tmp_path, cmd):
    results = _results(tmp_path / "r")
    results.record_failure(POINTS[0], "timeout", "timeout after 5 s")
    with results.failures_path.open("ab") as fh:
        fh.write(b"\x00\xff\xfe binary\n")
    _assert_user_error(_invoke(*cmd, str(results.root)), f"{results.failures_path}:2:", "not UTF-8")


@pytest.mark.parametrize("cmd", READERS)
def test_failure_without_reason_is_an_error_naming_line_and_field(tmp_path, cmd):
    results = _results(tmp_path / "r")
    results.failures_path.write_text(json.dumps({"point_id": "lost", "detail": "600 s"}) + "\n")
    _assert_user_error(_invoke(*cmd, str(results.root)), f"{results.failures_path}:1:", "reason")


@pytest.mark.parametrize("cmd", READERS)
def test_an_undecodable_line_inside_failures_jsonl_is_an_error(tmp_path, cmd):
    results = _results(tmp_path / "r")
    results.failures_path.write_text('{"point_id": "p-default-r0" "reason": "timeout"}\n'
                                     + json.dumps({"point_id": "lost", "reason": "timeout"}) + "\n")
    _assert_user_error(_invoke(*cmd, str(results.root)), f"{results.failures_path}:1:", "a failure entry")


def test_only_a_half_written_last_failure_line_is_skipped_with_a_note(tmp_path, caplog):
    results = _results(tmp_path / "r")
    results.record_failure("lost", "timeout", "timeout after 600 s")
    with results.failures_path.open("ab") as fh:
        fh.write('{"point_id": "other", "reason": "exit c\u00e9'.encode()[:-1])  # cut inside a character too
    with caplog.at_level(logging.WARNING, logger="collscope.results.store"):
        failures = results.failures()
    assert list(failures) == ["lost"] and failures["lost"].reason == "timeout"
    assert f"{results.failures_path}:2: skipped a half-written last line" in caplog.text
    result = _invoke("sweep", "status", str(results.root), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["failures"] == []  # "lost" is not a planned point


def test_failure_entries_are_typed_strictly():
    good = {"point_id": "a", "reason": "timeout", "detail": "t", "log_tail": "", "duration_s": 1, "time": "x"}
    entries, notes = decode_failure_lines((json.dumps(good) + "\n" + json.dumps(
        {"point_id": "a", "resolved": True, "time": "y"}) + "\n").encode(), "F")
    assert notes == [] and entries[0].duration_s == 1.0 and entries[1].point_id == "a"
    for bad, fragment in [({**good, "duration_s": "1"}, "duration_s of type float"),
                          ({**good, "point_id": 3}, "point_id of type str"),
                          ({**good, "extra": 1}, "unknown field 'extra'"),
                          ({"point_id": "a", "resolved": False}, "resolved: true"),
                          ({"point_id": "a", "resolved": True, "reason": "timeout"}, "resolution")]:
        with pytest.raises(ParseError, match=r"^F:2: ") as info:
            decode_failure_lines(("\n" + json.dumps(bad) + "\n").encode(), "F")
        assert fragment in str(info.value)
    with pytest.raises(ParseError, match="^F:1: "):  # a complete but invalid last line is no half-written line
        decode_failure_lines(b"\x00\x01 binary without newline", "F")



@pytest.mark.parametrize("name", ["sweep.json", "failures.jsonl"])
@pytest.mark.parametrize("cmd", READERS)
def test_a_fifo_for_sweep_json_or_failures_jsonl_is_refused_without_blocking(tmp_path, cmd, name):
    results = _results(tmp_path / "r")
    path = results.root / name
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    _assert_user_error(_invoke(*cmd, str(results.root)), f"{path}: expected", "FIFO")
