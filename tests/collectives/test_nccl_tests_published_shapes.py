"""nccl-tests text as people publish it (issue 23 item 4): launcher and log-collector prefixes, author edits, several
runs in one file, rccl-tests.

Fixtures (tests/fixtures/nccl-tests/published/, written for collscope: own hosts and numbers) follow shapes found in
public outputs: Open MPI ``--tag-output`` in kubectl logs of Kubeflow MPIJob launchers (AWS EKS/EFA samples:
``[1,0]<stdout>:`` lines, other ranks' ``[1,3]<stdout>:host:pid:tid [3] NCCL INFO`` lines interleaved, ssh warnings
untagged), Slurm ``srun -l`` (right-aligned `` 0:`` labels, NVIDIA/nccl-tests discussions of 2-node H100 runs),
rccl-tests (``# rccl-tests version ... rccl-headers= rccl-library=``, ``rccl-tests: Version develop:<hash>``, the
``RCCL version :`` block; ROCm/rocm-systems, ROCm/container-toolkit, ROCm/rccl pull requests), author elisions
(``(truncated)``, ``[...]``, ``# Truncated smaller message sizes``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.cli import main
from collscope.collectives.nccl_tests.parse import parse_nccl_tests
from collscope.collectives.nccl_tests.prefixes import prefix_clues, strip_line_prefixes
from collscope.collectives.nccl_tests.runs import parse_nccl_tests_runs
from collscope.errors import ParseError
from collscope.geometry import GeometryEvidence

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
PUB = FIX / "published"
PLAIN = FIX / "all_reduce_perf-v2.19.6-2x4-wrong-redop-root.txt"
CONCATENATED = FIX / "broadcast_perf-v2.19.6-2-one-rank-processes-srun-concatenated.txt"


# ---- launcher prefixes ---------------------------------------------------------------------------------------
PREFIXED = [
    # file, op, nranks, nnodes, records, kinds, labels, hosts
    ("all_reduce_perf-ompi-tag-output-kubectl-mpijob-2x2.txt", "all_reduce", 4, 2, 18, ("open-mpi",),
     (0, 1, 2, 3), ()),
    ("all_gather_perf-ompi5-tag-output-space-kubectl-timestamps-2x4.txt", "all_gather", 8, 2, 18,
     ("timestamp", "open-mpi"), (0, 5, 7), ()),
    ("all_reduce_perf-srun-label-2x8.txt", "all_reduce", 16, 2, 22, ("slurm-label",), (0, 3, 12, 15), ()),
    ("broadcast_perf-pdsh-host-prefix-1x8-g8.txt", "broadcast", 8, 1, 22, ("pdsh",), (), ("gpu-b07",)),
    ("all_reduce_perf-journald-syslog-1x8.txt", "all_reduce", 8, 1, 22, ("syslog",), (), ("gpu-c03",)),
    ("all_reduce_perf-host-pid-prefix-1x4-g4.txt", "all_reduce", 4, 1, 14, ("host-pid",), (), ("gpu-d02",)),
]


@pytest.mark.parametrize(("name", "op", "nranks", "nnodes", "nrecords", "kinds", "labels", "hosts"), PREFIXED)
def test_prefixed_outputs_read_as_their_run(name, op, nranks, nnodes, nrecords, kinds, labels, hosts):
    """Each of these was refused whole before ('expected nccl-tests output')."""
    run = parse_nccl_tests((PUB / name).read_text(), source=name)
    assert (run.op, run.nranks, run.nnodes, len(run.records)) == (op, nranks, nnodes, nrecords)
    assert run.complete and not run.failed
    assert run.line_prefixes is not None
    assert run.line_prefixes.kinds == kinds
    assert run.line_prefixes.labels == labels and run.line_prefixes.hosts == hosts
    assert any(w.startswith("line prefixes stripped: ") for w in run.warnings)


def _prefix_every(text: str, prefix, every: int = 1) -> str:
    return "\n".join(prefix(i, line) if i % every == 0 else line for i, line in enumerate(text.split("\n")))


STYLES = {
    "open-mpi": lambda i, line: f"[1,0]<stdout>:{line}",
    "open-mpi-space": lambda i, line: f"[1,0]<stdout>: {line}",
    "open-mpi-stderr": lambda i, line: f"[1,{i % 4}]<{'stderr' if i % 3 else 'stdout'}>:{line}",
    "slurm": lambda i, line: f"{i % 8 * 2:2d}: {line}" if i % 8 < 4 else f"{i % 8}: {line}",
    "slurm-0": lambda i, line: f"0: {line}",
    "pdsh": lambda i, line: f"node-{i % 2}.example: {line}",
    "kubectl-timestamps": lambda i, line: f"2025-03-04T05:06:{i % 60:02d}.123456789Z {line}",
    "kubectl-timestamps-open-mpi": lambda i, line: f"2025-03-04T05:06:07.5Z [1,{i % 8}]<stdout>:{line}",
    "journald": lambda i, line: f"Mar  4 05:06:{i % 60:02d} gpu-x9 nccl-check[812]: {line}",
    "journald-iso": lambda i, line: f"2025-03-04T05:06:07+0000 gpu-x9 nccl-check[812]: {line}",
    "host-pid": lambda i, line: f"[gpu-x9:812] {line}",
    "host-pid-tid": lambda i, line: f"[gpu-x9:812:{830 + i % 3}] {line}",
}


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("every", [1, 2])
def test_every_prefix_style_gives_the_records_of_the_plain_output(style, every):
    """A prefix on every line, or on every other line only (stderr merged untagged): the same records."""
    plain = PLAIN.read_text()
    prefixed = _prefix_every(plain, STYLES[style], every)
    run = parse_nccl_tests(prefixed, source="prefixed.txt")
    assert run.records == parse_nccl_tests(plain, source="prefixed.txt").records
    assert run.line_prefixes is not None and run.line_prefixes.lines >= plain.count("\n") // every


_PIECES = st.sampled_from(["[1,0]<stdout>:", "[1,12]<stderr>: ", " 3: ", "12:", "gpu-a01: ", "Warning: ", "# ",
                           "2025-03-04T05:06:07.1Z ", "Mar 04 05:06:07 h p[1]: ", "[h:1:2] ", "[h:1]", "nThread 1 ",
                           "    1024   256  float  sum  -1  1.0  1.0  1.0  0  1.0  1.0  1.0  0", ":", "[", "\t", " "])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_PIECES, max_size=4).map("".join), max_size=12).map("\n".join))
def test_stripping_keeps_every_line_and_parsing_raises_only_parse_errors(text):
    stripped, prefixes = strip_line_prefixes(text)
    assert stripped.count("\n") == text.count("\n")
    assert (prefixes is None) == (stripped is text)
    try:
        parse_nccl_tests_runs(text)
    except ParseError:
        pass


def test_no_prefix_returns_the_text_itself():
    text = PLAIN.read_text()
    stripped, prefixes = strip_line_prefixes(text)
    assert stripped is text and prefixes is None
    assert parse_nccl_tests(text).line_prefixes is None


def test_words_before_a_colon_are_not_pdsh_hosts():
    text = ("Warning: Permanently added 'gpu-a01' (ED25519) to the list of known hosts.\n"
            "srun: job 7 queued and waiting for resources\n" + PLAIN.read_text())
    stripped, prefixes = strip_line_prefixes(text)
    assert prefixes is None and stripped is text


def test_prefixes_keep_line_numbers():
    text = _prefix_every(PLAIN.read_text(), STYLES["slurm"])
    stripped, _ = strip_line_prefixes(text)
    assert stripped.count("\n") == text.count("\n")
    broken = text.replace("float     sum      -1", "float     sum      -1 x", 1)
    line = next(i for i, t in enumerate(broken.split("\n"), 1) if " x " in t)
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(broken)
    assert err.value.line == line


def test_what_the_prefixes_say_is_geometry_evidence_with_processes_not_ranks():
    """srun -l labels up to 15 are at least 16 tasks; with -g 8 an Open MPI rank 1 is at least 2 x 8 GPUs."""
    run = parse_nccl_tests((PUB / "all_reduce_perf-srun-label-2x8.txt").read_text())
    assert run.line_prefixes is not None
    ev = GeometryEvidence("srun")
    prefix_clues(run.line_prefixes, ev, nthreads=run.header.nthreads, ngpus=run.header.ngpus)
    nranks = ev.resolve().nranks
    assert nranks.value is None and nranks.low == 16
    assert "Slurm task labels up to 15" in nranks.evidence[0] and "at least 16 tasks" in nranks.evidence[0]

    _, g8 = strip_line_prefixes("[1,0]<stdout>:# nThread 1 nGpus 8\n[1,1]<stdout>:x1:2:3 [0] NCCL INFO x\n")
    assert g8 is not None
    ev = GeometryEvidence("mpirun")
    prefix_clues(g8, ev, nthreads=1, ngpus=8)
    assert ev.resolve().nranks.low == 16
    assert "at least 2 processes x nThread 1 x nGpus 8" in ev.resolve().nranks.evidence[0]

    run = parse_nccl_tests(_prefix_every(PLAIN.read_text(), STYLES["pdsh"]))
    assert run.line_prefixes is not None and run.line_prefixes.hosts == ("node-0.example", "node-1.example")
    ev = GeometryEvidence("pdsh")
    prefix_clues(run.line_prefixes, ev, nthreads=1, ngpus=1)
    assert ev.resolve().nnodes.low == 2 and "pdsh" in ev.resolve().nnodes.evidence[0]


# ---- author edits ----------------------------------------------------------------------------------------------
def test_rank_list_elided_with_truncated_in_parentheses():
    """'(truncated)' in the rank list: 6 rank lines of 16 ranks (before: read as a complete list of 6 ranks)."""
    run = parse_nccl_tests((PUB / "all_reduce_perf-2x8-rank-list-truncated.txt").read_text())
    assert run.ranks_elided and run.nranks == 16
    assert any("rank list elided by the author ((truncated))" in w for w in run.warnings)


@pytest.mark.parametrize("marker", ["#  ...", "# [...]", "#  (truncated)", "# ... 12 more ranks ...", "# <snip>",
                                    "# -- snip --", "# [snip]", "# (output truncated)"])
def test_rank_list_elision_markers(marker):
    lines = (PUB / "all_reduce_perf-2x8-rank-list-truncated.txt").read_text().split("\n")
    lines[9] = marker
    run = parse_nccl_tests("\n".join(lines))
    assert run.ranks_elided and run.nranks == 16


def test_snip_and_truncated_comments_in_the_table_are_noted():
    run = parse_nccl_tests((PUB / "all_reduce_perf-2x8-rank-list-bracket-elided-rows-snipped.txt").read_text())
    assert run.ranks_elided and run.nranks == 16 and len(run.records) == 16
    assert any("output elided by the author (Truncated smaller message sizes)" in w for w in run.warnings)
    assert any("output elided by the author (--- snip ---)" in w for w in run.warnings)


def test_table_cut_before_the_summary_keeps_its_rows_and_says_incomplete():
    run = parse_nccl_tests((PUB / "alltoall_perf-2x4-cut-before-summary.txt").read_text())
    assert not run.complete and run.avg_busbw_gbps is None and len(run.records) == 14
    assert any(w.startswith("incomplete run: the output ends before its summary") for w in run.warnings)


# ---- several runs in one file ----------------------------------------------------------------------------------
TWO = PUB / "two-runs-all_reduce-then-all_gather-2x4.txt"


def test_two_pasted_runs_are_two_runs():
    text = TWO.read_text()
    runs = parse_nccl_tests_runs(text, source=TWO.name)
    assert [(r.op, r.nranks, r.nnodes, len(r.records), r.complete) for r in runs] == [
        ("all_reduce", 8, 2, 20, True), ("all_gather", 8, 2, 20, True)]
    second = next(i for i, line in enumerate(text.split("\n"), 1) if "all_gather_perf -b" in line) - 1
    assert runs[1].warnings[0] == f"run 2 of 2 in this input (lines {second}-{text.count(chr(10)) + 1})"


def test_one_run_per_call_still_refuses_a_second_run_without_blaming_the_launch():
    with pytest.raises(ParseError, match="second run") as err:
        parse_nccl_tests(TWO.read_text())
    assert "MPI=1" not in str(err.value) and "collscope ingest reads each run" in str(err.value)


def test_an_error_in_the_second_run_names_its_line_in_the_file():
    lines = TWO.read_text().split("\n")
    bad = max(i for i, line in enumerate(lines) if line.strip()[:1].isdigit()) - 1
    lines[bad] = lines[bad].replace("float", "float 7", 1)
    with pytest.raises(ParseError) as err:
        parse_nccl_tests_runs("\n".join(lines))
    assert err.value.line == bad + 1


def test_one_process_each_printed_in_turn_is_still_refused():
    with pytest.raises(ParseError) as err:
        parse_nccl_tests_runs(CONCATENATED.read_text())
    assert "not 2 separate processes" in str(err.value) and "MPI=1" in str(err.value)


def test_the_runs_of_a_prefixed_file():
    text = _prefix_every(TWO.read_text(), STYLES["open-mpi"])
    runs = parse_nccl_tests_runs(text)
    assert [r.op for r in runs] == ["all_reduce", "all_gather"]
    assert all(r.line_prefixes is not None and r.line_prefixes.kinds == ("open-mpi",) for r in runs)


def test_ingest_prints_one_summary_per_run_and_writes_every_record(tmp_path):
    out = tmp_path / "r.jsonl"
    result = CliRunner().invoke(main, ["ingest", str(TWO), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"{TWO} (run 1 of 2): all_reduce, 8 ranks on 2 nodes" in result.stdout
    assert f"{TWO} (run 2 of 2): all_gather, 8 ranks on 2 nodes" in result.stdout
    ops = [json.loads(line)["op"] for line in out.read_text().splitlines()]
    assert ops.count("all_reduce") == 20 and ops.count("all_gather") == 20


def test_ingest_reads_a_srun_labelled_file_and_says_so():
    path = PUB / "all_reduce_perf-srun-label-2x8.txt"
    result = CliRunner().invoke(main, ["ingest", str(path)])
    assert result.exit_code == 0, result.output
    assert "all_reduce, 16 ranks on 2 nodes, 11 sizes, 22 records" in result.stdout
    assert "line prefixes stripped: Slurm srun -l task labels" in result.stderr


def test_analyze_loads_every_run_of_a_file():
    from collscope.analysis.load import load_results

    frame = load_results(TWO)
    assert sorted(frame["op"].value_counts().items()) == [("all_gather", 20), ("all_reduce", 20)]


# ---- rccl-tests ------------------------------------------------------------------------------------------------
def test_rccl_tests_versioned_header():
    run = parse_nccl_tests((PUB / "all_reduce_perf-rccl-tests-version-header-1x8-mi300x.txt").read_text())
    assert run.backend == "rccl" and {r.backend for r in run.records} == {"rccl"}
    assert run.nccl_tests_version == "2.17.9-develop:8a3c2f1"
    assert {r.engine_version for r in run.records} == {"2.17.9-develop:8a3c2f1"}
    assert run.nccl_version == "2.28.3" and run.nranks == 8


def test_rccl_tests_develop_version_line():
    run = parse_nccl_tests((PUB / "all_reduce_perf-rccl-tests-develop-version-line-2x8-g8.txt").read_text())
    assert run.backend == "rccl" and {r.backend for r in run.records} == {"rccl"}
    assert run.nccl_tests_version == "develop:1c9e2b7" and run.nccl_version == "2.27.7"
    assert (run.nranks, run.nnodes, run.process_shape) == (16, 2, "2x1x8")


def test_nccl_tests_output_stays_nccl():
    run = parse_nccl_tests(PLAIN.read_text())
    assert run.backend == "nccl" and {r.backend for r in run.records} == {"nccl"}


def test_rank_lines_tagged_by_the_process_that_printed_them():
    """Older nccl-tests printed each process's rank lines from that process: under --tag-output each rank line
    carries its own rank's tag, among rank 0's table and the other ranks' INFO lines."""
    path = PUB / "all_reduce_perf-ompi-tag-output-kubectl-mpijob-2x2.txt"
    lines = path.read_text().split("\n")
    retagged = [f"[1,{line.split('Rank', 1)[1].split()[0]}]<stdout>:{line.split(':', 1)[1]}"
                if "]<stdout>:#  Rank" in line else line for line in lines]
    assert sum("[1,3]<stdout>:#  Rank  3" in line for line in retagged) == 1
    run = parse_nccl_tests("\n".join(retagged))
    assert run.records == parse_nccl_tests("\n".join(lines)).records
    assert (run.nranks, run.nnodes, run.line_prefixes.labels if run.line_prefixes else None) == (4, 2, (0, 1, 2, 3))


