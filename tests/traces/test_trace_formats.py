"""Trace inputs as people publish them (issue 23 items 4 and 5): the format registry, Flight Recorder's default
pickle dumps (read as plain data only), NCCL Inspector pretty-printed JSON and Prometheus text, and trace
directories that also hold other files."""

from __future__ import annotations

import json
import os
import pickle
import pickletools
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.errors import ParseError
from collscope.traces.formats import FORMAT_NAMES, FORMATS, detect_trace_format
from collscope.traces.inspector_prom import NO_RANK_WARNING
from collscope.traces.load import MAX_TRACE_BYTES_ENV, parse_trace_bytes, read_traces
from tests.traces import trace_fixtures as fx

FIXTURES = Path(__file__).parent.parent / "fixtures" / "traces"


def fr_pickle_doc(rank: int) -> dict[str, Any]:
    """What ``_dump_fr_trace()`` unpickles to (torch ``FlightRecorderDetail.hpp`` ``dump_dict``): the JSON dump's
    content, but ``process_group`` a tuple, times not seen yet None, ``pg_status`` ints, stack ``frames``."""
    doc = fx.flight_recorder(rank)
    frames = [{"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py", "line": 2813},
              {"name": "train_step", "filename": "/work/job/train.py", "line": 88}]
    entries = []
    for e in doc["entries"]:
        e = dict(e, process_group=tuple(e["process_group"]), time_discovered_completed_ns=None, frames=frames)
        entries.append(e)
    return {"version": doc["version"], "pg_config": doc["pg_config"], "comm_lib_version": doc["comm_lib_version"],
            "pg_status": {"0": {"last_enqueued_collective": 2, "last_started_collective": 2,
                                "last_completed_collective": 2}},
            "entries": entries}


def _calls(traces):
    return [[(c.op, c.size_bytes, c.group_size, c.process_group, c.seq, c.duration_us, c.group_ranks)
             for c in t.calls] for t in traces]


# --- the registry --------------------------------------------------------------------------------------------


def _heads() -> dict[str, bytes]:
    return {
        "kineto": json.dumps(fx.nccl_kernel_metadata(0)).encode(),
        "flight-recorder-json": json.dumps(fx.flight_recorder(0)).encode(),
        "flight-recorder-pickle": pickle.dumps(fr_pickle_doc(0), protocol=2),
        "inspector-jsonl": fx.inspector_lines(0).encode(),
        "inspector-json": (FIXTURES / "inspector-pretty" / "tray07-pid52810.log").read_bytes(),
        "inspector-prom": next((FIXTURES / "inspector-prom-v5.1").iterdir()).read_bytes(),
    }


def test_every_format_is_a_row_and_recognises_its_own_input():
    heads = _heads()
    assert set(heads) == set(FORMAT_NAMES)
    for name, data in heads.items():
        fmt = detect_trace_format(data[:4096])
        assert fmt is not None and fmt.name == name, name
    for fmt in FORMATS:  # one parse signature: (data, source, rank_hint) -> [RankTrace]
        traces = fmt.parse(heads[fmt.name], f"x/{fmt.name}", 0)
        assert traces and all(t.calls for t in traces), fmt.name


@pytest.mark.parametrize("head", [b"", b"# README\n", b"#!/bin/bash\nsrun x\n", b"\x00\x01binary", b'{"a": 1}',
                                  pickle.dumps([1, 2, 3], protocol=2)])
def test_what_no_row_recognises(head):
    assert detect_trace_format(head) is None


# --- Flight Recorder pickle ----------------------------------------------------------------------------------


@pytest.mark.parametrize("names", [("nccl_trace_rank_0", "nccl_trace_rank_1"), ("trace_0", "trace_1"),
                                   ("comm_lib_trace_rank_0", "comm_lib_trace_rank_1")])
@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_flight_recorder_pickle_dumps_read_like_the_json_ones(tmp_path, names, protocol):
    pk, js = tmp_path / "pickle", tmp_path / "json"
    pk.mkdir()
    js.mkdir()
    for rank, name in enumerate(names):
        (pk / name).write_bytes(pickle.dumps(fr_pickle_doc(rank), protocol=protocol))
        fx.write(js / f"rank{rank}.json", fx.flight_recorder(rank))
    from_pickle = read_traces([pk])
    assert [(t.kind, t.rank) for t in from_pickle] == [("flight_recorder", 0), ("flight_recorder", 1)]
    assert _calls(from_pickle) == _calls(read_traces([js]))
    assert from_pickle[0].calls[0].group_ranks == (0, 1)  # pg_config's "[0, 1]"


def _malicious(canary: Path) -> bytes:
    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {canary}",))

    return pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [Boom()]}, protocol=2)


