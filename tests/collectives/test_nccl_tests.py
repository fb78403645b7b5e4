"""nccl-tests: spec -> argv (golden), binary lookup, parsing every generation (fixtures + shared corpus),
the -J JSON file, ``collscope ingest`` through CliRunner, and run_nccl_tests with fake binaries on PATH."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.cli import main
from collscope.collectives.nccl_tests.parse import looks_like_nccl_tests, parse_nccl_tests
from collscope.collectives.nccl_tests.run import NcclTestsSpec, find_nccl_tests_binary, nccl_tests_argv, run_nccl_tests
from collscope.collectives.record import Measurement, busbw_factor
from collscope.errors import ConfigError, ParseError, ToolMissingError
from collscope.results.decode import read_jsonl
from tests.corpus import CORPUS, corpus_params, strip_corpus_header
from tests.fakes import write_executable

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
MODERN = FIX / "all_reduce_perf-v2.19.6-2x4-wrong-redop-root.txt"
OLD = FIX / "all_reduce_perf-pre2.13-error-column-no-root.txt"
BCAST = FIX / "broadcast_perf-oldest-type-root-no-redop.txt"
OOB = FIX / "all_reduce_perf-v2.19.6-oob-failed.txt"
JSON_OUT = FIX / "all_reduce_perf-v2.19.6-J-output.json"


def _parse(path: Path, **kw):
    return parse_nccl_tests(path.read_text(), source=str(path), **kw)


def _rec(run, size: int, in_place: bool, repeat: int = 0) -> Measurement:
    [rec] = [r for r in run.records if r.size_bytes == size and r.in_place == in_place and r.repeat == repeat]
    return rec


# ---------------------------------------------------------------------------------------------------- argv


def test_argv_golden_every_flag():
    spec = NcclTestsSpec(op="all_gather", min_bytes=8, max_bytes=8 << 30, step_factor=2, iters=50, warmup_iters=5,
                         agg_iters=4, check_iters=0, nthreads=2, ngpus=4, average=3, blocking=1,
                         cudagraph_launches=10, timeout_s=300, json_output="out dir/r;1.json", run_cycles=3,
                         dtype="bfloat16", redop="all", root="all", local_register=2, report_cputime=True)
    assert nccl_tests_argv(spec) == [
        "all_gather_perf", "-b", "8", "-e", "8589934592", "-f", "2", "-n", "50", "-w", "5", "-m", "4", "-c", "0",
        "-t", "2", "-g", "4", "-a", "3", "-z", "1", "-G", "10", "-T", "300", "-J", "out dir/r;1.json", "-N", "3",
        "-d", "bfloat16", "-o", "all", "-r", "-1", "-R", "2", "-C", "1"]


def test_argv_minimal_and_step_bytes_and_binary_path():
    assert nccl_tests_argv(NcclTestsSpec()) == ["all_reduce_perf"]
    spec = NcclTestsSpec(op="broadcast", min_bytes=1024, max_bytes=4096, step_bytes=1024, root=3, mpi=True)
    assert nccl_tests_argv(spec) == ["broadcast_perf_mpi", "-b", "1024", "-e", "4096", "-i", "1024", "-r", "3"]
    assert nccl_tests_argv(spec, "/opt/nt/build/broadcast_perf")[0] == "/opt/nt/build/broadcast_perf"


@pytest.mark.parametrize(("kwargs", "named", "valid"), [
    ({"dtype": "float32"}, "float32", "bfloat16"),
    ({"redop": "mean"}, "mean", "mulsum"),
    ({"op": "allreduce"}, "allreduce", "all_reduce"),
    ({"average": 4}, "4", "0..3"),
    ({"blocking": -1}, "-1", "0..3"),
    ({"local_register": 3}, "3", "0..2"),
    ({"step_factor": 1}, "1", ">= 2"),
    ({"iters": 0}, "0", ">= 1"),
    ({"json_output": "out.txt"}, "out.txt", ".json"),
    ({"report_cputime": 1}, "1", "True, False"),
    ({"root": "some"}, "some", ">= 0"),
])
def test_spec_rejects_bad_values_naming_them_and_the_valid_ones(kwargs, named, valid):
    with pytest.raises(ConfigError) as err:
        NcclTestsSpec(**kwargs)
    assert named in str(err.value) and valid in str(err.value)


def test_spec_rejects_f_with_i_and_inverted_sizes():
    with pytest.raises(ConfigError, match="mutually exclusive"):
        NcclTestsSpec(step_factor=2, step_bytes=1024)
    with pytest.raises(ConfigError, match="larger than"):
        NcclTestsSpec(min_bytes=2048, max_bytes=1024)


# ---------------------------------------------------------------------------------------------------- lookup


def _exe(path: Path) -> Path:
    return write_executable(path, "#!/bin/sh\nexit 0\n")


def test_binary_from_dir_its_build_subdir_and_mpi_names(tmp_path):
    top = _exe(tmp_path / "nt" / "all_reduce_perf")
    build = _exe(tmp_path / "nt" / "build" / "all_gather_perf_mpi")
    env = {"PATH": ""}
    assert find_nccl_tests_binary("all_reduce", tmp_path / "nt", env=env) == top
    assert find_nccl_tests_binary("all_gather", tmp_path / "nt", env=env) == build  # only the _mpi build exists
    assert find_nccl_tests_binary("all_gather", tmp_path / "nt", mpi=True, env=env) == build
    (tmp_path / "nt" / "broadcast_perf").write_text("not executable")
    with pytest.raises(ToolMissingError):
        find_nccl_tests_binary("broadcast", tmp_path / "nt", env=env)


def test_binary_from_nccl_tests_home_then_path(tmp_path):
    home = _exe(tmp_path / "home" / "build" / "reduce_perf")
    on_path = _exe(tmp_path / "bin" / "reduce_perf")
    assert find_nccl_tests_binary("reduce", env={"NCCL_TESTS_HOME": str(tmp_path / "home"), "PATH": ""}) == home
    assert find_nccl_tests_binary("reduce", env={"PATH": str(tmp_path / "bin")}) == on_path


def test_missing_binary_says_how_to_build(tmp_path):
    with pytest.raises(ToolMissingError) as err:
        find_nccl_tests_binary("alltoall", env={"PATH": str(tmp_path)})
    msg = str(err.value)
    assert "alltoall_perf" in msg and "git clone https://github.com/NVIDIA/nccl-tests" in msg
    assert "MPI=1" in msg and "CUDA_HOME" in msg and "multi-node" in msg
    with pytest.raises(ToolMissingError, match="--nccl-tests-dir"):
        find_nccl_tests_binary("alltoall", tmp_path / "nowhere", env={"PATH": ""})


# ---------------------------------------------------------------------------------------------------- fixtures


def test_modern_fixture_every_field():
    run = _parse(MODERN)
    assert (run.op, run.nranks, run.nnodes, run.nranks_source) == ("all_reduce", 8, 2, "rank lines")
    assert run.hosts == ("gpu-a01", "gpu-a02")
    assert (run.nccl_version, run.nccl_tests_version) == ("2.28.3", "2.19.6")
    h = run.header
    assert (h.min_bytes, h.max_bytes, h.step_factor, h.step_bytes, h.warmup_iters, h.iters, h.agg_iters,
            h.validation, h.graph, h.unalign) == (8, 33554432, 4, None, 1, 20, 1, 1, 0, 0)
    assert run.devices[5].host == "gpu-a02" and run.devices[5].bus_id == "0000:2a:00"
    assert run.devices[5].name == "NVIDIA H100 80GB HBM3" and run.devices[5].group == 0
    assert len(run.records) == 24 and len(run.sizes) == 12
    assert (run.avg_busbw_gbps, run.out_of_bounds, run.oob_failed, run.complete) == (48.6046, 0, False, True)
    assert run.warnings == () and run.errors == () and not run.failed
    oop, ip = _rec(run, 33554432, False), _rec(run, 33554432, True)
    assert (oop.time_us, oop.algbw_gbps, oop.busbw_gbps, oop.wrong, oop.error) == (245.70, 136.57, 238.99, 0, None)
    assert (ip.time_us, ip.busbw_gbps) == (242.01, 242.64)
    assert (oop.count, oop.dtype, oop.redop, oop.root, oop.iters, oop.warmup) == (
        8388608, "float32", "sum", None, 20, 1)
    assert (oop.engine, oop.backend, oop.engine_version, oop.nccl_version) == ("nccl-tests", "nccl", "2.19.6", "2.28.3")
    assert oop.busbw_gbps == pytest.approx(oop.algbw_gbps * busbw_factor("all_reduce", 8), abs=0.01)
    assert [r.in_place for r in run.records[:4]] == [False, True, False, True]


def test_old_error_column_fixture():
    run = _parse(OLD)
    assert (run.op, run.nranks, run.nnodes) == ("all_reduce", 4, 1)  # op from the file name
    assert any("file name" in w for w in run.warnings)
    assert run.devices[0].group is None and run.devices[3].bus_id == "0x4e"
    assert (run.header.agg_iters, run.header.graph, run.header.warmup_iters) == (None, None, 5)
    rec = _rec(run, 4194304, True)
    assert (rec.time_us, rec.algbw_gbps, rec.busbw_gbps, rec.error, rec.wrong, rec.root) == (
        61.71, 67.97, 101.95, 4e-07, None, None)
    assert all(r.ok for r in run.records)


def test_broadcast_oldest_type_root_no_redop():
    run = _parse(BCAST)
    assert (run.op, run.nranks, len(run.records)) == ("broadcast", 2, 16)  # op from the '$ ./build/...' line
    rec = _rec(run, 1048576, False)
    assert (rec.root, rec.redop, rec.time_us, rec.algbw_gbps, rec.busbw_gbps, rec.error) == (
        0, None, 104.83, 10.0, 10.0, 0.0)


def test_oob_failed_marks_the_sizes_with_wrong_values():
    run = _parse(OOB)
    assert (run.out_of_bounds, run.oob_failed, run.failed) == (1048586, True, True)
    bad = {(r.size_bytes, r.in_place) for r in run.records if not r.ok}
    assert bad == {(4194304, True), (16777216, False), (16777216, True)}
    assert _rec(run, 16777216, False).wrong == 1048580  # printed with %6g as 1.04858e+06


def test_oob_failed_without_per_size_counts_marks_every_record():
    text = OLD.read_text().replace("Out of bounds values : 0 OK", "Out of bounds values : 4 FAILED")
    run = parse_nccl_tests(text, op="all_reduce")
    assert run.oob_failed and not any(r.ok for r in run.records)
    assert any("every record" in w for w in run.warnings)


def test_json_output_fixture():
    run = _parse(JSON_OUT)
    assert (run.op, run.nranks, run.nnodes, run.hosts) == ("all_reduce", 4, 2, ("node-07", "node-08"))
    assert (run.nccl_version, run.header.iters, run.header.step_factor, run.complete) == ("2.28.3", 20, 4, True)
    assert len(run.records) == 8 and run.errors == () and not run.failed
    rec = _rec(run, 1048576, False)
    assert (rec.time_us, rec.algbw_gbps, rec.busbw_gbps, rec.wrong, rec.root, rec.redop) == (
        51.2144, 20.474242, 30.711362, 0, None, "sum")
    assert rec.settings == {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_ALGO": "Ring"}
    assert rec.timestamp == "2025-11-03 14:02:11"
    assert run.avg_busbw_gbps == pytest.approx(sum(r.busbw_gbps for r in run.records) / 8, abs=1e-5)


def test_json_cut_off_and_wrong_types_raise_parse_error():
    text = JSON_OUT.read_text()
    with pytest.raises(ParseError, match="cut off"):
        parse_nccl_tests(text[: len(text) // 2], source="ar.json")
    with pytest.raises(ParseError, match=r"results\[0\].size"):
        parse_nccl_tests(text.replace('"size":1048576', '"size":"big"'), source="ar.json")


def test_records_are_plain_measurements():
    run = _parse(MODERN)
    for rec in run.records[:6]:
        assert type(rec) is Measurement
        assert rec == Measurement.from_dict(rec.to_dict())
        assert rec == Measurement.from_dict(json.loads(json.dumps(rec.to_dict())))
        with pytest.raises(AttributeError):
            rec.time_us = 1.0  # type: ignore[misc]
        with pytest.raises(TypeError):
            rec.settings["NCCL_ALGO"] = "Tree"  # type: ignore[index]
        assert hash(rec) == hash(Measurement.from_dict(rec.to_dict()))
    assert len(set(run.records)) == len(run.records)


def test_repeats_from_run_cycles_are_counted():
    lines = MODERN.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("8 "))
    table = lines[start: start + 15]
    rows = [line for line in table if line.strip()[:1].isdigit()]
    text = "\n".join(lines[:start] + rows + rows + lines[start + 15:])
    run = parse_nccl_tests(text)
    assert len(run.records) == 48 and {r.repeat for r in run.records} == {0, 1}
    assert _rec(run, 8, False, repeat=1).time_us == 22.0


def test_cputime_timestamp_and_per_iteration_columns_map_by_name():
    head = ("#       size         count      type   redop    root  cputime   algbw   busbw  #wrong    i_min    i_max"
            "    i_p99    i_cv%  cputime   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%  timestamp")
    row = ("     1048576        262144     float     sum      -1    12.50   83.89  146.80       0    11.10    14.20"
           "    14.00     3.10    12.40   84.56  147.98       0    11.00    13.90    13.80     2.90"
           "  2025-11-03 14:02:11")
    run = parse_nccl_tests(f"{head}\n{row}\n", op="all_reduce", nranks=8)
    oop, ip = run.records
    assert (oop.time_us, oop.busbw_gbps, ip.time_us, ip.algbw_gbps) == (12.5, 146.8, 12.4, 84.56)
    assert oop.timestamp == "2025-11-03 14:02:11"
    assert any("CPU time" in w for w in run.warnings)


def test_old_alltoall_empty_redop_and_na_wrong():
    head = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong")
    row = ("    33554432       8388608     float              -1    19.56  1715.44    0.00      0     0.78  43046.10"
           "    0.00    N/A")
    run = parse_nccl_tests(f"# Collective test starting: alltoall_perf\n{head}\n{row}\n")
    assert run.nranks == 1 and run.records[1].wrong is None and run.records[0].redop is None


def test_elided_rank_list_and_author_truncation():
    lines = MODERN.read_text().splitlines()
    cut = [line for line in lines if not any(f"Rank  {r} " in line for r in (2, 3, 4, 5, 6))]
    cut.insert(7, "#  ...")
    cut.insert(next(i for i, line in enumerate(cut) if "(B)" in line) + 1, "# Truncated  smaller message sizes")
    run = parse_nccl_tests("\n".join(cut))
    # The list ends with Rank 7 right before the table: 8 ranks, as NCCL's comm line and busbw/algbw say; the
    # nodes are NCCL's nNodes (the elided list alone only shows 2 hosts or more).
    assert run.ranks_elided and run.nranks == 8 and run.nnodes == 2
    assert run.geometry.nranks.evidence == ("Rank 7 is the highest rank line", "nRanks 8 in NCCL's comm lines",
                                            "busbw/algbw = 1.7500 -> 8")
    assert run.nranks_source == "; ".join(run.geometry.nranks.evidence)
    assert any("elided" in w for w in run.warnings) and any("Truncated" in w for w in run.warnings)


def test_op_and_nranks_errors_say_what_to_pass():
    table_only = "\n".join(line for line in MODERN.read_text().splitlines()
                           if line.strip()[:1].isdigit() or "size" in line)
    with pytest.raises(ParseError, match="--op"):
        parse_nccl_tests(table_only)
    run = parse_nccl_tests(table_only, op="all_reduce")
    assert run.nranks == 8 and run.nranks_source == "busbw/algbw = 1.7500 -> 8"
    with pytest.raises(ParseError, match="--nranks"):
        parse_nccl_tests(table_only, op="broadcast")
    assert parse_nccl_tests(table_only, op="broadcast", nranks=4).nranks == 4
    with pytest.raises(ParseError, match="all_gather"):
        _parse(MODERN, op="all_gather")
    with pytest.raises(ParseError, match="8 ranks in the rank list"):
        _parse(MODERN, nranks=16)


def test_damaged_row_in_the_middle_raises_with_its_line_and_a_cut_last_row_is_dropped():
    lines = MODERN.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip().startswith("2048 "))
    damaged = lines[:i] + [lines[i][:60]] + lines[i + 1:]
    with pytest.raises(ParseError) as err:
        parse_nccl_tests("\n".join(damaged), source="run.log")
    assert err.value.source == "run.log" and err.value.line == i + 1
    j = next(i for i, line in enumerate(lines) if line.strip().startswith("33554432 "))
    run = parse_nccl_tests("\n".join(lines[:j] + [lines[j][:70]]))
    assert len(run.records) == 22 and not run.complete and any("cut off" in w for w in run.warnings)


def test_block_and_line_by_line_conversion_agree():
    """Rows are converted a block at a time; noise that starts with a digit sends a block line by line."""
    text = MODERN.read_text()
    lines = text.splitlines()
    noisy = []
    for line in lines:
        noisy.append(line)
        if line.strip()[:1].isdigit():
            noisy.append("2e3f9af7241040:195:195 [0] NCCL INFO Launch mode Parallel")
    whole, split = parse_nccl_tests(text), parse_nccl_tests("\n".join(noisy))
    assert len(whole.records) == 24 and whole.records == split.records


def test_second_run_in_one_input_is_refused():
    text = MODERN.read_text()
    with pytest.raises(ParseError, match="second run"):
        parse_nccl_tests(text + text)


def test_failure_lines_are_errors():
    text = MODERN.read_text().replace("# Out of bounds", "gpu-a01: Test NCCL failure common.cu:1088 'unhandled "
                                      "system error'\n# Out of bounds")
    run = parse_nccl_tests(text)
    assert run.failed and "Test NCCL failure" in run.errors[0]


def test_sniffer():
    for path in (MODERN, OLD, BCAST, OOB, JSON_OUT):
        assert looks_like_nccl_tests(path.read_text())
    assert not looks_like_nccl_tests("GPU0\tX\tNV18\nNCCL INFO Ring 00 : 0 -> 1\n")
    assert not looks_like_nccl_tests('{"gpus": []}')


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789 .-e+#\nabcdfilnorstuwzNA/()[]{}:\",")), max_size=400))
def test_garbage_raises_only_parse_error(text):
    try:
        parse_nccl_tests(text)
    except ParseError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_damaged_fixtures_parse_or_raise_parse_error(data):
    path = data.draw(st.sampled_from([MODERN, OLD, BCAST, OOB, JSON_OUT]))
    text = path.read_text()
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, min(len(text), i + 40)))
    junk = data.draw(st.text(max_size=12))
    try:
        run = parse_nccl_tests(text[:i] + junk + text[j:], source=path.name)
    except ParseError:
        return
    for rec in run.records:
        assert rec.size_bytes >= 0 and rec.nranks >= 1


# ---------------------------------------------------------------------------------------------------- corpus

def _corpus_files() -> list[Path]:
    files = sorted((CORPUS / "nccl-tests").glob("*.txt"))
    files += sorted((CORPUS / "from-nccl-research").glob("*.txt"))
    return files


# file -> (parse kwargs, expected); expected None: must raise ParseError (the reason in a comment).
_EXPECT: dict[str, tuple[dict, dict | None]] = {
    "all_gather_perf-gcp-a3high-h100-tcpx-hash-prefix-stripped.txt": (
        {}, dict(op="all_gather", nranks=16, records=22, hosts=(), avg=40.6043, oob=0, iters=200, warmup=5,
                 size=8388608, oop=(784.9, 10.69, 10.02), wrong=None)),  # validation: 0 -> not checked
    "all_gather_perf_mpi-rtx5090-2ranks-same-gpu-v2.18.0-x11-noise.txt": (
        {}, dict(op="all_gather", nranks=2, records=16, hosts=("lab",), nnodes=1, nccl="2.29.7", tests="2.18.0",
                 avg=0.669677, size=33554432, oop=(19200.7, 1.75, 0.87), ip=(17105.4, 1.96, 0.98), wrong=0,
                 iters=50, warmup=10)),
    "all_reduce_perf-a100-2node-16rank-oci-10G.txt": (
        {}, dict(op="all_reduce", nranks=16, nnodes=2, records=2, hosts=("inst-d5ige-comp", "inst-swgen-comp"),
                 avg=220.921, size=10737418240, oop=(90330, 118.87, 222.88), ip=(91945, 116.78, 218.96))),
    "all_reduce_perf-a100-2node-16rank-oci-ssh-warning-line-bw-dips.txt": (
        {}, dict(op="all_reduce", nranks=16, nnodes=2, records=56, avg=24.2272, size=67108864,
                 oop=(6058.5, 11.08, 20.77), ip=(3709.5, 18.09, 33.92), wrong=0)),
    "all_reduce_perf-a100-8x1-oci-v2.17.6-single-size-10G.txt": (
        {}, dict(op="all_reduce", nranks=8, nnodes=1, records=2, nccl="2.26.5", tests="2.17.6", avg=233.291,
                 size=10737418240, oop=(80545.0, 133.31, 233.29), step_bytes=1048576, warmup=1)),
    "all_reduce_perf-gtx1050ti-gtx950-g2-debug-info-PARTIAL.txt": (
        {}, dict(op="all_reduce", nranks=2, nnodes=1, records=0, nccl="2.16.5", complete=False, avg=None)),
    "all_reduce_perf-k80-4gpu-azureml-old-error-column-info-launch-mode.txt": (
        {}, dict(op="all_reduce", nranks=4, nnodes=1, records=14, avg=2.54225, size=2147483648,
                 oop=(1258554, 1.71, 2.56), error=2e-07, wrong=None)),
    "all_reduce_perf-p3dn-v100-2node-efa-nccl2.6.4-debug-info-interleaved.txt": (
        {}, dict(op="all_reduce", nranks=2, nnodes=2, records=58, nccl="2.6.4", avg=1.16154, iters=1000,
                 size=8, oop=(52.16, 0.0, 0.0), ip=(52.04, 0.0, 0.0), error=0.0)),
    # A table without rank lines; busbw/algbw only bounds n to 59..79 (8 nodes x 8 V100 = 64): needs --nranks.
    "all_reduce_perf-v100-8node-old-error-column-table-only.txt": ({}, None),
    "alltoall_perf-rtx5090-1rank-inplace-NA-busbw-zero.txt": (
        {}, dict(op="alltoall", nranks=1, records=2, avg=0.0, size=33554432, oop=(19.56, 1715.44, 0.0),
                 ip=(0.78, 43046.10, 0.0))),
    "broadcast_perf-dgx2-v100-g12-oldest-format-root-no-redop.txt": (
        {}, dict(op="broadcast", nranks=12, nnodes=1, records=62, avg=41.2456, size=8589934592,
                 oop=(70321, 122.15, 122.15), root=0, error=0.0)),
    "dgx-spark-playbooks-103_nccl-tests-2.20_header.txt": (
        {}, dict(op="all_reduce", nranks=2, nnodes=2, records=8, nccl="2.31.2", tests="2.20.0", complete=False,
                 size=65536, oop=(67.93, 0.96, 0.96), ip=(64.71, 1.01, 1.01), hosts=("spark-d708", "spark-dbf4"))),
    # Rows only: no binary named anywhere, so the op must be passed.
    "nccl-1244_old_format_error_column.txt": ({}, None),
    "nccl-tests-256_h200_2node_allreduce_modern_format.txt": (
        {}, dict(op="all_reduce", nranks=16, nnodes=2, records=6, avg=475.782, size=9663676416,
                 oop=(37069, 260.70, 488.81), hosts=("fs-207", "fs-208"))),
    "nccl-tests-44_old_format_rows_and_trailer.txt": ({}, None),  # rows only, binary not named
    # NCCL debug logs and XML, not nccl-tests output.
    "nccl-1412_init_comm_channels_trees.txt": ({}, None),
    "nccl-tests-256_h200_topo_dump_excerpt.xml.txt": ({}, None),
    "nccl-transport-lines_various_issues.txt": ({}, None),
    "nccl-tuning-table_old_and_new_formats.txt": ({}, None),
}

# The files that need --op/--nranks parse once given them.
_WITH_ARGS = {
    "all_reduce_perf-v100-8node-old-error-column-table-only.txt": (
        dict(nranks=64), dict(op="all_reduce", nranks=64, records=4, size=536870912, oop=(244833, 2.19, 4.32),
                              error=2e-06, avg=4.32178)),
    "nccl-1244_old_format_error_column.txt": (
        dict(op="all_reduce", nranks=16), dict(op="all_reduce", nranks=16, records=16, size=4,
                                               ip=(49.35, 0.0, 0.0), error=0.0)),
    "nccl-tests-44_old_format_rows_and_trailer.txt": (
        dict(op="all_gather"), dict(op="all_gather", nranks=2, records=26, size=134217728,
                                    oop=(3298.6, 20.34, 20.34), oop_count=16777216)),
}


def _check(run, exp: dict) -> None:
    assert run.op == exp["op"] and run.nranks == exp["nranks"] and len(run.records) == exp["records"]
    simple = {"hosts": run.hosts, "nnodes": run.nnodes, "nccl": run.nccl_version, "tests": run.nccl_tests_version,
              "avg": run.avg_busbw_gbps, "complete": run.complete, "iters": run.header.iters,
              "warmup": run.header.warmup_iters, "step_bytes": run.header.step_bytes}
    for key, value in simple.items():
        if key in exp:
            assert value == exp[key], key
    if "oob" in exp:
        assert run.out_of_bounds == exp["oob"] and not run.oob_failed
    if "size" in exp:
        for in_place, key in ((False, "oop"), (True, "ip")):
            if key in exp:
                rec = _rec(run, exp["size"], in_place)
                assert (rec.time_us, rec.algbw_gbps, rec.busbw_gbps) == pytest.approx(exp[key])
        rec = _rec(run, exp["size"], False)
        for key, attr in (("wrong", "wrong"), ("error", "error"), ("root", "root"), ("oop_count", "count")):
            if key in exp:
                assert getattr(rec, attr) == exp[key], key
    assert all(r.ok for r in run.records) and not run.failed
    for rec in run.records:  # consistency of every corpus row with the busbw factor, printing precision allowed
        if rec.op != "all_gather" or run.nranks != 2 or rec.algbw_gbps == rec.busbw_gbps:
            factor = busbw_factor(rec.op, rec.nranks) if rec.algbw_gbps != rec.busbw_gbps else 1.0
            assert rec.busbw_gbps == pytest.approx(rec.algbw_gbps * factor, abs=0.02 + 0.005 * rec.busbw_gbps)


@pytest.mark.parametrize("path", corpus_params(_corpus_files()))
def test_corpus_file(path: Path):
    text = strip_corpus_header(path.read_text())
    if path.name not in _EXPECT:
        pytest.fail(f"new corpus file {path.name}: add its expected values to _EXPECT")
    kwargs, exp = _EXPECT[path.name]
    if exp is None:
        with pytest.raises(ParseError):
            parse_nccl_tests(text, source=path.name, **kwargs)
    else:
        _check(parse_nccl_tests(text, source=path.name, **kwargs), exp)
    if path.name in _WITH_ARGS:
        kwargs, exp = _WITH_ARGS[path.name]
        assert exp is not None
        _check(parse_nccl_tests(text, source=path.name, **kwargs), exp)


# ---------------------------------------------------------------------------------------------------- CLI


def test_cli_ingest_summary_and_exit_0():
    result = CliRunner().invoke(main, ["ingest", str(MODERN), str(JSON_OUT)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.strip().splitlines() if not line.startswith("  ")]  # not geometry
    assert len(lines) == 2
    assert ("all_reduce, 8 ranks on 2 nodes, 12 sizes, 24 records, avg busbw 48.6046 GB/s, out-of-bounds 0 OK"
            in lines[0])


def test_cli_ingest_json_and_out(tmp_path):
    out = tmp_path / "res" / "nccl.jsonl"
    result = CliRunner().invoke(main, ["ingest", str(BCAST), "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    recs = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(recs) == 16 and recs[0]["op"] == "broadcast" and recs[0]["root"] == 0
    assert "broadcast, 2 ranks" in result.stderr
    assert [r.to_dict() for r in read_jsonl(out)] == recs
    again = CliRunner().invoke(main, ["ingest", str(BCAST), "--out", str(out)])
    assert again.exit_code == 0 and len(list(read_jsonl(out))) == 16  # replaced, not appended


def test_cli_ingest_exit_1_on_out_of_bounds(tmp_path):
    out = tmp_path / "r.jsonl"
    result = CliRunner().invoke(main, ["ingest", str(OOB), "--out", str(out)])
    assert result.exit_code == 1
    assert "out-of-bounds 1048586 FAILED, 3 records not ok" in result.stdout
    assert sum(not r.ok for r in read_jsonl(out)) == 3


def test_cli_ingest_exit_2_one_line(tmp_path):
    bad = tmp_path / "notes with space;.txt"
    bad.write_text("hello\nworld\n")
    result = CliRunner().invoke(main, ["ingest", str(MODERN), str(bad), "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and str(bad) in result.stderr
    assert "Traceback" not in result.output and not (tmp_path / "o.jsonl").exists()
    damaged = tmp_path / "run.log"
    lines = MODERN.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip().startswith("2048 "))
    damaged.write_text("\n".join(lines[:i] + [lines[i][:60]] + lines[i + 1:]))
    result = CliRunner().invoke(main, ["ingest", str(damaged)])
    assert result.exit_code == 2 and f"{damaged}:{i + 1}:" in result.stderr
    missing = CliRunner().invoke(main, ["ingest", str(tmp_path / "absent.txt")])
    assert missing.exit_code == 2 and "absent.txt" in missing.stderr and "Traceback" not in missing.output


def test_cli_ingest_op_and_nranks_options():
    table = CORPUS / "from-nccl-research" / "nccl-1244_old_format_error_column.txt"
    if not table.exists():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    result = CliRunner().invoke(main, ["ingest", str(table)])
    assert result.exit_code == 2 and "--op" in result.stderr
    result = CliRunner().invoke(main, ["ingest", str(table), "--op", "all_reduce", "--nranks", "16"])
    assert result.exit_code == 0 and "16 ranks" in result.stdout


def test_cli_ingest_help_has_example():
    result = CliRunner().invoke(main, ["ingest", "--help"])
    assert result.exit_code == 0 and "Example" in result.output


# ---------------------------------------------------------------------------------------------------- running


def test_run_nccl_tests_with_a_fake_binary(tmp_path, fake_tools):
    args_file = tmp_path / "args.json"
    fake_tools.nccl_tests("all_reduce", MODERN, record_to=args_file)
    spec = NcclTestsSpec(min_bytes=8, max_bytes=32 << 20, step_factor=4)
    result = run_nccl_tests(spec, extra_env={"PATH": os.environ["PATH"]}, timeout_s=30)
    assert result.ok and result.failure is None and result.returncode == 0
    assert len(result.records) == 24 and result.run is not None and result.run.nranks == 8
    assert json.loads(args_file.read_text())["argv"] == ["-b", "8", "-e", "33554432", "-f", "4", "-T", "30"]
    assert result.argv[0] == str(fake_tools.bin_dir / "all_reduce_perf")


def test_run_nccl_tests_names_the_configuration_by_the_runs_own_environment(fake_tools):
    """As the mpi and torch harnesses do (captured_settings / captured_environment): a selection variable or a
    tuning knob names the configuration, the site's plumbing is environment."""
    fake_tools.nccl_tests("all_reduce", MODERN)
    env = {"PATH": os.environ["PATH"], "NCCL_ALGO": "Tree", "NCCL_IB_HCA": "=mlx5_0", "NCCL_BUFFSIZE": "8388608"}
    result = run_nccl_tests(NcclTestsSpec(min_bytes=8, max_bytes=32 << 20, step_factor=4), env=env, timeout_s=30)
    assert result.records
    assert all(dict(r.settings) == {"NCCL_ALGO": "Tree", "NCCL_BUFFSIZE": "8388608"} for r in result.records)
    assert all(r.environment is not None and r.environment.get("NCCL_IB_HCA") == "=mlx5_0"
               and "NCCL_ALGO" not in r.environment for r in result.records)