def test_pdsh_on_several_hosts_is_one_run_per_host():
    """pdsh -w gpu-f[01-02] all_reduce_perf -g 8: each host ran its own single-node run, lines interleaved
    (before: refused as 'not 2 separate processes ... MPI=1', a launch fix that does not apply)."""
    path = PUB / "all_reduce_perf-pdsh-2-hosts-one-run-each-g8.txt"
    runs = parse_nccl_tests_runs(path.read_text(), source=path.name)
    assert [(r.hosts, r.nranks, r.nnodes, len(r.records), r.complete) for r in runs] == [
        (("gpu-f02",), 8, 1, 22, True), (("gpu-f01",), 8, 1, 22, True)]
    assert runs[0].warnings[0] == "the run of host gpu-f02 (pdsh/clush prefixes: one run per host)"
    assert {r.avg_busbw_gbps for r in runs} == {318.1709, 336.005}
    with pytest.raises(ParseError, match="separate processes"):  # one run per call: still not one run
        parse_nccl_tests(path.read_text())


def test_the_prefixes_feed_the_runs_geometry():
    path = PUB / "all_reduce_perf-srun-label-2x8.txt"
    run = parse_nccl_tests(path.read_text())
    assert run.geometry.nranks.value == 16
    says = "Slurm task labels up to 15 (srun -l): at least 16 tasks x nThread 1 x nGpus 1"
    assert says in run.geometry.nranks.evidence
    # rank lines removed: the labels' lower bound stands beside busbw/algbw
    table_only = "\n".join(line for line in path.read_text().split("\n") if "Rank " not in line)
    run = parse_nccl_tests(table_only)
    assert run.nranks == 16 and any("Slurm task labels" in e for e in run.geometry.nranks.evidence)


