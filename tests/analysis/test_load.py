"""load_results: results directories, JSONL, nccl-tests outputs -> one DataFrame."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pandas as pd
import pytest
from conftest import FIXTURES, SIZES, Planted

from collscope.analysis.load import (
    RECORD_COLUMNS,
    config_of,
    is_tuning_variable,
    load_results,
)
from collscope.collectives.record import Measurement, write_jsonl
from collscope.errors import ParseError
from collscope.results.decode import read_jsonl


def _records(root: Path) -> list[Measurement]:
    files = sorted(p for p in (root / "points").glob("*.jsonl") if not p.name.endswith(".partial.jsonl"))
    return [r for f in files for r in read_jsonl(f)]


def test_real_sweep_every_record_every_field(mpi_results: Path) -> None:
    df = load_results(mpi_results)
    records = _records(mpi_results)
    assert len(df) == len(records) > 0
    assert list(df.columns[: len(RECORD_COLUMNS)]) == list(RECORD_COLUMNS)
    assert {"config", "applied", "failure"} <= set(df.columns)
    by_key = {(r.point_id, r.size_bytes, r.in_place): r for r in records}
    for row in df.to_dict(orient="records"):
        rec = by_key[(row["point_id"], row["size_bytes"], row["in_place"])]
        for name in msgspec.structs.fields(Measurement):
            if name.name == "settings":
                assert row["config"] == config_of(rec.settings)
            elif name.name == "hosts":
                assert row["hosts"] == ",".join(rec.hosts)
            elif name.name == "environment":  # what the ranks inherited, as sorted K=V joined by ';'
                assert rec.environment is not None
                assert row["environment"] == ";".join(f"{k}={v}" for k, v in sorted(rec.environment.items()))
            else:
                value = getattr(rec, name.name)
                assert (pd.isna(row[name.name]) if value is None else row[name.name] == value), name.name
    assert set(df["config"]) == {"default", *(f"OMPI_MCA_coll_tuned_allreduce_algorithm={i}" for i in (1, 3, 4, 6)),
                                 *(f"OMPI_MCA_coll_tuned_allgather_algorithm={i}" for i in (2, 3, 4))}
    knobs = [c for c in df.columns if c.startswith("OMPI_MCA_")]
    assert knobs == ["OMPI_MCA_coll_tuned_allgather_algorithm", "OMPI_MCA_coll_tuned_allreduce_algorithm"]
    assert df.loc[df["config"] == "default", knobs].isna().all().all()
    assert df["applied"].isna().all() and df["failure"].isna().all()
    assert str(df["applied"].dtype) == "boolean" and str(df["nnodes"].dtype) == "Int64"


def test_planted_directory_columns(planted: Planted) -> None:
    df = load_results(planted.root)
    assert len(df) == 4 * 3 * len(SIZES)  # the partial file and the temp file are not counted
    assert "NCCL_DEBUG" not in df.columns and "NCCL_DEBUG_SUBSYS" not in df.columns
    assert sorted(df["config"].unique()) == sorted([planted.default, planted.tree, planted.ll, planted.simple])
    assert list(df.columns[-2:]) == ["NCCL_ALGO", "NCCL_PROTO"]
    simple = df[df["config"] == planted.simple]
    assert (simple["applied"] == False).all()  # noqa: E712
    assert set(simple["failure"]) == {"setting not applied"}
    tree = df[df["config"] == planted.tree]
    assert tree["applied"].all() and tree["failure"].isna().all() and tree["NCCL_PROTO"].isna().all()
    assert df.loc[df["config"] == planted.default, "applied"].isna().all()
    assert set(df["hosts"]) == {"node01,node 02"}
    assert int((~df["ok"]).sum()) == 1
    lost = df.attrs["failures"]
    assert [f["point_id"] for f in lost] == [planted.lost_point]
    assert lost[0]["reason"] == "timeout" and lost[0]["config"] == "NCCL_PROTO=LL128"


def test_jsonl_and_nccl_tests_files(tmp_path: Path) -> None:
    rec = Measurement.from_timing(op="all_gather", size_bytes=1024, nranks=4, time_us=10.0, engine="torch",
                                  backend="gloo", count=64, dtype="float32", redop=None, root=None, in_place=False,
                                  nnodes=None, settings={"NCCL_ALGO": "Ring", "OMPI_ALLOW_RUN_AS_ROOT": "1"})
    jsonl = tmp_path / "a b.jsonl"
    write_jsonl(jsonl, [rec, msgspec.structs.replace(rec, size_bytes=2048, settings={})])
    text = FIXTURES / "nccl-tests" / "all_reduce_perf-v2.19.6-oob-failed.txt"
    jsn = FIXTURES / "nccl-tests" / "all_reduce_perf-v2.19.6-J-output.json"
    df = load_results([jsonl, text, jsn])
    assert list(df["config"][:2]) == ["NCCL_ALGO=Ring", "default"]
    assert df["nnodes"].isna()[:2].all()
    from_text = df[df["source"] == str(text)]
    assert len(from_text) == 8 and set(from_text["config"]) == {"default"}
    assert not from_text["ok"].all()  # the out-of-bounds file marks its records
    from_json = df[df["source"] == str(jsn)]
    assert set(from_json["config"]) == {"NCCL_ALGO=Ring;NCCL_IB_HCA=mlx5_0,mlx5_1"}  # -J records the env
    assert set(df["source"].dropna()) >= {str(text), str(jsn)}


def test_what_the_nccl_tests_reader_said_reaches_analyze(tmp_path: Path) -> None:
    """The reader's warnings of an nccl-tests output (a run cut before its summary, sizes an rccl-tests results
    file wrote per rank and the reader scaled) are analyze's notes, each naming its file: before, only ingest
    printed them, and analyze showed the kept rows of a cut run without saying it was cut."""
    from collscope.analysis import analyze

    whole = (FIXTURES / "nccl-tests" / "sendrecv_perf-2x8-b200-one-nic-per-gpu.txt").read_text().splitlines()
    cut = tmp_path / "sendrecv_perf-cut.txt"
    cut.write_text("\n".join(whole[:whole.index("# Out of bounds values : 0 OK")]) + "\n")
    scaled = FIXTURES / "rccl-tests" / "reduce_scatter-results-objects-per-line.json"
    df = load_results([cut, scaled])
    notes = analyze(df).notes
    assert any(n.startswith(f"{cut}: incomplete run: the output ends before its summary") for n in notes)
    assert any(n.startswith(f"{scaled}: sizes are one rank's output") for n in notes)
    assert len(df[df["source"] == str(cut)]) == 18  # every row shown is kept
    from collscope.analysis.recommend import recommend

    cut_only = load_results([cut])
    assert any(n.startswith(f"{cut}: incomplete run") for n in recommend(cut_only).notes)


def test_a_record_without_settings_or_point_is_default(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"engine":"mpi","backend":"mpi","op":"all_reduce","size_bytes":8,"count":2,"dtype":"f",'
                    '"redop":"sum","root":null,"in_place":false,"nranks":2,"nnodes":1,"time_us":1.5,'
                    '"algbw_gbps":0.005,"busbw_gbps":0.005}\n')
    df = load_results(path)
    assert df["config"].tolist() == ["default"] and df["point_id"].isna().all() and df["hosts"].tolist() == [""]


def test_slow_path_accepts_what_measurement_accepts(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    line = {"engine": "mpi", "backend": "mpi", "op": "all_reduce", "size_bytes": 8.0, "count": 2, "dtype": "f",
            "redop": "sum", "root": None, "in_place": False, "nranks": 2, "nnodes": 1, "time_us": 1,
            "algbw_gbps": 0.005, "busbw_gbps": 0.005}
    path.write_text(json.dumps(line) + "\n\n" + json.dumps(line) + "\n")
    df = load_results(path)
    assert df["size_bytes"].tolist() == [8, 8] and df["time_us"].dtype == float


@pytest.mark.parametrize("content, line", [
    ('{"engine": "mpi"}\n', 1),  # missing fields
    ('{"engine":"mpi","backend":"mpi","op":"all_reduce","size_bytes":8,"count":2,"dtype":"f","redop":null,'
     '"root":null,"in_place":false,"nranks":2,"nnodes":1,"time_us":1,"algbw_gbps":1,"busbw_gbps":1,"bogus":1}\n', 1),
    ("not json\n", 1),
    ('{"engine":"mpi","backend":"mpi"', 1),  # truncated mid-line
])
def test_damaged_jsonl_names_file_and_line(tmp_path: Path, content: str, line: int) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ParseError) as err:
        load_results(path)
    assert err.value.source == str(path) and err.value.line == line


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="sweep.json missing"):
        load_results(tmp_path)
    with pytest.raises(ParseError, match="existing"):
        load_results(tmp_path / "nope")
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    with pytest.raises(ParseError, match="nccl-tests output"):
        load_results(other)
    with pytest.raises(ParseError):
        load_results([])


def test_config_of_and_tuning_variables() -> None:
    assert config_of({}) == "default"
    assert config_of({"NCCL_DEBUG": "INFO", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                      "OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}) == "default"
    assert config_of({"NCCL_PROTO": "LL", "NCCL_ALGO": "Tree", "NCCL_SOCKET_IFNAME": "eth0"}) == \
        "NCCL_ALGO=Tree;NCCL_PROTO=LL"
    assert config_of({"NCCL_IB_HCA": "=mlx5_0:1;x y"}) == "NCCL_IB_HCA==mlx5_0:1;x y"
    assert is_tuning_variable("NCCL_ALGO") and is_tuning_variable("UCX_TLS")
    assert not is_tuning_variable("NCCL_DEBUG_FILE") and not is_tuning_variable("PMIX_MCA_gds")


def test_settings_that_differ_only_in_logging_are_one_config(tmp_path: Path) -> None:
    base = Measurement.from_timing(op="all_reduce", size_bytes=8, nranks=2, time_us=2.0, engine="mpi", backend="mpi",
                                   count=2, dtype="f", redop="sum", root=None, in_place=False, nnodes=1)
    recs = [msgspec.structs.replace(base, settings={"NCCL_ALGO": "Ring"}),
            msgspec.structs.replace(base, settings={"NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"}),
            msgspec.structs.replace(base, settings={"NCCL_ALGO": "Tree", "NCCL_DEBUG": "WARN"})]
    path = tmp_path / "r.jsonl"
    write_jsonl(path, recs)
    df = load_results(path)
    assert df["config"].tolist() == ["NCCL_ALGO=Ring", "NCCL_ALGO=Ring", "NCCL_ALGO=Tree"]
    assert df["NCCL_ALGO"].tolist() == ["Ring", "Ring", "Tree"]
