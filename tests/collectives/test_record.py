"""Measurement record: busbw factors, from_timing identities, JSONL that never leaves half a line."""

from __future__ import annotations

import json
import re
import threading

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collscope.collectives.record import (
    Measurement,
    Settings,
    append_jsonl,
    busbw_factor,
    columns_checked,
    write_jsonl,
)
from collscope.errors import ParseError
from collscope.results.decode import read_jsonl
from collscope.units import format_size, parse_size


def _rec(**kw) -> Measurement:
    base = dict(engine="mpi", backend="mpi", op="all_reduce", size_bytes=1 << 20, count=262144, dtype="float32",
                redop="sum", root=None, in_place=False, nranks=2, nnodes=1, time_us=100.0)
    base.update(kw)
    return Measurement.from_timing(**base)


def test_factors_match_nccl_tests():
    assert busbw_factor("all_reduce", 8) == pytest.approx(1.75)
    assert busbw_factor("all_gather", 8) == pytest.approx(0.875)
    assert busbw_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert busbw_factor("alltoall", 2) == pytest.approx(0.5)
    assert busbw_factor("broadcast", 16) == 1.0
    with pytest.raises(ValueError, match="unknown collective"):
        busbw_factor("allreduce", 2)


@given(op=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"]),
       nranks=st.integers(1, 4096), size=st.integers(1, 1 << 40), time_us=st.floats(0.01, 1e9))
def test_from_timing_identities(op, nranks, size, time_us):
    r = _rec(op=op, nranks=nranks, size_bytes=size, time_us=time_us)
    assert r.algbw_gbps == pytest.approx(size / (time_us * 1e-6) / 1e9)
    assert r.busbw_gbps == pytest.approx(r.algbw_gbps * busbw_factor(op, nranks))


def test_jsonl_round_trip_and_append(tmp_path):
    path = tmp_path / "sub" / "r.jsonl"
    recs = [_rec(size_bytes=s, settings={"NCCL_ALGO": "Ring"}, hosts=("a", "b")) for s in (8, 1024)]
    assert write_jsonl(path, recs) == 2
    assert append_jsonl(path, [_rec(repeat=1)]) == 1
    back = list(read_jsonl(path))
    assert back[:2] == recs and back[2].repeat == 1
    assert not list(tmp_path.glob("sub/.r.jsonl.*"))


def test_read_reports_half_written_and_bad_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    write_jsonl(path, [_rec()])
    with path.open("a") as fh:
        fh.write('{"engine": "mpi", "op"')
    with pytest.raises(ParseError) as info:
        list(read_jsonl(path))
    assert info.value.line == 2 and "ends mid-line" in str(info.value)
    path.write_text(json.dumps({"engine": "mpi", "bogus": 1}) + "\n")
    with pytest.raises(ParseError, match=r"r.jsonl:1: expected a Measurement record"):
        list(read_jsonl(path))


@given(st.integers(0, 1 << 44))
def test_size_format_parse_round_trip(n):
    """Every form reads back to within 0.5% (3 significant figures: 10030 -> 9.79K)..."""
    text = format_size(n)
    value = float(text[:-1]) * parse_size("1" + text[-1]) if text[-1].isalpha() else float(text)
    assert abs(value - n) <= 0.005 * n


@given(st.integers(1, 1023), st.sampled_from([0, 10, 20, 30]), st.integers(0, 1))
def test_size_format_parse_round_trip_exact(k, shift, halvings):
    """... and whole or half units (8, 1000K, 1.5K, 9.5M, 511.5G) exactly."""
    n = max(k << shift >> halvings, 1) if shift else k
    assert parse_size(format_size(n)) == n


def test_parse_size_rejects_garbage():
    assert parse_size("128M") == 128 << 20 and parse_size("1MiB") == 1 << 20 and parse_size("8") == 8
    for bad in ("", "1.5", "M", "12Q", "-1"):
        with pytest.raises(ValueError):
            parse_size(bad)