def test_labels_that_contradict_the_rank_list_are_an_error_naming_both():
    """Open MPI tags up to [1,7] (8 processes of one GPU each) beside a complete list of 4 rank lines."""
    text = (PUB / "all_reduce_perf-ompi-tag-output-kubectl-mpijob-2x2.txt").read_text()
    text += "[1,7]<stdout>:bench-mpi-worker-3:40:40 [1] NCCL INFO Bootstrap: Using eth0:10.4.4.2<0>\n"
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(text)
    assert "Open MPI output tags up to [*,7]: at least 8 processes" in str(err.value)
    assert "rank lines" in str(err.value)


def test_a_readme_excerpt_of_a_tagged_launcher_log():
    """As EKS/EFA sample READMEs show 'expected results': another rank's last INFO lines, the column header, one
    row and the Avg bus bandwidth line, all behind --tag-output tags (before: refused whole)."""
    path = PUB / "all_reduce_perf-ompi-tag-output-readme-excerpt-one-row.txt"
    run = parse_nccl_tests(path.read_text(), op="all_reduce")
    assert (run.nranks, len(run.records), run.avg_busbw_gbps) == (16, 2, 61.4021)
    assert run.geometry.nranks.evidence[0] == ("Open MPI output tags up to [*,10]: at least 11 processes "
                                               "(each at least one rank)")