def test_a_pickle_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    canary = tmp_path / "canary"
    data = _malicious(canary)
    assert any(op.name == "REDUCE" for op, _, _ in pickletools.genops(data))
    dump = tmp_path / "nccl_trace_rank_0"
    dump.write_bytes(data)
    with pytest.raises(ParseError) as err:
        read_traces([dump])
    message = str(err.value)
    assert str(dump) in message and f"{os.system.__module__}.system" in message and "refused" in message
    assert not canary.exists()
    result = CliRunner().invoke(main, ["trace", str(dump)])
    assert result.exit_code == 2 and "Traceback" not in result.output and "refused" in result.output
    assert not canary.exists()


@pytest.mark.parametrize(("data", "named"), [
    (b"\x80\x02}q\x00(X\x07\x00\x00\x00entriesq\x01cbuiltins\neval\nq\x02X\x04\x00\x00\x001+1q\x03\x85q\x04Rq\x05u.",
     "builtins.eval"),  # GLOBAL + REDUCE
    (b"\x80\x04}\x8c\x07entries\x8c\x02os\x8c\x06getcwd\x93)Rs.",
     "os.getcwd"),  # STACK_GLOBAL + REDUCE
    (b"\x80\x02}X\x07\x00\x00\x00entriesX\x01\x00\x00\x00aQs.", "persistent id"),  # BINPERSID
    (b"\x80\x02}X\x07\x00\x00\x00entries\x82\x01s.", None),  # EXT1: no extension registered
    (b"\x80\x02}X\x07\x00\x00\x00entriesX\x01\x00\x00\x00aRs.", None),  # REDUCE on a string
    (b"\x80\x03}X\x07\x00\x00\x00entriesC\x03abcs.", "bytes"),  # bytes: not FR's data
])
def test_hostile_pickles_are_refused_with_the_file_named(tmp_path, data, named):
    dump = tmp_path / "trace_0"
    dump.write_bytes(data)
    with pytest.raises(ParseError) as err:
        read_traces([dump])
    assert str(dump) in str(err.value)
    if named is not None:
        assert named in str(err.value)


def test_a_pickle_referring_to_itself_is_refused_not_walked(tmp_path):
    loop: list[Any] = []
    loop.append(loop)
    fan: list[Any] = []
    for _ in range(60):  # 2**60 paths through 60 shared lists
        fan = [fan, fan]
    for i, value in enumerate((loop, fan)):
        dump = tmp_path / f"trace_{i}"
        dump.write_bytes(pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [], "x": value}, protocol=2))
        with pytest.raises(ParseError, match="refer"):
            read_traces([dump])


def test_a_pickle_naming_a_huge_memo_index_allocates_nothing(tmp_path):
    """C's unpickler sizes its memo by the largest PUT index: these 24 bytes would cost it 760 MiB (and 64 GiB
    with index 2**32 - 1); the reader's dict memo costs nothing."""
    import tracemalloc

    dump = tmp_path / "trace_0"
    dump.write_bytes(b"\x80\x02}X\x07\x00\x00\x00entriesNr" + (50_000_000).to_bytes(4, "little") + b"s.")
    tracemalloc.start()
    try:
        with pytest.raises(ParseError, match=str(dump)):
            read_traces([dump])  # entries: None is no list of entries
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20


def test_a_pickle_above_the_cap_is_refused(tmp_path, monkeypatch):
    dump = tmp_path / "nccl_trace_rank_0"
    dump.write_bytes(pickle.dumps(fr_pickle_doc(0), protocol=2))
    monkeypatch.setenv(MAX_TRACE_BYTES_ENV, "1K")
    with pytest.raises(ParseError, match=MAX_TRACE_BYTES_ENV):
        read_traces([dump])
    monkeypatch.setenv(MAX_TRACE_BYTES_ENV, "1M")
    assert read_traces([dump])[0].calls


def test_a_pickle_that_is_not_a_dump_is_named_without_its_raw_bytes(tmp_path):
    path = tmp_path / "trace_0"
    path.write_bytes(pickle.dumps(list(range(50)), protocol=2))
    with pytest.raises(ParseError) as err:
        read_traces([path])
    assert "pickle that is not a Flight Recorder dump" in str(err.value)
    assert "\\x80" not in str(err.value) and "\x80" not in str(err.value)


def test_a_cut_pickle_is_a_parse_error(tmp_path):
    data = pickle.dumps(fr_pickle_doc(0), protocol=2)
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match="damaged pickle"):
        read_traces([path])


# --- NCCL Inspector ------------------------------------------------------------------------------------------


