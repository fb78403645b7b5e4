"""nccl-tests text output carries the NCCL variables its run had (collscope.collectives.nccl_tests.run_settings), so
that analyze judges a run that forced NCCL_ALGO against that algorithm, as it does a -J file's env.

Fixtures (our own numbers, in the shapes published): ``published/all_reduce_perf-mpirun-x-nccl-algo-tree-2x1-x-
without-value.txt`` (a prompt, Open MPI's ``-x NAME=VALUE`` with doubled spaces and ``-x NAME`` without a value,
as NVIDIA/nccl-tests#232 posts it) and ``published/all_reduce_perf-env-assignment-before-binary-g8-pcie.txt``
(``NCCL_ALGO=TREE ./all_reduce_perf -g 8``, upper-case value, as NVIDIA/nccl#1530 posts it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.collectives.nccl_tests import parse_nccl_tests
from collscope.collectives.nccl_tests.run_settings import run_settings

PUBLISHED = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests" / "published"
MPIRUN_X = PUBLISHED / "all_reduce_perf-mpirun-x-nccl-algo-tree-2x1-x-without-value.txt"
ASSIGNED = PUBLISHED / "all_reduce_perf-env-assignment-before-binary-g8-pcie.txt"


def _lines(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.splitlines(), start=1))


def test_mpirun_x_values_are_read_and_a_bare_x_is_said() -> None:
    run = parse_nccl_tests(MPIRUN_X.read_text(), MPIRUN_X.name)
    assert all(dict(r.settings) == {"NCCL_ALGO": "Tree", "NCCL_DEBUG": "WARN", "NCCL_IB_QPS_PER_CONNECTION": "4"}
               for r in run.records)
    assert any(w.startswith("NCCL settings of the run, from its output: NCCL_ALGO=Tree (line 1, the launch "
                            "command's -x)") for w in run.warnings)
    assert ("NCCL_SOCKET_IFNAME: line 1 passes it with -x and no value (the launcher's own, which the output does "
            "not show): not read") in run.warnings
    assert not any("LD_LIBRARY_PATH" in w for w in run.warnings)  # not NCCL's


def test_assignments_before_the_binary_set_the_configuration_analyze_judges() -> None:
    run = parse_nccl_tests(ASSIGNED.read_text(), ASSIGNED.name)
    assert dict(run.records[0].settings) == {"NCCL_ALGO": "TREE", "NCCL_PROTO": "Simple"}
    result = CliRunner().invoke(main, ["analyze", str(ASSIGNED), "--json"])
    assert result.exit_code == 0, result.output
    sizes = json.loads(result.output)["sizes"]
    assert sizes and {(s["config"], s["model"], s["algo_source"]) for s in sizes} == {
        ("NCCL_ALGO=TREE;NCCL_PROTO=Simple", "Tree/Simple", "forced (NCCL_ALGO=TREE, NCCL_PROTO=Simple)")}


@pytest.mark.parametrize(("text", "settings"), [
    ("mpirun -np 16 -genv NCCL_ALGO Ring -genv NCCL_PROTO=LL128 ./build/all_reduce_perf -b 8 -e 1G",
     {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128"}),
    ("srun -N 2 --ntasks-per-node 8 --export=ALL,NCCL_ALGO=NVLS,NCCL_NVLS_ENABLE=1 ./all_reduce_perf -g 1",
     {"NCCL_ALGO": "NVLS", "NCCL_NVLS_ENABLE": "1"}),
    ("$ env NCCL_MAX_NCHANNELS=4 NCCL_DEBUG=INFO mpirun -np 8 ./all_gather_perf -b 1M", {"NCCL_MAX_NCHANNELS": "4",
                                                                                       "NCCL_DEBUG": "INFO"}),
    ("export NCCL_MIN_NCHANNELS=32\nmpirun -np 8 \\\n  -x NCCL_PROTO=Simple \\\n  ./all_reduce_perf -b 8",
     {"NCCL_MIN_NCHANNELS": "32", "NCCL_PROTO": "Simple"}),
    ("mpirun -np 2 -x 'NCCL_IB_HCA==mlx5_0:1' ./sendrecv_perf -b 8", {"NCCL_IB_HCA": "=mlx5_0:1"}),
    ("+ NCCL_ALGO=Ring srun -N 2 ./build/all_reduce_perf -b 8", {"NCCL_ALGO": "Ring"}),
    ("root@node01:~# NCCL_PROTO=LL ./build/all_reduce_perf -g 8", {"NCCL_PROTO": "LL"}),
], ids=["hydra-genv", "srun-export", "env-before-launcher", "export-and-continued-command", "quoted", "set-x-trace",
        "root-prompt"])
def test_the_launch_shapes_published_outputs_show(text: str, settings: dict[str, str]) -> None:
    assert run_settings(_lines(text))[0] == settings


def test_nccls_own_lines_win_over_the_command_and_the_difference_is_said() -> None:
    text = ("mpirun -np 8 -x NCCL_PROTO=Simple -x NCCL_ALGO=$ALGO ./all_reduce_perf -b 8\n"
            "node01:2001:2001 [0] NCCL INFO NCCL_PROTO set by environment to LL128\n"
            "node01:2001:2001 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 2.\n")
    settings, notes = run_settings(_lines(text))
    assert settings == {"NCCL_PROTO": "LL128", "NCCL_MAX_NCHANNELS": "2"}
    assert ("NCCL_PROTO: the command on line 1 sets 'Simple', NCCL's line 2 says it read 'LL128': 'LL128' kept"
            in notes)
    assert any(n.startswith("NCCL_ALGO: line 1 sets it from a shell expression ($ALGO)") for n in notes)


def test_words_after_the_binary_are_its_arguments_and_other_variables_are_not_read() -> None:
    assert run_settings(_lines("OMP_NUM_THREADS=4 ./all_reduce_perf -b 8 -e 1G NCCL_ALGO=Ring"))[0] == {}
    assert run_settings(_lines("# nThread 1 nGpus 8 minBytes 8 maxBytes 1073741824"))[0] == {}


def test_a_secrets_value_is_never_kept() -> None:
    settings, notes = run_settings(_lines("mpirun -np 2 -x NCCL_PLUGIN_TOKEN=s3cr3t ./all_reduce_perf -b 8"))
    assert settings == {"NCCL_PLUGIN_TOKEN": "REDACTED"} and "s3cr3t" not in " ".join(notes)