def test_an_elision_after_the_nccl_log_does_not_cut_the_rank_list():
    """AWS's DLAMI EFA guide shape: the full rank list, NCCL INFO lines shortened with '...', a '----some output
    truncated----' line, the table, '...' before the summary. The rank list is whole: 8 ranks on 2 hosts (before: the
    first '...' read as a cut rank list, the node count left unknown)."""
    run = parse_nccl_tests((PUB / "all_reduce_perf-2x4-efa-log-elided-before-table.txt").read_text(), op="all_reduce")
    assert not run.ranks_elided and run.nranks == 8 and run.nnodes == 2
    assert run.nccl_version == "2.21.5" and len(run.records) == 2 * 28 and run.complete
    assert not any("rank list elided" in w for w in run.warnings)
    elided = [w for w in run.warnings if "output elided by the author" in w]
    assert len(elided) == 4 and any("some output" in w for w in elided)
    assert "cut" not in " ".join(run.geometry.nranks.evidence)


def test_an_elision_right_after_rank_lines_still_cuts_the_list():
    lines = (PUB / "all_reduce_perf-2x4-efa-log-elided-before-table.txt").read_text().split("\n")
    run = parse_nccl_tests("\n".join(lines[:8] + ["#  ..."] + lines[11:]), op="all_reduce")  # ranks 0-4, then "..."
    assert run.ranks_elided and run.nranks == 8


