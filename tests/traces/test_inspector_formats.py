"""NCCL Inspector's JSON format versions v4.0 to v4.4 and its Prometheus v5.1 text, on fixtures written in each
real shape (tests/fixtures/inspector-v4x/: NCCL plugins/profiler/inspector inspector_json.cc, inspector_prom.cc and
README): per-record lines (v4.0), dump_stats markers with self-contained lines and coll_algo/coll_proto (v4.2),
marker streams with bare records and flat Proxy records (v4.3), nested Proxy records and a zero-record marker
(v4.4), a stream cut mid-line, a stream whose start is missing, and a Prometheus file with algo_proto and the
per-device counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.errors import ParseError
from collscope.observe import query
from collscope.traces.formats import detect_trace_format
from collscope.traces.inspector import read_inspector
from collscope.traces.inspector_prom import read_inspector_prom
from collscope.traces.inspector_stream import AlgoProto, algo_proto, parse_algo_proto_label
from collscope.traces.load import read_traces
from collscope.vocab.nccl import ALGORITHMS, PROTOCOLS

FIXTURES = Path(__file__).parent.parent / "fixtures" / "inspector-v4x"
V40 = FIXTURES / "v4.0-dgx-a100-c11-pid30417.log"
V42 = FIXTURES / "v4.2-dgx-h100-a07-pid41122.log"
V43 = FIXTURES / "v4.3-gb200-r02-t03-pid77310.log"
V44 = FIXTURES / "v4.4-dgx-h100-b04-pid1639453.log"
CUT = FIXTURES / "v4.4-cut-dgx-h100-b04-pid1639454.log"
HEADLESS = FIXTURES / "v4.3-headless-gb200-r02-t03-pid77311.log"
PROM = next((FIXTURES / "prom-v5.1").iterdir())
GiB, MiB = 1 << 30, 1 << 20


def _pairs(choices: tuple[AlgoProto | None, ...]) -> list[tuple[str | None, str | None] | None]:
    return [None if c is None else (c.algorithm, c.protocol) for c in choices]


# --- each JSON shape: calls, their communicator, NCCL's choices -----------------------------------------------


@pytest.mark.parametrize(("path", "rank", "calls", "choices"), [
    (V40, 3, [("all_reduce", 256 * MiB, 8), ("all_gather", 8 * 32 * MiB, 8), ("all_reduce", 256 * MiB, 8)],
     [None, None, None]),
    (V42, 5, [("all_reduce", GiB, 8), ("all_reduce", 64 << 10, 8), ("reduce_scatter", 8 * 16 * MiB, 8),
              ("all_reduce", GiB, 8)],
     [("NVLS", "Simple"), ("Ring", "LL"), ("Ring", "LL128"), ("NVLS", "Simple")]),
    (V43, 1, [("all_gather", 4 * 8 * MiB, 4), ("all_reduce", 128 * MiB, 4), ("all_reduce", 128 * MiB, 4)],
     [("Ring", "Simple"), ("NVLS", "Simple"), ("NVLS", "Simple")]),
    (V44, 2, [("all_reduce", 16 * GiB, 8), ("all_gather", 8 * 256 * MiB, 8), ("reduce_scatter", 8 * 64 * MiB, 8),
              ("all_reduce", MiB, 8), ("all_reduce", 16 * GiB, 8)],
     [("NVLS", "Simple"), ("Ring", "Simple"), ("Ring", "LL128"), ("Ring", "LL"), ("NVLS", "Simple")]),
], ids=["v4.0", "v4.2", "v4.3", "v4.4"])
def test_each_version_reads_its_collectives_with_their_algorithm_and_protocol(path, rank, calls, choices):
    read = read_inspector(path.read_bytes(), str(path))
    [trace] = read.traces
    assert (trace.kind, trace.rank) == ("inspector", rank)
    assert [(c.op, c.size_bytes, c.group_size) for c in trace.calls] == calls
    assert _pairs(read.choices[0]) == choices
    assert [None if c.algorithm is None and c.protocol is None else (c.algorithm, c.protocol)
            for c in trace.calls] == choices  # on the calls themselves, for trace and observe
    assert read.versions == (path.name[:4],)
    assert [(t.rank, len(t.calls)) for t in read_traces([path])] == [(rank, len(calls))]  # the public loader


def test_a_marker_streams_bare_records_take_the_markers_communicator_and_host():
    read = read_inspector(V44.read_bytes(), str(V44))
    [trace] = read.traces
    assert {(c.process_group, c.group_size, c.group_nnodes) for c in trace.calls} == {("0x7f8c496ae9f661", 8, 1)}
    assert trace.host == "dgx-h100-b04"
    assert [c.seq for c in trace.calls] == [1407, 1408, 1409, 1538, 1539]
    assert trace.calls[0].start_us == 1748030377748202  # the first marker's dump_timestamp_us
    assert trace.calls[3].start_us == 1748030378701000  # a verbose record's own event_trace_ts.coll_start_ts
    assert trace.calls[4].start_us == 1748030378748911  # the second marker's
    v43 = read_inspector(V43.read_bytes(), str(V43)).traces[0]  # the README's marker header has no comm_name
    assert {(c.process_group, c.group_size) for c in v43.calls} == {("0x1e77c0a45b9d2f08", 4)}
    assert v43.calls[2].start_us == 1764641001010452


def test_markers_proxy_and_p2p_records_are_counted_and_left_out():
    read = read_inspector(V44.read_bytes(), str(V44))
    assert (read.markers, read.p2p_records, read.missing_records, read.cut_line) == (3, 1, 0, None)
    assert dict(read.proxy_records) == {"proxy_op_start": 1, "proxy_op_segment": 1, "proxy_op": 1}
    warnings = read.traces[0].warnings
    assert f"{V44}: 1 point-to-point records (p2p_perf) left out: collscope reads collectives" in warnings
    assert any("3 Proxy records (proxy_trace: 1 proxy_op, 1 proxy_op_segment, 1 proxy_op_start)" in w
               for w in warnings)
    v43 = read_inspector(V43.read_bytes(), str(V43))
    assert (v43.markers, dict(v43.proxy_records)) == (2, {"proxy_step": 1, "proxy_op": 1})
    v42 = read_inspector(V42.read_bytes(), str(V42))  # self-contained lines still use up their marker's count
    assert (v42.markers, v42.missing_records, v42.p2p_records, dict(v42.proxy_records)) == (2, 0, 0, {})


def test_ring_losses_are_summed_per_communicator_and_warned():
    read = read_inspector(V44.read_bytes(), str(V44))
    losses = {(loss.comm_id, loss.rank): (loss.markers, loss.coll_dropped, loss.p2p_dropped) for loss in read.losses}
    # DP: 512 then 128 since the last dump (cumulative 640); TP: one zero-record marker reporting 1024 lost
    assert losses == {("0x7f8c496ae9f661", 2): (2, 640, 0), ("0x2b0e99d1c4a37f52", 0): (1, 1024, 0)}
    warnings = read.traces[0].warnings
    assert any("overwrote 640 collective records of communicator 0x7f8c496ae9f661 (DP Group 0), rank 2" in w
               and "undercounts" in w for w in warnings)
    assert any("overwrote 1024 collective records of communicator 0x2b0e99d1c4a37f52 (TP Group 0), rank 0" in w
               for w in warnings)
    assert [t.rank for t in read.traces] == [2]  # the zero-record marker adds no trace
    v43 = read_inspector(V43.read_bytes(), str(V43))
    [loss] = v43.losses
    assert (loss.coll_dropped, loss.proxy_dropped, loss.comm_name) == (96, 2, None)
    assert read_inspector(V42.read_bytes(), str(V42)).losses == ()  # markers without loss say nothing


def test_losses_keep_the_cumulative_total_when_earlier_dumps_are_missing(tmp_path):
    lines = V44.read_text().splitlines(keepends=True)
    path = tmp_path / "late-pid1.log"
    path.write_text("".join(lines[9:]))  # only the second DP dump: 128 since the last, 640 in all
    [loss] = read_inspector(path.read_bytes(), str(path)).losses
    assert loss.coll_dropped == 640


# --- damaged and partial streams -------------------------------------------------------------------------------


def test_a_stream_cut_mid_line_keeps_what_was_written_and_says_so():
    read = read_inspector(CUT.read_bytes(), str(CUT))
    assert (read.cut_line, read.missing_records) == (11, 2)  # the second DP dump announced 2, none arrived whole
    assert [c.seq for c in read.traces[0].calls] == [1407, 1408, 1409]
    assert any(w.startswith(f"{CUT}: line 11 is cut mid-way") for w in read.traces[0].warnings)
    assert any("2 records announced by dump_stats markers are not in the file" in w for w in read.traces[0].warnings)
    assert len(read_traces([CUT])[0].calls) == 3


def test_a_damaged_line_inside_the_stream_is_still_an_error(tmp_path):
    lines = CUT.read_text().splitlines(keepends=True)
    path = tmp_path / "h-pid2.log"
    path.write_text("".join(lines) + "\n")  # the cut line is no longer last: the file is damaged, not cut
    with pytest.raises(ParseError) as err:
        read_traces([path])
    assert f"{path}:11:" in str(err.value)


def test_a_bare_record_before_any_marker_names_the_file_line_and_the_missing_marker():
    fmt = detect_trace_format(HEADLESS.read_bytes()[:4096])
    assert fmt is not None and fmt.name == "inspector-jsonl"  # recognised, then said what is missing
    with pytest.raises(ParseError) as err:
        read_traces([HEADLESS])
    message = str(err.value)
    assert f"{HEADLESS}:1:" in message and "dump_stats marker" in message
    assert "coll_perf record without header" in message
    result = CliRunner().invoke(main, ["trace", str(HEADLESS)])
    assert result.exit_code == 2 and "Traceback" not in result.output and "dump_stats marker" in result.output


def test_a_bare_record_beyond_its_markers_count_is_an_error(tmp_path):
    lines = V44.read_text().splitlines(keepends=True)
    path = tmp_path / "h-pid3.log"
    path.write_text("".join(lines[:4] + [lines[3]] + lines[4:]))  # a fourth coll_perf after a marker of 3
    with pytest.raises(ParseError) as err:
        read_traces([path])
    assert f"{path}:5:" in str(err.value) and "no more coll_perf records than the dump_stats marker at line 1" \
        in str(err.value)


def test_a_marker_without_header_is_an_error(tmp_path):
    marker = json.loads(V44.read_text().splitlines()[0])
    del marker["header"]
    path = tmp_path / "h-pid4.log"
    path.write_text(V40.read_text() + json.dumps(marker) + "\n")
    with pytest.raises(ParseError, match=r"h-pid4\.log:5: expected a dump_stats marker with its header"):
        read_traces([path])


def test_negative_marker_counts_are_an_error(tmp_path):
    lines = V44.read_text().splitlines(keepends=True)
    path = tmp_path / "h-pid5.log"
    path.write_text(lines[0].replace('"coll_records":3', '"coll_records":-3') + "".join(lines[1:]))
    with pytest.raises(ParseError, match=r"h-pid5\.log:1:"):
        read_traces([path])


def test_a_marker_stream_pretty_printed_by_jq_reads_like_its_lines(tmp_path):
    objects = [json.loads(line) for line in V44.read_text().splitlines()]
    pretty = tmp_path / "dgx-h100-b04-pid1639453.json"
    pretty.write_text("".join(json.dumps(o, indent=2) + "\n" for o in objects))  # jq .
    array = tmp_path / "all.json"
    array.write_text(json.dumps(objects, indent=2))  # jq -s .
    lines = read_inspector(V44.read_bytes(), str(V44))
    for path in (pretty, array):
        fmt = detect_trace_format(path.read_bytes()[:65536])
        assert fmt is not None and fmt.name == "inspector-json"
        read = read_inspector(path.read_bytes(), str(path), pretty=True)
        assert read.traces[0].calls == lines.traces[0].calls and read.choices == lines.choices
        assert (read.markers, dict(read.proxy_records)) == (3, dict(lines.proxy_records))
        assert [c.seq for c in read_traces([path])[0].calls] == [1407, 1408, 1409, 1538, 1539]


def test_observe_ingests_a_marker_stream_with_its_notes(tmp_path):
    store = tmp_path / "store"
    result = CliRunner().invoke(main, ["observe", "ingest", str(V44), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert "overwrote 640 collective records" in result.output
    rows = query(store, "SELECT op, size_bytes, nranks FROM records WHERE kind = 'inspector' ORDER BY op").to_pylist()
    assert [(r["op"], r["nranks"]) for r in rows] == [("all_gather", 8)] + [("all_reduce", 8)] * 3 + [
        ("reduce_scatter", 8)]
    chosen = query(store, "SELECT DISTINCT tags['algorithm'] AS a, tags['protocol'] AS p FROM records "
                          "WHERE kind = 'inspector' AND tags['algorithm'] IS NOT NULL").to_pylist()
    assert chosen and all(r["a"] in ALGORITHMS and r["p"] in PROTOCOLS for r in chosen)  # coll_algo/coll_proto


# --- the names NCCL writes -> collscope's ----------------------------------------------------------------------


@pytest.mark.parametrize(("algo", "proto", "expected"), [
    ("RING", "LL", ("Ring", "LL")), ("NVLS_TREE", "SIMPLE", ("NVLSTree", "Simple")),
    ("COLLNET_DIRECT", "SIMPLE", ("CollNetDirect", "Simple")), ("COLLNET_CHAIN", "LL128", ("CollNetChain", "LL128")),
    ("PAT", "SIMPLE", ("PAT", "Simple")), ("TREE", "LL128", ("Tree", "LL128")), ("unknown", "unknown", None),
    ("Unknown", "SIMPLE", (None, "Simple")), ("RING", None, ("Ring", None)),
])
def test_json_algorithm_and_protocol_spellings(algo, proto, expected):
    got = algo_proto(algo, proto)
    assert (None if got is None else (got.algorithm, got.protocol)) == expected


@pytest.mark.parametrize(("label", "expected"), [
    ("RING_SIMPLE", ("Ring", "Simple")), ("NVLS_TREE_SIMPLE", ("NVLSTree", "Simple")), ("Ring_ll", ("Ring", "LL")),
    ("Ring_ll128", ("Ring", "LL128")), ("COLLNET_DIRECT_SIMPLE", ("CollNetDirect", "Simple")),
    ("unknown_unknown", None), ("RING", None), ("Ring_fast", None),
])
def test_prometheus_algo_proto_labels(label, expected):
    got = parse_algo_proto_label(label)
    assert (None if got is None else (got.algorithm, got.protocol)) == expected


# --- Prometheus v5.1 -------------------------------------------------------------------------------------------


def test_prometheus_v51_labels_choices_and_counters():
    read = read_inspector_prom(PROM.read_bytes(), str(PROM))
    [trace] = read.traces
    assert (trace.rank, trace.host) == (3, "eos0412")
    assert [(c.op, c.group_size, c.group_nnodes, c.process_group) for c in trace.calls] == [
        ("all_reduce", 16, 2, "DP Group 0"), ("all_reduce", 16, 2, "DP Group 0"), ("all_gather", 16, 2, "DP Group 0"),
        ("reduce_scatter", 8, 1, "TP Group 3"), ("all_reduce", 8, 1, "TP Group 3")]
    sizes = [c.size_bytes or 0 for c in trace.calls]
    assert GiB <= sizes[0] < 2 * GiB and 512 << 10 <= sizes[1] < 513 << 10 and 8 * 16 * MiB < sizes[3] < 8 * 17 * MiB
    assert _pairs(read.choices[0]) == [("NVLSTree", "Simple"), ("Ring", "LL"), ("Ring", "Simple"), ("Ring", "LL128"),
                                       None]
    assert (read.versions, read.slurm_job_ids) == (("v5.1",), ("4471902",))
    assert read.counters[("eos0412", "GPU3")]["nccl_collectives_dropped_total"] == 2048
    assert any(w.startswith("eos0412 GPU3: Inspector's ring overwrote 2048 of 918233 collective records")
               for w in trace.warnings)
    assert not any("point-to-point records (nccl_p2p_dropped_total)" in w for w in trace.warnings)  # 0 lost
    assert (dict(read.unread_metrics), read.unread_labels) == ({}, ())
    assert not any("does not read" in w for w in trace.warnings)


def test_prometheus_unknown_metrics_and_labels_are_tolerated_and_named(tmp_path):
    text = PROM.read_text().replace('version="v5.1",', 'version="v5.1",cluster="eos",')
    text = text.replace('algo_proto="RING_LL"', 'algo_proto="RING-LL"')
    text += 'nccl_inspector_dump_duration_seconds{version="v5.1",node="eos0412",gpu="GPU3"} 0.004\n' \
            'node_textfile_mtime_seconds{file="x.prom"} 1.7e9\n'
    path = tmp_path / PROM.name
    path.write_text(text)
    read = read_inspector_prom(path.read_bytes(), str(path))
    assert len(read.traces[0].calls) == 5 and read.unread_labels == ("cluster",)
    assert dict(read.unread_metrics) == {"nccl_inspector_dump_duration_seconds": 1, "node_textfile_mtime_seconds": 1}
    warnings = read.traces[0].warnings
    assert "labels collscope does not read, left out: cluster" in warnings
    assert any(w.startswith("metrics collscope does not read, left out: nccl_inspector_dump_duration_seconds "
                            "(1 samples)") for w in warnings)
    assert any("algo_proto labels not read" in w and "RING-LL" in w for w in warnings)
    assert read.choices[0][1] is None
    assert len(read_traces([path])[0].calls) == 5