@pytest.mark.parametrize("field, value, words", [
    ("op", "nope", "op='nope'"), ("size_bytes", -8, "size_bytes=-8"), ("nranks", 0, "nranks=0"),
    ("engine", "nccl", "engine='nccl'"), ("time_us", -1.0, "time_us=-1.0"), ("time_us", float("nan"), "time_us=nan"),
    ("size_bytes", "8", "size_bytes='8'"),
])
def test_invalid_values_are_refused_naming_the_field(field, value, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        Measurement(**{**_rec().to_dict(), field: value})
    with pytest.raises(ValueError, match=re.escape(words)):  # every way of making one validates
        msgspec.structs.replace(_rec(), **{field: value})
    with pytest.raises(ValueError, match=field):
        Measurement.from_dict({**_rec().to_dict(), field: value})


def test_columns_checked_lifts_the_check_only_inside_and_only_in_its_own_thread():
    bad = {**_rec().to_dict(), "op": "nope"}
    made: list[object] = []
    with columns_checked():
        assert Measurement(**bad).op == "nope"  # the builder inside has checked its columns itself
        worker = threading.Thread(target=lambda: made.append(_try(lambda: Measurement(**bad))))
        worker.start()
        worker.join()
    assert isinstance(made[0], ValueError) and "op='nope'" in str(made[0])  # another thread is checked as ever
    with pytest.raises(ValueError, match="op='nope'"):
        Measurement(**bad)
    with pytest.raises(RuntimeError), columns_checked():
        raise RuntimeError("a builder fails inside")
    with pytest.raises(ValueError, match="op='nope'"):  # ... and the check is back after it
        Measurement(**bad)


def _try(make):
    try:
        return make()
    except ValueError as exc:
        return exc


def test_records_are_hashable_and_settings_immutable():
    a = _rec(settings={"NCCL_ALGO": "Ring"}, hosts=["h1", "h2"])
    b = Measurement.from_dict(json.loads(json.dumps(a.to_dict())))
    assert a == b and hash(a) == hash(b) and len({a, b, _rec()}) == 2
    assert type(a.settings) is Settings and a.settings == {"NCCL_ALGO": "Ring"} and a.hosts == ("h1", "h2")
    for change in (lambda s: s.__setitem__("NCCL_ALGO", "Tree"), lambda s: s.update(X="1"),
                   lambda s: s.pop("NCCL_ALGO"), lambda s: s.clear(), lambda s: s.setdefault("X", "1"),
                   lambda s: s.__delitem__("NCCL_ALGO")):
        with pytest.raises(TypeError, match="immutable"):
            change(a.settings)
    assert a.settings == {"NCCL_ALGO": "Ring"}
    with pytest.raises(ValueError, match="text values"):
        _rec(settings={"NCCL_NCHANNELS": 4})


def test_to_dict_is_todays_json_shape():
    d = _rec(settings={"B": "2", "A": "1"}, hosts=("n1",)).to_dict()
    assert type(d["settings"]) is dict and d["settings"] == {"A": "1", "B": "2"} and d["hosts"] == ["n1"]
    assert list(d) == list(Measurement.__struct_fields__)
    json.dumps(d)


def test_on_disk_format_is_unchanged(tmp_path):
    rec = _rec(settings={"NCCL_ALGO": "Ring"}, hosts=("a",), point_id="p1", timestamp="t")
    path = tmp_path / "r.jsonl"
    write_jsonl(path, [rec])
    assert path.read_text() == json.dumps(rec.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"
    assert json.loads(path.read_text())["settings"] == {"NCCL_ALGO": "Ring"}


_LINE = {"engine": "mpi", "backend": "mpi", "op": "all_reduce", "size_bytes": 1048576, "count": 2, "dtype": "f",
         "redop": "sum", "root": None, "in_place": False, "nranks": 2, "nnodes": 1, "time_us": 1,
         "algbw_gbps": 0.5, "busbw_gbps": 0.5}


@pytest.mark.parametrize("field, value", [
    ("ok", "false"), ("size_bytes", 1048576.9), ("in_place", 0), ("nranks", True), ("settings", {"A": 1}),
    ("hosts", "node1"), ("time_us", "1.5"), ("op", "nope"), ("size_bytes", -1), ("engine", None),
])
def test_strict_decoding_names_file_line_and_field(tmp_path, field, value):
    path = tmp_path / "bad file.jsonl"
    path.write_text(json.dumps(_LINE) + "\n\n" + json.dumps({**_LINE, field: value}) + "\n")
    with pytest.raises(ParseError) as info:
        read_jsonl(path)
    assert info.value.source == str(path) and info.value.line == 3 and field in str(info.value)


def test_whole_floats_in_integer_fields_load_as_integers(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({**_LINE, "size_bytes": 1048576.0, "iters": 20.0}) + "\n")
    rec = read_jsonl(path)[0]
    assert rec.size_bytes == 1048576 and type(rec.size_bytes) is int and rec.iters == 20
    assert type(rec.time_us) is float