def test_the_op_is_read_from_the_concluded_line_when_the_top_was_cut():
    """A job log pasted from the rank lines on (an OKE GB300 Slurm log's shape): no '# nThread' header and no
    'Collective test starting' line; the run's last line, '# Collective test concluded: all_reduce_perf', names the
    collective (before: refused, 'pass op')."""
    text = (PUB / "all_reduce_perf-4x4-no-header-op-in-concluded-line.txt").read_text()
    run = parse_nccl_tests(text)
    assert run.op == "all_reduce" and "Collective test concluded: all_reduce_perf" in run.op_evidence
    assert run.nranks == 16 and run.nnodes == 4 and run.nccl_version == "2.29.3" and len(run.records) == 2 * 11
    table_only = "\n".join(line for line in text.split("\n") if "Rank" not in line)
    run = parse_nccl_tests(table_only)
    assert run.op == "all_reduce" and run.nranks == 16  # from busbw/algbw = 2 x 15/16
    with pytest.raises(ParseError, match="output of all_gather"):
        parse_nccl_tests(text, op="all_gather")


BARE = PUB / "sendrecv_perf-readme-excerpt-command-g8-no-header-first-size-slow.txt"


def test_a_binary_run_without_a_launcher_is_one_process_on_one_node():
    """A README excerpt (li-plus/playground cuda/nccl.md's shape): the command ``./build/sendrecv_perf ... -g 8``, no
    header, no rank lines, and sendrecv's busbw/algbw of 1 says nothing of the ranks. Before: 'pass --nranks'."""
    run = parse_nccl_tests(BARE.read_text())
    assert (run.op, run.nranks, run.nnodes, len(run.records)) == ("sendrecv", 8, 1, 8)
    says = ("the binary run without a launcher (./build/sendrecv_perf -b 128M -e 1G -f 2 -g 8): one process x "
            "nThread 1 x nGpus 8")
    assert says in run.geometry.nranks.evidence and says in run.geometry.nnodes.evidence


