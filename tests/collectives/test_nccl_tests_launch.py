"""nccl-tests outputs as GPU nodes produce them (issue 21, items 2, 8, 12 and 13): ``NCCL_TESTS_SPLIT_MASK`` groups,
separate one-rank processes, split ops' first size, how times were combined over ranks, the process-by-GPU shape,
one dtype name and nccl-tests' rounding of split sizes.

Fixtures (tests/fixtures/nccl-tests, written for collscope in nccl-tests v2.19.6's shapes, ``src/util.cu``):
a 2x8 all_gather with ``NCCL_TESTS_SPLIT_MASK=0x7`` (every world rank printed with its Group, busbw per group of
2), 8 one-rank all_reduce processes of a build without MPI under mpirun (lines interleaved), and 2 one-rank
broadcast processes under srun (whole outputs one after the other).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.collectives.measure import ELEM_SIZE
from collscope.collectives.nccl_tests.launch import (
    average_from_argv,
    groups_from_env,
    separate_processes,
    split_colors,
    time_over_ranks,
)
from collscope.collectives.nccl_tests.parse import parse_nccl_tests
from collscope.collectives.nccl_tests.records import NcclTestsDevice
from collscope.collectives.nccl_tests.run import run_nccl_tests
from collscope.collectives.nccl_tests.spec import (
    BENCH_TO_NCCL_TESTS_DTYPE,
    COLLSCOPE_AVERAGE,
    NcclTestsSpec,
    nccl_tests_argv,
    nccl_tests_spec_for_ladder,
)
from collscope.collectives.record import Measurement, busbw_factor
from collscope.collectives.sizes import first_ladder_size, size_ladder
from collscope.collectives.spec import BenchSpec, make_record
from collscope.errors import ConfigError, ParseError
from collscope.results.decode import decode_records
from collscope.sweeps.attempt import collect_records
from collscope.sweeps.launchers import nccl_tests_spec_for
from collscope.sweeps.plan import plan_sweep
from collscope.sweeps.presets import preset
from collscope.vocab.ops import DTYPE_TABLE, SPLIT_OPS, canonical_dtype

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
SPLIT = FIX / "all_gather_perf-v2.19.6-2x8-split-mask-0x7-groups-of-2.txt"
INTERLEAVED = FIX / "all_reduce_perf-v2.19.6-8-one-rank-processes-mpirun-interleaved.txt"
CONCATENATED = FIX / "broadcast_perf-v2.19.6-2-one-rank-processes-srun-concatenated.txt"
MODERN = FIX / "all_reduce_perf-v2.19.6-2x4-wrong-redop-root.txt"  # 8 processes of -g 1, MPI build
ONE_PROCESS = FIX / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"  # one process, -g 2
JSON_OUT = FIX / "all_reduce_perf-v2.19.6-J-output.json"
GIB = 1 << 30


# ---------------------------------------------------------------------------------- item 2: split groups

def test_split_mask_records_carry_the_group_busbw_was_computed_for():
    run = parse_nccl_tests(SPLIT.read_text(), source=SPLIT.name)
    assert (run.nranks, run.world_nranks, run.groups, run.nnodes) == (2, 16, 8, 2)
    assert run.nranks_source == "rank lines: 16 ranks in 8 group(s), rank 0's of 2"
    assert any("8 groups of 2" in w for w in run.warnings)
    assert len(run.records) == 12 and {r.nranks for r in run.records} == {2}
    for r in run.records:  # nccl-tests' busbw is the group's: (n-1)/n with n = 2
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * busbw_factor("all_gather", 2), abs=0.01)
        assert r.size_bytes == r.count * 4 * 2
    assert run.hosts == ("gpu-b01", "gpu-b02")


def test_split_mask_run_as_the_sweep_ran_it_is_accepted_and_checked():
    text = SPLIT.read_text()
    env = {"NCCL_TESTS_SPLIT_MASK": "0x7", "NCCL_DEBUG": "WARN"}
    run = parse_nccl_tests(text, source=SPLIT.name, nranks=16, env=env)
    assert run.nranks == 2 and run.world_nranks == 16
    assert parse_nccl_tests(text, nranks=2).nranks == 2  # the group's size passed is accepted too
    with pytest.raises(ParseError, match=r"8 ranks \(as passed\).*16 ranks in the rank list in 8 groups of 2"):
        parse_nccl_tests(text, nranks=8)
    # the split the run was given disagrees with the Group column: the variable did not reach nccl-tests
    with pytest.raises(ParseError, match="NCCL_TESTS_SPLIT_MASK=0x3.*4 group"):
        parse_nccl_tests(text, nranks=16, env={"NCCL_TESTS_SPLIT_MASK": "0x3"})
    unsplit = "\n".join(line.replace(line[line.index("Group"):line.index("Pid")], "Group  0 ")
                        if "Group" in line else line for line in text.splitlines())
    with pytest.raises(ParseError, match="did not reach nccl-tests"):
        parse_nccl_tests(unsplit, nranks=16, env=env)


def test_split_busbw_that_does_not_fit_the_group_is_said():
    lines = SPLIT.read_text().splitlines()
    # busbw as if computed over all 16 ranks (15/16 of algbw) instead of the group of 2
    wrong = [line.replace("17.95", "33.66").replace("17.94", "33.63") if line.strip().startswith("1048576 ")
             else line for line in lines]
    run = parse_nccl_tests("\n".join(wrong))
    assert run.nranks == 2 and any("does not fit groups of 2" in w for w in run.warnings)


def test_split_groups_from_the_environment_when_the_rank_list_is_absent():
    table = "\n".join(line for line in SPLIT.read_text().splitlines() if "Rank" not in line)
    run = parse_nccl_tests(table, nranks=16, env={"NCCL_TESTS_SPLIT_MASK": "0x7"})
    assert (run.nranks, run.world_nranks, run.groups) == (2, 16, 8)
    assert run.nranks_source.startswith("NCCL_TESTS_SPLIT_MASK=0x7")
    assert parse_nccl_tests(table, nranks=16).nranks == 16  # nothing says it was split: the caller's count
    # a build before v2.13.4 prints no Group column: the split the run was given says it
    old = re.sub(r"Group +\d+ ", "", SPLIT.read_text())
    assert "Group" not in old
    run = parse_nccl_tests(old, env={"NCCL_TESTS_SPLIT_MASK": "0x7"})
    assert (run.nranks, run.world_nranks, run.groups, run.nnodes) == (2, 16, 8, 2)


@pytest.mark.parametrize(("env", "nprocs", "colors"), [
    ({"NCCL_TESTS_SPLIT_MASK": "0x7"}, 16, [p & 7 for p in range(16)]),
    ({"NCCL_TESTS_SPLIT_MASK": "7"}, 4, [0, 1, 2, 3]),  # strtoul(s, 16)
    ({"NCCL_TESTS_SPLIT": "MOD 8"}, 16, [p % 8 for p in range(16)]),
    ({"NCCL_TESTS_SPLIT": "%8"}, 16, [p % 8 for p in range(16)]),
    ({"NCCL_TESTS_SPLIT": "DIV 8"}, 16, [p // 8 for p in range(16)]),
    ({"NCCL_TESTS_SPLIT": "and 0b110"}, 8, [p & 6 for p in range(8)]),
    ({"NCCL_TESTS_SPLIT": "| 1"}, 4, [1, 1, 3, 3]),
    ({"NCCL_TESTS_SPLIT_MASK": "0x1", "NCCL_TESTS_SPLIT": "DIV 8"}, 4, [0, 1, 0, 1]),  # the mask is read first
])
def test_split_colours_as_nccl_tests_computes_them(env, nprocs, colors):
    found = split_colors(env, nprocs)
    assert found is not None and found[0] == colors


@pytest.mark.parametrize("env", [{}, {"NCCL_TESTS_SPLIT": "MOD 0"}, {"NCCL_TESTS_SPLIT": "XOR 3"},
                                 {"NCCL_TESTS_SPLIT_MASK": "zz"}])
def test_no_or_unreadable_split_is_no_split(env):
    assert split_colors(env, 8) is None


def test_the_split_applies_to_processes_not_to_their_gpus():
    """nccl-tests issue 301: with -g 8 (one process per node) a mask of 0x7 makes 2 groups, not 8."""
    groups = groups_from_env({"NCCL_TESTS_SPLIT_MASK": "0x7"}, 16, 8)
    assert groups is not None and (groups.groups, groups.size) == (2, 8)
    one_per_gpu = groups_from_env({"NCCL_TESTS_SPLIT_MASK": "0x7"}, 16, 1)
    assert one_per_gpu is not None and (one_per_gpu.groups, one_per_gpu.size) == (8, 2)


def _pxn_point(spec, op: str, mask: str | None):
    plan = plan_sweep(spec)
    return next(p for p in plan.points if p.op == op and p.settings.get("NCCL_TESTS_SPLIT_MASK") == mask
                and p.repeat == 0)


def test_the_sweep_attempt_accepts_a_rail_isolated_point(tmp_path):
    spec = preset("nccl-pxn-rails")
    assert spec.nranks == 16
    point = _pxn_point(spec, "all_gather", "0x7")
    records, problem = collect_records(spec, point, tmp_path / "p.jsonl", SPLIT.read_text(), tmp_path / "p.log")
    assert problem is None
    assert len(records) == 12 and {r.nranks for r in records} == {2}
    assert {(r.time_over_ranks, r.process_shape, r.dtype) for r in records} == {("max", "16x1x1", "float32")}


# ---------------------------------------------------------------------------------- item 8: separate processes

def test_interleaved_one_rank_processes_are_refused_with_the_cause_and_the_fix():
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(INTERLEAVED.read_text(), source=INTERLEAVED.name)
    message = str(err.value)
    assert "not 8 separate processes (1 rank each)" in message
    assert "MPI=1" in message and "srun --mpi=pmix" in message and "singleton" in message
    assert "Rank 0 printed by 8 processes" in message


def test_concatenated_one_rank_processes_are_refused_where_the_second_starts():
    text = CONCATENATED.read_text()
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(text, source=CONCATENATED.name)
    second = next(i for i, line in enumerate(text.splitlines(), 1) if "starting" in line and i > 2)
    assert err.value.line == second
    assert "not 2 separate processes" in str(err.value) and "MPI=1" in str(err.value)
    assert "pid 20931 on gpu-d07" in str(err.value)


def test_the_same_run_pasted_twice_is_still_a_second_run():
    text = MODERN.read_text()
    with pytest.raises(ParseError, match="second run") as err:
        parse_nccl_tests(text + text)
    assert "MPI=1" not in str(err.value)


def test_one_process_where_the_launch_expected_eight_names_the_cause():
    lines = CONCATENATED.read_text().splitlines()
    one = "\n".join(lines[:next(i for i, line in enumerate(lines) if "concluded" in line) + 1])
    assert parse_nccl_tests(one).nranks == 1  # alone, a one-GPU run is a run
    with pytest.raises(ParseError, match=r"8 ranks \(as passed\) \(one process's ranks only.*MPI=1"):
        parse_nccl_tests(one, nranks=8)


def test_the_sweep_attempt_records_a_parse_error_not_one_rank_records(tmp_path):
    spec = preset("nccl-algo-proto")
    point = next(p for p in plan_sweep(spec).points if p.op == "all_reduce" and not p.settings)
    records, problem = collect_records(spec, point, tmp_path / "p.jsonl", INTERLEAVED.read_text(),
                                       tmp_path / "p.log")
    assert records == [] and problem is not None and "MPI=1" in problem


def test_separate_processes_rules():
    def dev(rank: int, pid: int, host: str = "h") -> NcclTestsDevice:
        return NcclTestsDevice(rank=rank, group=0, pid=pid, host=host, device=0, bus_id="0000:18:00", name="G")

    assert separate_processes([dev(0, 1), dev(1, 2)], 1) is None  # one run of 2 processes
    assert separate_processes([dev(0, 1), dev(0, 1)], 2) is None  # the same list pasted twice
    assert separate_processes([dev(0, 7, "a"), dev(0, 7, "b")], 0) is not None  # same pid, other host
    assert separate_processes([], 3) is not None  # three headers, no rank list


# ---------------------------------------------------------------------------------- item 12: split ops' start

@pytest.mark.parametrize(("nranks", "start"), [(8, 128), (16, 256)])
def test_algo_proto_split_ops_start_where_every_rank_holds_data(nranks, start):
    spec = preset("nccl-algo-proto", nranks=nranks)
    assert spec.min_bytes == 8
    for point in plan_sweep(spec).points:
        nt = nccl_tests_spec_for(spec, point, ngpus=1, timeout_s=60)
        if point.op in SPLIT_OPS:
            assert nt.min_bytes == start, point.point_id
            assert start // nranks == 16  # nccl-tests' per-rank granule: no size-0 row left
        else:
            assert nt.min_bytes == 8, point.point_id
        assert nt.average == COLLSCOPE_AVERAGE == 3


def test_first_ladder_size_stays_on_the_ladder_and_says_when_none_fits():
    assert first_ladder_size(8, GIB, 2, op="all_gather", nranks=8) == 128
    assert first_ladder_size(8, GIB, 4, op="reduce_scatter", nranks=8) == 128  # 8, 32, 128
    assert first_ladder_size(10, GIB, 3, op="all_gather", nranks=16) == 270  # 10, 30, 90, 270
    assert first_ladder_size(8, GIB, 2, op="all_reduce", nranks=16) == 8
    with pytest.raises(ConfigError, match="--max-bytes 256"):
        first_ladder_size(8, 200, 2, op="all_gather", nranks=16)
    spec = nccl_tests_spec_for_ladder(op="all_gather", min_bytes=8, max_bytes=GIB, factor=2, iters=5, warmup=1,
                                      check=True, dtype="float32", nranks=16)
    assert nccl_tests_argv(spec)[:3] == ["all_gather_perf", "-b", "256"]


# ---------------------------------------------------------------------------------- item 13: comparability

def test_every_nccl_tests_run_collscope_starts_reports_the_maximum_over_ranks():
    spec = nccl_tests_spec_for_ladder(op="all_reduce", min_bytes=8, max_bytes=64, factor=2, iters=5, warmup=1,
                                      check=True, dtype="float32")
    argv = nccl_tests_argv(spec)
    assert argv[argv.index("-a") + 1] == "3"


@pytest.mark.parametrize(("argv", "value"), [
    (["all_reduce_perf", "-b", "8", "-a", "3"], 3), (["/x/all_gather_perf_mpi", "-a3"], 3),
    (["srun", "-n", "8", "all_reduce_perf", "--average=2"], 2), (["all_reduce_perf", "--average", "0"], 0),
    (["all_reduce_perf", "-b", "8"], 1),  # nccl-tests' default: the mean
    (["mpirun", "-a", "3", "hostname"], None),  # no nccl-tests binary: unknown
])
def test_average_from_the_command_line(argv, value):
    assert average_from_argv(argv) == value


def test_time_over_ranks_from_the_command_line_the_json_args_or_the_shape():
    mpi = MODERN.read_text()
    assert parse_nccl_tests(mpi).time_over_ranks is None  # 8 MPI processes, -a not shown: unknown
    assert parse_nccl_tests(mpi, argv=["all_reduce_perf", "-a", "3"]).records[0].time_over_ranks == "max"
    shown = "$ mpirun -np 8 ./build/all_reduce_perf -b 8 -e 32M -f 4 -g 1\n" + mpi
    assert parse_nccl_tests(shown).records[0].time_over_ranks == "mean"  # nccl-tests' default -a 1
    assert parse_nccl_tests(shown.replace("-g 1", "-g 1 -a 2")).records[0].time_over_ranks == "min"
    # one process, one thread, two GPUs: one timer waits for both, the slowest, whatever -a says
    one = parse_nccl_tests(ONE_PROCESS.read_text())
    assert (one.process_shape, one.time_over_ranks) == ("1x1x2", "max")
    doc = json.loads(JSON_OUT.read_text())
    assert parse_nccl_tests(JSON_OUT.read_text()).time_over_ranks == {0: "rank0", 1: "mean", 2: "min", 3: "max"}[
        average_from_argv(doc["args"])]
    doc["args"] = [doc["args"][0], "-a", "3"]
    assert parse_nccl_tests(json.dumps(doc)).records[0].time_over_ranks == "max"


def test_harness_records_say_they_are_the_slowest_ranks_time():
    spec = BenchSpec(op="all_gather", min_bytes=64, max_bytes=64, dtype="float32")
    rec = make_record(spec, engine="torch", backend="nccl", size_bytes=64, count=2, nranks=8, time_us=10.0,
                      wrong=0, in_place=False, hosts=("h",), engine_version=None, nccl_version=None, settings={},
                      source="test")
    assert (rec.time_over_ranks, rec.process_shape, rec.dtype) == ("max", "8x1x1", "float32")
    run = parse_nccl_tests(MODERN.read_text(), argv=["all_reduce_perf", "-a", str(COLLSCOPE_AVERAGE)])
    assert {(r.time_over_ranks, r.process_shape, r.dtype) for r in run.records} == {("max", "8x1x1", "float32")}


def test_run_nccl_tests_records_the_a_it_ran_with(fake_tools):
    fake_tools.nccl_tests("all_reduce", MODERN)
    env = {"PATH": os.environ["PATH"]}
    plain = run_nccl_tests(NcclTestsSpec(min_bytes=8, max_bytes=32 << 20, step_factor=4), extra_env=env, timeout_s=30)
    assert plain.ok and {r.time_over_ranks for r in plain.records} == {"mean"}  # no -a: nccl-tests' default
    ours = run_nccl_tests(NcclTestsSpec(min_bytes=8, max_bytes=32 << 20, step_factor=4, average=3), extra_env=env,
                          timeout_s=30)
    assert ours.ok and {r.time_over_ranks for r in ours.records} == {"max"}


def test_time_over_ranks_rules():
    assert time_over_ranks(None, 1, 1) == "max"
    assert time_over_ranks(1, 8, 1) == "mean" and time_over_ranks(3, 8, 1) == "max"
    assert time_over_ranks(None, 8, 1) is None and time_over_ranks(1, 1, 4) == "mean"


def test_process_shape_from_the_header_and_the_rank_lines():
    assert parse_nccl_tests(MODERN.read_text()).records[0].process_shape == "8x1x1"
    assert parse_nccl_tests(ONE_PROCESS.read_text()).records[0].process_shape == "1x1x2"
    assert parse_nccl_tests(SPLIT.read_text()).process_shape == "16x1x1"
    table = "\n".join(line for line in MODERN.read_text().splitlines() if "Rank" not in line)
    assert parse_nccl_tests(table).process_shape is None  # no rank list, no world size: unknown


def test_one_dtype_name_in_records_whichever_engine():
    run = parse_nccl_tests(MODERN.read_text())
    assert {r.dtype for r in run.records} == {"float32"}  # nccl-tests prints "float"
    assert {r.dtype for r in parse_nccl_tests(JSON_OUT.read_text()).records} == {"float32"}
    assert [canonical_dtype(n) for n in ("float", "half", "double", "char", "int", "f8e4m3")] == [
        "float32", "float16", "float64", "int8", "int32", "float8_e4m3fn"]
    assert set(ELEM_SIZE) <= {d.name for d in DTYPE_TABLE}
    for d in DTYPE_TABLE:  # one table: the harnesses' widths and nccl-tests' -d names come from it
        assert ELEM_SIZE.get(d.name, d.elem_bytes) == d.elem_bytes
        assert BENCH_TO_NCCL_TESTS_DTYPE.get(d.name) == d.nccl_tests  # None: a type nccl-tests has no -d for
    with pytest.raises(ValueError, match="unknown element type 'fp4'"):
        canonical_dtype("fp4")


def test_new_record_fields_are_optional_and_decoded_strictly():
    old = (b'{"engine":"torch","backend":"gloo","op":"all_reduce","size_bytes":8,"count":2,"dtype":"float32",'
           b'"redop":"sum","root":null,"in_place":false,"nranks":2,"nnodes":1,"time_us":1.0,"algbw_gbps":0.0,'
           b'"busbw_gbps":0.0}\n')
    [rec] = decode_records(old, "old.jsonl")
    assert rec.time_over_ranks is None and rec.process_shape is None
    new = old.replace(b'"busbw_gbps":0.0}', b'"busbw_gbps":0.0,"time_over_ranks":"max","process_shape":"2x1x1"}')
    [rec] = decode_records(new, "new.jsonl")
    assert (rec.time_over_ranks, rec.process_shape) == ("max", "2x1x1")
    assert Measurement.from_dict(rec.to_dict()) == rec
    with pytest.raises(ParseError, match="time_over_ranks"):
        decode_records(old.replace(b'"busbw_gbps":0.0}', b'"busbw_gbps":0.0,"time_over_ranks":"average"}'), "x")


def _nccl_tests_sizes(min_bytes: int, max_bytes: int, factor: int, elem: int, op: str, nranks: int) -> list[int]:
    """What nccl-tests prints in its size column (src/common.cu TimeTest/setupArgs and the *GetCollByteCount of
    all_gather.cu, reduce_scatter.cu, alltoall.cu), without its size-0 rows and repeats."""
    out: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        count = size // elem
        if op in SPLIT_OPS:
            per_rank = (count // nranks) & ~(16 // elem - 1)
            printed = per_rank * nranks * elem
        else:
            printed = count * elem
        if printed and (not out or out[-1] != printed):
            out.append(printed)
        size *= factor
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 1 << 16), st.integers(0, 1 << 22), st.sampled_from([2, 3, 4, 8]),
       st.sampled_from(sorted(set(ELEM_SIZE.values()))), st.sampled_from(["all_reduce", *sorted(SPLIT_OPS)]),
       st.integers(1, 24))
def test_harness_ladders_are_the_sizes_nccl_tests_prints(lo, span, factor, elem, op, nranks):
    expected = _nccl_tests_sizes(lo, lo + span, factor, elem, op, nranks)
    try:
        got = size_ladder(lo, lo + span, factor, elem_size=elem, op=op, nranks=nranks)
    except ConfigError:
        got = []
    assert got == expected