def test_run_nccl_tests_reports_wrong_values_and_exit_codes(fake_tools):
    fake_tools.nccl_tests("all_reduce", OOB, exit_code=3)
    result = run_nccl_tests(NcclTestsSpec(), extra_env={"PATH": os.environ["PATH"]}, timeout_s=30)
    assert result.failure == "exit code 3" and len(result.records) == 8 and not result.ok


def test_run_nccl_tests_timeout_keeps_the_rows_printed(tmp_path, fake_tools):
    head = [line for line in MODERN.read_text().splitlines()]
    cut = next(i for i, line in enumerate(head) if line.strip().startswith("2048 "))
    partial = tmp_path / "partial.txt"
    partial.write_text("\n".join(head[:cut]) + "\n")
    fake_tools.nccl_tests("all_reduce", partial, hang_as=f"nccl-tests-hang-{os.getpid()}")
    result = run_nccl_tests(NcclTestsSpec(timeout_s=600), extra_env={"PATH": os.environ["PATH"]}, timeout_s=1.5)
    assert result.timed_out and result.failure == "timeout after 1.5 s"
    assert result.run is not None and len(result.records) == 8 and not result.run.complete
    assert "-T 600" in " ".join(result.argv)  # the spec's own -T is kept


def test_run_nccl_tests_refuses_infinite_cycles_and_missing_binary(tmp_path):
    with pytest.raises(ConfigError, match="forever"):
        run_nccl_tests(NcclTestsSpec(run_cycles=0))
    with pytest.raises(ToolMissingError, match="git clone"):
        run_nccl_tests(NcclTestsSpec(op="hypercube"), env={"PATH": str(tmp_path)}, timeout_s=5)