@pytest.mark.parametrize(("prefix", "nranks"), [
    ("$ NCCL_DEBUG=WARN ./build/sendrecv_perf -b 128M -e 1G -f 2 -g 4 -t 2\n", 8),  # a prompt, a variable, -t x -g
    ("Running: CUDA_VISIBLE_DEVICES=0,1 sendrecv_perf_mpi -g 2\n", 2),
    ("mpirun -np 16 ./build/sendrecv_perf -b 128M -e 1G -f 2 -g 1\n./build/sendrecv_perf -g 8\n", 16),  # launcher wins
    ("./build/sendrecv_perf -g 8\n./build/sendrecv_perf -g 4\n", None),  # two bare commands that disagree: no clue
    ("# Collective test starting: sendrecv_perf\n", None),  # nccl-tests' own line names the binary, not a launch
])
def test_what_a_bare_command_line_says(prefix: str, nranks: int | None):
    body = "\n".join(line for line in BARE.read_text().split("\n") if "_perf" not in line)
    if nranks is None:
        with pytest.raises(ParseError, match="number of ranks"):
            parse_nccl_tests(prefix + body)
        return
    run = parse_nccl_tests(prefix + body)
    assert run.nranks == nranks


# ---- rows cut by NCCL's log lines -----------------------------------------------------------------------------
# nccl-tests prints a row's size..root, runs the test, then its times; NCCL >= 2.22 connects an algorithm's peers at
# its first use, so with NCCL_DEBUG=INFO those log lines land inside the row (a 2-node H100 log of an HPC centre's
# public benchmark repository, NCCL 2.22.3, shows it at 2 MiB). Fixtures: own hosts and numbers.
CUT = PUB / "all_reduce_perf-v2.22-2x2-row-cut-by-lazy-connect-info.txt"
CUT_STAMPED = PUB / "all_gather_perf-v2.23-2x1-row-cut-timestamped-info-digit-hosts.txt"


