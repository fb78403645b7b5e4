"""nccl-tests runs with ``-R 2`` (buffers registered as symmetric windows): from NCCL 2.27 NCCL may run its
symmetric-memory kernels for all_reduce, all_gather and reduce_scatter inside one fully NVLink-connected domain
(``src/sym_kernels.cc``), which collscope's model of NCCL's choice does not describe; the run says so, and the
note reaches analyze.

Fixture (ours, in nccl-tests v2.19.6's text shape): ``all_reduce_perf-v2.19.6-g8-h100-R2-symmetric-windows.txt``,
8 H100 of one node, ``-g 8 -R 2`` on NCCL 2.28.7, its command line printed above the header."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collscope.collectives.nccl_tests.launch import registration_from_argv, symmetric_kernel_note
from collscope.collectives.nccl_tests.parse import parse_nccl_tests

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
SYMMETRIC = FIX / "all_reduce_perf-v2.19.6-g8-h100-R2-symmetric-windows.txt"
JSON_OUT = FIX / "all_reduce_perf-v2.19.6-J-output.json"


@pytest.mark.parametrize(("argv", "value"), [
    (["./build/all_reduce_perf", "-b", "1M", "-R", "2"], 2), (["all_gather_perf_mpi", "-R2"], 2),
    (["srun", "-n", "8", "all_reduce_perf", "--local_register=1"], 1), (["all_reduce_perf", "-b", "8"], 0),
    (["mpirun", "-R", "2", "hostname"], None),  # no nccl-tests binary: unknown
    (["all_reduce_perf", "-R", "two"], None),
])
def test_registration_from_the_command_line(argv, value):
    assert registration_from_argv(argv) == value


@pytest.mark.parametrize(("op", "registration", "release", "backend", "said"), [
    ("all_reduce", 2, "2.28.7", "nccl", True), ("reduce_scatter", 2, None, "nccl", True),
    ("all_gather", 2, "2.27.3+cuda12.9", "nccl", True),
    ("all_reduce", 2, "2.26.6", "nccl", False),  # nccl-tests falls back to local registration before 2.27
    ("all_reduce", 1, "2.28.7", "nccl", False), ("alltoall", 2, "2.28.7", "nccl", False),
    ("all_reduce", 2, "2.28.7", "rccl", False),
])
def test_the_symmetric_kernel_note_is_for_the_ops_and_releases_that_have_them(op, registration, release, backend,
                                                                               said):
    assert (symmetric_kernel_note(op, registration, release, backend) is not None) is said


def test_a_run_with_R_2_says_its_figures_may_be_symmetric_kernels():
    run = parse_nccl_tests(SYMMETRIC.read_text(), source=str(SYMMETRIC))
    assert run.nccl_version == "2.28.7" and len(run.records) == 8
    assert [w for w in run.warnings if "symmetric" in w] == [symmetric_kernel_note("all_reduce", 2, "2.28.7", "nccl")]
    plain = SYMMETRIC.read_text().replace(" -R 2", "")
    assert not any("symmetric" in w for w in parse_nccl_tests(plain).warnings)
    doc = json.loads(JSON_OUT.read_text())
    assert not any("symmetric" in w for w in parse_nccl_tests(json.dumps(doc)).warnings)
    doc["args"] = [*doc["args"], "-R", "2"]  # the -J file's own argv
    assert any(w.startswith("buffers registered as symmetric windows (-R 2)")
               for w in parse_nccl_tests(json.dumps(doc)).warnings)


def test_analyze_carries_the_note():
    from collscope.analysis import analyze
    from collscope.analysis.load import load_results

    notes = analyze(load_results([SYMMETRIC])).notes
    assert any(n.startswith(f"{SYMMETRIC}: buffers registered as symmetric windows (-R 2)") for n in notes)