def _objects(text: str) -> list[Any]:
    decoder, pos, out = json.JSONDecoder(), 0, []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return out
        obj, pos = decoder.raw_decode(text, pos)
        out.append(obj)


def test_inspector_pretty_printed_reads_like_json_lines(tmp_path):
    pretty = read_traces([FIXTURES / "inspector-pretty"])
    for path in sorted((FIXTURES / "inspector-pretty").iterdir()):  # the same records, one per line
        objs = _objects(path.read_text())
        assert len(objs) == 3
        (tmp_path / path.name).write_text("".join(json.dumps(o) + "\n" for o in objs))
    assert _calls(pretty) == _calls(read_traces([tmp_path]))
    assert [t.rank for t in pretty] == [0, 1] and {t.host for t in pretty} == {"tray07"}
    ag = pretty[0].calls[1]
    assert (ag.op, ag.size_bytes, ag.group_size, ag.group_nnodes) == ("all_gather", 4 * 67108864, 4, 1)
    [array] = read_traces([FIXTURES / "inspector-pretty-array.json"])  # jq -s: one array of the objects
    assert _calls([array]) == _calls(pretty[:1])


def test_inspector_pretty_cut_short_says_truncated(tmp_path):
    text = (FIXTURES / "inspector-pretty" / "tray07-pid52810.log").read_text()
    path = tmp_path / "tray07-pid52810.log"
    path.write_text(text[: int(len(text) * 0.6)])
    with pytest.raises(ParseError, match="truncated") as err:
        read_traces([path])
    assert str(path) in str(err.value)


def test_inspector_p2p_records_are_counted_and_left_out(tmp_path):
    lines = fx.inspector_lines(0).splitlines()
    p2p = {"header": {"id": "0x7f8c496ae9f661", "rank": 0, "n_ranks": 2, "nnodes": 1}, "metadata": {},
           "p2p_perf": {"p2p": "Send", "p2p_sn": 7, "p2p_peer": 1, "p2p_msg_size_bytes": 1 << 20,
                        "p2p_exec_time_us": 80, "p2p_timing_source": "kernel_gpu", "p2p_algobw_gbs": 13.1,
                        "p2p_busbw_gbs": 13.1}}
    path = tmp_path / "h-pid1.log"
    path.write_text("\n".join([lines[0], json.dumps(p2p), *lines[1:]]) + "\n")
    [t] = read_traces([path])
    assert len(t.calls) == len(lines) and any("1 point-to-point records (p2p_perf)" in w for w in t.warnings)


def test_inspector_prometheus_buckets_per_gpu_of_two_nodes():
    traces = read_traces([FIXTURES / "inspector-prom-v5.1"])
    assert [(t.kind, t.rank, t.host) for t in traces] == [
        ("inspector_prom", 0, "gb2-r03-t05"), ("inspector_prom", 1, "gb2-r03-t05"),
        ("inspector_prom", 2, "gb2-r03-t06"), ("inspector_prom", 3, "gb2-r03-t06")]
    ar, ag = traces[2].calls  # gb2-r03-t06 GPU0
    assert (ar.op, ar.group_size, ar.group_nnodes, ar.process_group) == ("all_reduce", 4, 2, "DP Group 0")
    assert ar.duration_us == pytest.approx(57192.4)
    # size from Inspector's own busbw and time (busbw / 2(n-1)/n x time), inside the 1-2GB bucket
    assert ar.size_bytes == round(41.9731 / 1.5 * 1e9 * 57192.4e-6) and 1 << 30 <= ar.size_bytes < 2 << 30
    assert ag.op == "all_gather" and 4 * (64 << 20) <= ag.size_bytes < 4 * (65 << 20)  # x nranks: the total
    assert ag.size_bytes == round(38.0814 / 0.75 * 1e9 * 5352.75e-6)
    warnings = {w for t in traces for w in t.warnings}
    assert NO_RANK_WARNING in warnings and any("kept within the bucket" in w for w in warnings)
    assert any("0 = gb2-r03-t05 GPU0, 1 = gb2-r03-t05 GPU1, 2 = gb2-r03-t06 GPU0, 3 = gb2-r03-t06 GPU1" in w
               for w in warnings)
    assert any("point-to-point samples" in w for w in warnings)


def test_inspector_prometheus_before_2_30_keeps_rank_and_sequence():
    [t] = read_traces([FIXTURES / "inspector-prom-2.29"])
    assert (t.rank, t.host) == (5, "hgx-b12")  # the rank in the largest communicator
    ar, rs = t.calls
    assert (ar.op, ar.size_bytes, ar.seq, ar.group_size, ar.process_group) == (
        "all_reduce", 2 << 30, 230117, 8, "0xa41c92e07bd315")
    assert (rs.op, rs.size_bytes, rs.group_size) == ("reduce_scatter", 2 * (256 << 20), 2)
    stamp = datetime(2026, 3, 14, 9, 26, 53, tzinfo=timezone.utc).timestamp()
    assert ar.start_us == pytest.approx(stamp * 1e6)


