"""Measurement record: busbw factors, from_timing identities, JSONL that never leaves half a line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collscope.collectives.record import Measurement, append_jsonl, busbw_factor, read_jsonl, write_jsonl
from collscope.errors import ParseError
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
    assert parse_size(format_size(n)) == n


def test_parse_size_rejects_garbage():
    assert parse_size("128M") == 128 << 20 and parse_size("1MiB") == 1 << 20 and parse_size("8") == 8
    for bad in ("", "1.5", "M", "12Q", "-1"):
        with pytest.raises(ValueError):
            parse_size(bad)