def _busbw(run, size, in_place=False):
    return next(r.busbw_gbps for r in run.records if r.size_bytes == size and r.in_place == in_place)


def test_a_row_cut_by_lazy_connection_log_lines_reads_as_one_row():
    run = parse_nccl_tests(CUT.read_text(), source=CUT.name)
    assert (run.op, run.nranks, run.nnodes, len(run.records)) == ("all_reduce", 4, 2, 10)
    assert (_busbw(run, 2 << 20), _busbw(run, 2 << 20, in_place=True)) == (37.72, 37.92)
    assert "line 21: a data row cut by NCCL's log lines" in " ".join(run.warnings)
    assert "rest on line 27" in " ".join(run.warnings)


def test_a_cut_between_the_placements_after_a_timestamped_log_line_of_a_host_named_by_digits():
    # Azure ML host names start with digits: the row ends where the host of the glued line's process and thread
    # starts, read from a whole log line of that thread, not guessed from the glued text.
    run = parse_nccl_tests(CUT_STAMPED.read_text(), source=CUT_STAMPED.name)
    assert (run.op, run.nranks, run.nnodes, len(run.records)) == ("all_gather", 2, 2, 8)
    assert (_busbw(run, 8 << 20), _busbw(run, 8 << 20, in_place=True)) == (20.40, 20.48)


def _cut_text(tail: str) -> str:
    lines = CUT.read_text().split("\n")
    rest = next(i for i, line in enumerate(lines) if line.startswith("    83.40"))
    lines[rest] = tail
    return "\n".join(lines)


def test_a_cut_row_whose_rest_has_other_fields_is_an_error_naming_the_cut_line():
    with pytest.raises(ParseError) as e:
        parse_nccl_tests(_cut_text("    83.40   25.15   37.72       0"), source="cut.txt")
    assert e.value.line == 21 and "8 missing fields on one line" in str(e.value) and "4 on line 27" in str(e.value)


def test_a_cut_row_whose_rest_never_comes_keeps_the_other_rows_and_says_so():
    text = CUT.read_text()
    hung = text[:text.index("    83.40")]  # the job stopped while NCCL was connecting
    run = parse_nccl_tests(hung, source="hung.txt")
    assert [r.size_bytes for r in run.records] == [1 << 20, 1 << 20]
    assert any(w.startswith("line 21: a data row cut by NCCL's log lines whose times never follow") for w in
               run.warnings)


def test_a_cut_row_of_a_thread_no_whole_log_line_names_is_an_error():
    text = CUT.read_text().replace("-1node-b1:52011:52090", "-1node-b1:52011:99999")
    with pytest.raises(ParseError) as e:
        parse_nccl_tests(text, source="cut.txt")
    assert e.value.line == 21 and "no whole log line of the same process and thread names" in str(e.value)