def test_a_prometheus_bucket_without_busbw_is_read_at_its_lower_size(tmp_path):
    path = tmp_path / "nccl_inspector_metrics_GPU-1.prom"
    path.write_text('nccl_collective_exec_time_microseconds{node="n1",gpu="GPU0",comm_name="c",n_nodes="1",'
                    'nranks="8",collective="ReduceScatter",message_size="4-5GB",algo_proto="Ring_simple"} 9000\n')
    [t] = read_traces([path])
    assert t.calls[0].size_bytes == 8 * (4 << 30) and any("lower size" in w for w in t.warnings)


@pytest.mark.parametrize("line", [
    'nccl_bus_bandwidth_gbs{collective="AllReduce",nranks="4",message_size="lots"} 1',
    'nccl_bus_bandwidth_gbs{collective="AllReduce",nranks="4",message_size="1-2GB"',
    'nccl_collective_exec_time_microseconds{collective="Frobnicate",nranks="4",message_size="1-2GB"} 3',
])
def test_damaged_prometheus_samples_name_the_line(tmp_path, line):
    path = tmp_path / "nccl_inspector_metrics_GPU-1.prom"
    good = 'nccl_collective_exec_time_microseconds{collective="AllReduce",nranks="4",message_size="1-2GB"} 9'
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(ParseError) as err:
        read_traces([path])
    assert f"{path}:2" in str(err.value) or str(path) in str(err.value)


# --- trace directories with other files ----------------------------------------------------------------------


def _mixed_dir(tmp_path: Path) -> Path:
    job = tmp_path / "job-88231"
    shutil.copytree(FIXTURES / "not-traces", job)
    for rank in (0, 1):
        (job / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(fr_pickle_doc(rank), protocol=2))
    return job


def test_a_trace_directory_skips_what_is_not_a_trace_and_names_it(tmp_path):
    job = _mixed_dir(tmp_path)
    traces = read_traces([job])
    assert [t.rank for t in traces] == [0, 1]
    notes = [w for w in traces[0].warnings if "skipped" in w]
    assert sorted(Path(n.split(":")[0]).name for n in notes) == ["README.md", "launch.sh", "nvidia-smi.log",
                                                                  "slurm-88231.out"]
    result = CliRunner().invoke(main, ["trace", str(job)])
    assert result.exit_code == 0, result.output
    assert "slurm-88231.out" in result.output and "README.md" in result.output


@pytest.mark.parametrize("damage", ["cut-pickle", "cut-json", "bad-inspector-line"])
def test_a_damaged_trace_in_a_directory_is_still_an_error(tmp_path, damage):
    job = _mixed_dir(tmp_path)
    if damage == "cut-pickle":
        bad = job / "nccl_trace_rank_1"
        bad.write_bytes(bad.read_bytes()[:300])
    elif damage == "cut-json":
        bad = job / "rank2.json"
        text = json.dumps(fx.nccl_kernel_metadata(2, world=4))
        bad.write_text(text[: len(text) // 2])
    else:
        bad = job / "host-pid9.log"
        bad.write_text(fx.inspector_lines(3).splitlines()[0] + "\n{\"header\": {\"id\": 3}}\n")
    with pytest.raises(ParseError) as err:
        read_traces([job])
    assert str(bad) in str(err.value)
    result = CliRunner().invoke(main, ["trace", str(job)])
    assert result.exit_code == 2 and "Traceback" not in result.output and bad.name in result.output


def test_a_directory_of_no_traces_is_an_error_naming_what_it_holds(tmp_path):
    job = tmp_path / "job"
    shutil.copytree(FIXTURES / "not-traces", job)
    with pytest.raises(ParseError) as err:
        read_traces([job])
    assert all(name in str(err.value) for name in ("README.md", "launch.sh", "nvidia-smi.log", "slurm-88231.out"))


def test_a_file_named_on_the_command_line_must_be_a_trace(tmp_path):
    path = tmp_path / "README.md"
    shutil.copy(FIXTURES / "not-traces" / "README.md", path)
    with pytest.raises(ParseError, match="Flight Recorder dumps of job"):
        read_traces([path])


def test_parse_trace_bytes_names_binary_input_without_dumping_it():
    with pytest.raises(ParseError) as err:
        parse_trace_bytes(b"\x00\x01\x02\xff\xfe garbage", "blob")
    assert "binary data (first bytes 00 01 02" in str(err.value)