def test_a_negative_time_is_a_parse_error_on_its_line():
    lines = MODERN.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if line.split()[:1] and line.split()[0].isdigit())
    parts = lines[i].split()
    parts[5 if parts[4].lstrip("-").isdigit() else 4] = "-12.5"
    lines[i] = "  ".join(parts)
    with pytest.raises(ParseError) as info:
        parse_nccl_tests("\n".join(lines) + "\n", source="neg.txt")
    assert info.value.source == "neg.txt" and info.value.line == i + 1


def test_json_values_a_record_cannot_hold_are_a_parse_error():
    text = JSON_OUT.read_text()
    bad = text.replace('"time":', '"time":-', 1)
    assert bad != text
    with pytest.raises(ParseError, match="time_us"):
        parse_nccl_tests(bad, source="ar.json")


@pytest.mark.parametrize("source", [MODERN, OLD, BCAST, OOB], ids=str)
def test_every_ingested_record_passes_the_records_own_check(source):
    run = _parse(source)
    assert run.records
    for rec in run.records:  # made inside columns_checked: each is checked here one by one, as ever
        assert msgspec.structs.replace(rec) == rec


@pytest.mark.parametrize("column, value, words", [("size_bytes", -8, "size_bytes=-8"),
                                                   ("size_bytes", "8", "size_bytes='8'"),
                                                   ("time_us", float("nan"), "time_us=nan"),
                                                   ("time_us", -1.0, "time_us=-1.0")])
def test_a_table_block_with_a_value_no_record_can_hold_is_a_parse_error(column, value, words):
    from collscope.collectives.nccl_tests.build import build_run
    from collscope.collectives.nccl_tests.records import Block, NcclTestsHeader, Placement, TableRows

    sizes, times = [8, 16, 32], [10.0, 11.0, 12.0]
    (sizes if column == "size_bytes" else times)[1] = value
    placement = Placement(False, times, [1.0] * 3, [1.0] * 3, [0] * 3, [None] * 3)
    block = Block(sizes, [2, 4, 8], ["float"] * 3, ["sum"] * 3, [None] * 3, [None] * 3, [0] * 3, (placement,),
                  frozenset({"root", "timestamp", "wrong", "error"}))
    with pytest.raises(ParseError, match=re.escape(words)) as info:
        build_run(op="all_reduce", rows=TableRows([block]), devices=[], ranks_elided=False, header=NcclTestsHeader(),
                  nccl_version=None, nccl_tests_version=None, avg_busbw_gbps=None, out_of_bounds=None,
                  oob_failed=False, min_bw_failed=False, complete=True, errors=[], warnings=[], source="b.txt",
                  nranks=2)
    assert info.value.source == "b.txt"
