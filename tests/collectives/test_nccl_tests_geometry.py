"""The geometry of an nccl-tests run read from every line of evidence (issue 23 items 1-3): partial rank lists
(only the last line kept, an elision in the middle or at the end), NCCL INFO lines (Init COMPLETE, comm lines
with nNodes/localRanks/MNNVL, opCount), the launch command line, a -J file's environment, busbw/algbw; the op
from the columns and INFO lines; the overrides (nranks, nnodes, nvl_domain, op) and their notes; ingest's text
and --json output of it.

The fixtures are ours, written in the shapes of published outputs: only the last rank line kept
(coreweave/nccl-tests#43, 72 and 144 ranks on GB200 NVL72), Init COMPLETE lines pasted with the table
(NVIDIA/nccl-tests#29), the mpirun line above the output (NVIDIA/nccl-tests#78, #119), srun continued over
lines (NVIDIA/nccl-tests#389), MNNVL fabric lines of GB200 (NVIDIA/nccl#1769).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.collectives.nccl_tests import parse_nccl_tests
from collscope.errors import ParseError

FIX = Path(__file__).parent.parent / "fixtures" / "nccl-tests"
NVL72 = FIX / "all_reduce_perf-v2.19.6-gb200-nvl72-72r-last-rank-line-only.txt"
RACKS20 = FIX / "all_reduce_perf-v2.19.6-gb200-1440r-last-rank-line-only.txt"
A2A128 = FIX / "alltoall_perf-v2.19.6-16x8-128r-elided-rank-list-ends-rank-127.txt"
BCAST_INFO = FIX / "broadcast-8r-nccl-info-init-complete-no-binary-name.txt"
ROOTED = FIX / "gather-or-scatter-8r-nccl-info-no-binary-name.txt"
MPIRUN = FIX / "broadcast_perf-mpirun-np16-npernode8-no-rank-lines.txt"
MNNVL = FIX / "all_reduce_perf-v2.19.6-gb200-2x4-mnnvl-info-one-nvlink-domain.txt"
MODERN = FIX / "all_reduce_perf-v2.19.6-2x4-wrong-redop-root.txt"
JSON_OUT = FIX / "all_reduce_perf-v2.19.6-J-output.json"


def _parse(path: Path, **kwargs: object):
    return parse_nccl_tests(path.read_text(), source=path.name, **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ partial rank lists


@pytest.mark.parametrize(("path", "n", "ratio"), [(NVL72, 72, "busbw/algbw = 1.9722 -> 72"),
                                                  (RACKS20, 1440, "busbw/algbw = 1.9986 -> 1421..1440")])
def test_only_the_last_rank_line_kept_gives_the_ranks_checked_against_busbw(path: Path, n: int, ratio: str):
    run = _parse(path)  # was "1 ranks on 1 node": the one line read as a complete list
    assert run.nranks == n and run.ranks_elided
    assert run.geometry.nranks.evidence == (f"Rank {n - 1} is the highest rank line", ratio)
    assert run.nnodes is None and run.geometry.value("nnodes") is None  # never a silent 1
    assert {r.nranks for r in run.records} == {n} and {r.nnodes for r in run.records} == {None}
    assert run.geometry.nnodes.low == 1 and run.geometry.gpus_per_node.low == 4  # "device 3" in the line


def test_a_last_rank_line_that_busbw_contradicts_is_an_error_naming_both():
    lines = NVL72.read_text().splitlines()
    lines.insert(6, "nvl-r07-t18:48211:48290 [3] NCCL INFO comm 0x3fa0c10 rank 71 nranks 64 cudaDev 3 nvmlDev 3 "
                    "busId 1901000 commId 0x1d2e3f40a5b6c7d8 - Init COMPLETE")
    with pytest.raises(ParseError) as caught:
        parse_nccl_tests("\n".join(lines), source="nvl72.txt")
    message = str(caught.value)
    assert "nranks 64 in NCCL's Init COMPLETE lines" in message and "--nranks" in message
    assert "Rank 71 is the highest rank line" in message or "busbw/algbw = 1.9722 -> 72" in message


def test_nranks_passed_for_a_partial_list_is_accepted_and_a_disagreeing_one_wins_with_a_note():
    assert _parse(NVL72, nranks=72).nranks == 72  # was refused: "found '1 ranks in the rank list'"
    run = _parse(NVL72, nranks=64)
    assert run.nranks == 64 and run.geometry.nranks.overridden
    assert any("--nranks 64 (as passed) overrides 'Rank 71 is the highest rank line'" in note
               for note in run.geometry.notes)


def test_an_elision_before_the_last_rank_line_gives_the_ranks_exactly():
    run = _parse(A2A128)  # was refused although busbw/algbw allows 128
    assert (run.op, run.nranks) == ("alltoall", 128)
    assert run.geometry.nranks.evidence[0] == "Rank 127 is the highest rank line"
    assert run.geometry.nnodes.low == 2 and run.nnodes is None


def test_an_elision_at_the_end_of_the_rank_list_is_resolved_by_the_count_column():
    # The rank list is only a lower bound and busbw/algbw a range; alltoall's count column is one rank's count per
    # peer (nccl-tests src/common.cu setupArgs prints paramCount; src/alltoall.cu: paramcount = count/nranks), so
    # size / (count x type size) gives the ranks, as for all_gather (issue 24 item 5: the op table's size_is_total)
    lines = [line for line in A2A128.read_text().splitlines() if not line.startswith("#  Rank 12")]
    lines = [line for line in lines if "h100-n016" not in line]  # Rank 0..7, then "#  ..."
    run = parse_nccl_tests("\n".join(lines), source="a2a.txt")
    assert run.nranks == 128
    assert run.geometry.nranks.evidence == ("Rank 7 is the highest rank line shown (the list is cut after it)",
                                            "size / (count x type size) = 128", "busbw/algbw = 0.9923 -> 126..130")
    assert parse_nccl_tests("\n".join(lines), nranks=128).nranks == 128


# ------------------------------------------------------------------------------------------ NCCL INFO lines, op


def test_broadcast_read_from_its_columns_and_its_ranks_from_nccl_init_complete_lines():
    run = _parse(BCAST_INFO)  # was refused twice: the op, then the rank count
    assert (run.op, run.nranks) == ("broadcast", 8)
    assert run.op_evidence == "redop none, root 0 and busbw = algbw in every row: broadcast"
    assert run.geometry.nranks.evidence == ("nranks 8 in NCCL's Init COMPLETE lines",)
    assert {(r.op, r.nranks, r.root) for r in run.records} == {("broadcast", 8, 0)}


def test_a_root_and_n_minus_1_over_n_is_gather_or_scatter_and_asks():
    with pytest.raises(ParseError, match=r"gather and scatter.*--op gather or --op scatter"):
        _parse(ROOTED)
    run = _parse(ROOTED, op="gather")
    assert run.nranks == 8 and run.op_evidence == "--op (as passed)"
    # gather's count column is one rank's block (nccl-tests src/gather.cu: paramcount = count/nranks)
    assert run.geometry.nranks.evidence == ("nranks 8 in NCCL's Init COMPLETE lines", "size / (count x type size) = 8",
                                            "busbw/algbw = 0.8750 -> 8")


def test_the_op_named_by_nccl_opcount_lines_and_their_nranks():
    table = [line for line in MPIRUN.read_text().splitlines() if not line.startswith("mpirun")]
    table.insert(1, "gpu-c03:9120:9120 [0] NCCL INFO Broadcast: opCount 0 sendbuff 0x7f3a20000000 recvbuff "
                    "0x7f3a20000000 count 2097152 datatype 7 op 0 root 0 comm 0x55e1c0 [nranks=16] stream 0x55e2a0")
    run = parse_nccl_tests("\n".join(table), source="coll.txt")
    assert (run.op, run.nranks) == ("broadcast", 16)
    assert run.op_evidence == "NCCL INFO lines name broadcast (line 2)"
    assert run.geometry.nranks.evidence == ("[nranks=16] in NCCL's opCount lines",)


def test_mnnvl_comm_lines_count_nvlink_domains_not_hosts():
    run = _parse(MNNVL)
    assert (run.nranks, run.nnodes) == (8, 2)  # nNodes 1 with MNNVL 1 is one NVLink domain, not one host
    g = run.geometry
    assert g.nnodes.evidence == ("hosts of the rank lines: 2",
                                 "nNodes 1 with MNNVL 1 in NCCL's comm lines (NVLink domains)")
    assert g.value("nvl_domain") is None and g.nvl_domain.low == 8
    assert g.nvl_domain.evidence == ("localRanks 8 with MNNVL 1 in NCCL's comm lines",)
    assert (g.value("ranks_per_node"), g.value("gpus_per_node")) == (4, 4)
    over = _parse(MNNVL, nvl_domain=72)
    assert over.geometry.nvl_domain.value == 72 and not over.geometry.notes  # 72 >= 8: no clue disagrees
    assert over.geometry.nvl_domain.evidence[0] == "--nvl-domain 72 (as passed)"


def test_comm_lines_without_mnnvl_give_nodes_and_ranks_per_node():
    run = _parse(MODERN)
    assert run.geometry.nnodes.evidence == ("hosts of the rank lines: 2", "nNodes 2 in NCCL's comm lines")
    assert run.geometry.ranks_per_node.evidence == ("ranks per host in the rank lines",
                                                    "localRanks 4 in NCCL's comm lines")


# ------------------------------------------------------------------------------------------ launch lines, -J env


def test_mpirun_np_and_npernode_on_the_command_line():
    run = _parse(MPIRUN)  # was refused: broadcast's busbw/algbw does not depend on n
    assert (run.op, run.nranks, run.nnodes) == ("broadcast", 16, 2)
    g = run.geometry
    assert g.nranks.evidence == ("mpirun -np 16 on the command line",)
    assert g.ranks_per_node.evidence == ("mpirun -npernode 8 on the command line",)
    assert g.nnodes.evidence == ("16 ranks / 8 ranks per node",)


def test_srun_continued_over_lines_and_gpus_per_process():
    rows = [line for line in MPIRUN.read_text().splitlines() if not line.startswith("mpirun")]
    command = ["$ srun \\", "    --mpi=pmix --nodes=2 --ntasks-per-node=4 \\",
               "    $HOME/nccl-tests/build/broadcast_perf \\", "    -b 8M -e 512M \\", "    -g 2"]
    run = parse_nccl_tests("\n".join(command + rows), source="srun.txt")
    assert (run.nranks, run.nnodes) == (16, 2)
    assert run.geometry.ranks_per_node.evidence == (
        "srun --ntasks-per-node=4 x nThread 1 x nGpus 2 on the command line",)
    assert run.geometry.nnodes.evidence == ("srun --nodes=2 on the command line",)


def test_json_environment_of_the_launcher():
    doc = json.loads(JSON_OUT.read_text())
    del doc["config"]["devices"]
    doc["env"] += ["SLURM_STEP_NUM_NODES=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2"]
    run = parse_nccl_tests(json.dumps(doc), source="ar.json")
    assert (run.nranks, run.nnodes) == (4, 2)
    assert run.geometry.nranks.evidence == ("OMPI_COMM_WORLD_SIZE=4 in the run's environment",
                                            "busbw/algbw = 1.5000 -> 4")
    assert run.geometry.nnodes.evidence == ("SLURM_STEP_NUM_NODES=2 in the run's environment",)
    assert parse_nccl_tests(json.dumps(doc), nnodes=1).nnodes == 1  # the override wins, with a note
    assert parse_nccl_tests(json.dumps(doc), nnodes=1).geometry.notes


# ------------------------------------------------------------------------------------------ overrides


def test_nnodes_override_wins_over_the_hosts_with_a_note_and_reaches_the_records():
    run = _parse(MODERN, nnodes=4)
    assert run.nnodes == 4 and {r.nnodes for r in run.records} == {4}
    assert any("--nnodes 4 (as passed) overrides 'hosts of the rank lines: 2'" in n for n in run.geometry.notes)


def test_a_complete_rank_list_that_does_not_show_the_ranks_passed_is_still_refused():
    with pytest.raises(ParseError, match="8 ranks in the rank list"):
        _parse(MODERN, nranks=16)  # the list is what ran (a launch whose processes ran alone, say)


# ------------------------------------------------------------------------------------------ ingest


def test_ingest_prints_the_geometry_with_its_evidence_and_accepts_the_overrides():
    result = CliRunner().invoke(main, ["ingest", str(NVL72), "--nranks", "72", "--nnodes", "18",
                                       "--nvl-domain", "72"])
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert "all_reduce, 72 ranks on 18 nodes" in out[0]
    assert "  op: all_reduce ('Collective test starting: all_reduce_perf' (line 2))" in out
    assert ("  nranks: 72 (--nranks 72 (as passed); Rank 71 is the highest rank line; busbw/algbw = 1.9722 -> 72)"
            in out)
    assert "  nnodes: 18 (--nnodes 18 (as passed); hosts of the rank lines shown: 1)" in out
    assert "  ranks_per_node: 4 (72 ranks / 18 nodes)" in out
    assert "  nvl_domain: 72 (--nvl-domain 72 (as passed))" in out


def test_ingest_says_what_is_unknown():
    result = CliRunner().invoke(main, ["ingest", str(NVL72)])
    assert result.exit_code == 0, result.output
    assert "all_reduce, 72 ranks (nodes unknown)" in result.stdout
    assert ("  nnodes: unknown (1 or more allowed) (hosts of the rank lines shown: 1; pass --nnodes N)"
            in result.stdout.splitlines())


def test_ingest_json_keeps_records_on_stdout_and_writes_each_geometry_on_stderr():
    result = CliRunner().invoke(main, ["ingest", str(BCAST_INFO), str(MPIRUN), "--json"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 16 and all("engine" in r for r in records)
    objects = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert [o["file"] for o in objects] == [str(BCAST_INFO), str(MPIRUN)]
    first = objects[0]
    assert (first["op"], first["op_evidence"]) == ("broadcast", "redop none, root 0 and busbw = algbw in every "
                                                                "row: broadcast")
    assert first["geometry"]["nranks"] == {"value": 8, "evidence": ["nranks 8 in NCCL's Init COMPLETE lines"]}
    assert first["geometry"]["nnodes"] == {"value": None, "evidence": []}
    assert objects[1]["geometry"]["nnodes"]["value"] == 2


def test_json_devices_are_quoted_as_config_devices():
    run = parse_nccl_tests(JSON_OUT.read_text(), source="ar.json")
    assert run.geometry.nranks.evidence[0] == "4 ranks in config.devices"
    assert run.geometry.nnodes.evidence == ("hosts of config.devices: 2",)


def test_damaged_clues_with_zeros_say_nothing_and_never_crash():
    """Found by a seeded fuzz of these fixtures: a 0 in a clue (nranks 0, -np 0, -g 0, localRanks 0) divided by
    zero when nranks = nnodes x ranks_per_node was derived."""
    text = MPIRUN.read_text().replace("-np 16 -npernode 8", "-np 0 -npernode 0")
    text = "gpu-c03:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 0 localRanks 0 localRank 0 MNNVL 0\n" + text
    with pytest.raises(ParseError, match="--nranks"):
        parse_nccl_tests(text, source="zeros.txt")
    assert parse_nccl_tests(text.replace("nNodes 0 localRanks 0", "nNodes 2 localRanks 4")).nranks == 8
    with pytest.raises(ParseError, match="nnodes >= 1"):
        _parse(MODERN, nnodes=0)


SIZE_ZERO_ALL_GATHER = FIX / "all_gather_perf-v2.19.6-2x8-b8-five-size-0-rows.txt"


def _rank_lines_cut_without_marker() -> str:
    """Our 2 x 8 all_gather with rank lines 7..15 deleted and no elision marker left (an author's silent cut)."""
    return "".join(line for line in SIZE_ZERO_ALL_GATHER.read_text().splitlines(keepends=True)
                   if not any(line.startswith(f"#  Rank {r:2d} ") for r in range(7, 16)))


def test_a_rank_list_cut_without_marker_against_size_count_and_busbw_is_an_error_naming_both():
    with pytest.raises(ParseError) as caught:
        parse_nccl_tests(_rank_lines_cut_without_marker(), source="cut.txt")
    message = str(caught.value)
    assert "the rank list shows 7" in message and "both say 16" in message and "--nranks 16" in message


def test_nranks_passed_for_a_silently_cut_list_wins_when_the_rows_fit_it():
    run = parse_nccl_tests(_rank_lines_cut_without_marker(), source="cut.txt", nranks=16)
    assert run.nranks == 16 and run.geometry.value("nranks") == 16
    assert any("taken as an excerpt" in w for w in run.warnings)
    assert run.geometry.nnodes.value is None  # 1 host shown of a cut list: a lower bound, not 1 node