def test_ingest_reads_the_real_shape_of_a_cut_row(tmp_path):
    out = tmp_path / "cut.jsonl"
    res = CliRunner().invoke(main, ["ingest", str(CUT), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "reads as one row with its rest on line 27" in res.output
    sizes = [json.loads(line)["size_bytes"] for line in out.read_text().splitlines()]
    assert sizes.count(2 << 20) == 2 and len(sizes) == 10


# ---- a DGX Spark pair (nccl-tests >= 2.20, one GB10 per host) --------------------------------------------------
SPARK = PUB / "all_gather_perf-v2.20-dgx-spark-2x1-gb10-hash-in-version.txt"
"""Written for collscope in the shape two-Spark runs are published in (NVIDIA/dgx-spark-playbooks PR 103 and issue
25): the version line carries nccl-tests' git hash in parentheses, the header ends in ``unalign: 0``, and each
host's one rank line names an ``NVIDIA GB10``."""


def test_a_dgx_spark_pair_reads_as_two_ranks_on_two_hosts_of_one_gb10_each():
    run = parse_nccl_tests(SPARK.read_text(), source=SPARK.name)
    assert (run.op, run.nranks, run.nnodes, len(run.records)) == ("all_gather", 2, 2, 14)
    assert run.nccl_version == "2.31.2" and run.header.unalign == 0 and not run.warnings
    assert {d.name for d in run.devices} == {"NVIDIA GB10"} and {d.host for d in run.devices} == {"spark-n01",
                                                                                                    "spark-n02"}


def test_analyze_of_a_dgx_spark_pair_asks_for_its_nics_then_models_them():
    refused = CliRunner().invoke(main, ["analyze", str(SPARK)])
    assert refused.exit_code == 0 and "unknown GPU" not in refused.output
    assert "no efficiency" in refused.output and "--nics-per-node 2" in refused.output  # the Spark fact, in full
    result = CliRunner().invoke(main, ["analyze", str(SPARK), "--nic-gbit", "100", "--nics-per-node", "2", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    rows = [e for e in doc["sizes"] if e["size_bytes"] == 4 << 30]
    assert len(rows) == 2 and all(e["verdict"] == "normal" for e in rows)  # 21.5-21.8 GB/s against two endpoints
    assert all(23.0 <= e["model_busbw_gbps"] <= 25.0 for e in rows)
    assert any("NCCL_IB_HCA" in n for n in doc["notes"])


# ---- an NVL72 rack whose driver names no product ("NVIDIA Graphics Device") -------------------------------------
PLACEHOLDER = PUB / "all_reduce_perf-nvl72-72r-graphics-device-placeholder-last-rank-only.txt"
"""Written for collscope in the shape of CoreWeave's published GB200 NVL72 run (coreweave/nccl-tests pull request
43): no version line, only the last rank's line (``Rank 71``), a bus id printed ``[0x01]``, and the device named
``NVIDIA Graphics Device``, the driver's placeholder for a GPU it has no product name for."""


def test_a_placeholder_gpu_name_is_said_to_be_one_and_gpu_supplies_the_model():
    run = parse_nccl_tests(PLACEHOLDER.read_text(), source=PLACEHOLDER.name)
    assert (run.op, run.nranks, len(run.records)) == ("all_reduce", 72, 10)
    assert {d.name for d in run.devices} == {"NVIDIA Graphics Device"}
    geometry = ["--nnodes", "18", "--nvl-domain", "72"]
    refused = CliRunner().invoke(main, ["analyze", str(PLACEHOLDER), *geometry])
    assert refused.exit_code == 0, refused.output
    assert "is the placeholder a driver prints" in refused.output and "unknown GPU" not in refused.output
    result = CliRunner().invoke(main, ["analyze", str(PLACEHOLDER), *geometry, "--gpu", "GB200", "--json"])
    assert result.exit_code == 0, result.output
    rows = [e for e in json.loads(result.output)["sizes"] if e["size_bytes"] == 8 << 30]
    assert len(rows) == 2 and all(e["verdict"] == "normal" for e in rows)  # 834-842 GB/s on one NVL72 rack
