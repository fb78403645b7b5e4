"""``collscope canary``'s command line: help, bad input (exit 2, one line), a dry run's commands in ABBA order,
``--from-results`` and ``canary report`` (when the modules they call are there). No measurement runs here."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli.canary import canary

VENV_BIN = Path(sys.executable).parent


def _invoke(args: list[str]):
    return CliRunner().invoke(canary, args)


def test_help_has_examples_and_the_report_command():
    result = _invoke(["--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output and "collscope canary --b-env" in result.output
    assert "report" in result.output and "--from-results" in result.output
    report = _invoke(["report", "--help"])
    assert report.exit_code == 0 and "collscope canary report" in report.output


@pytest.mark.parametrize("args, words", [
    (["--b-env", "NCCL_ALGOO=Ring", "--blocks", "2", "--out", "{out}"], "did you mean NCCL_ALGO"),
    (["--b-env", "NOEQUALS", "--blocks", "2", "--out", "{out}"], "expected NAME=VALUE"),
    (["--budget", "ten minutes", "--out", "{out}"], "duration 'ten minutes' is invalid"),
    (["--budget", "1m", "--blocks", "3", "--out", "{out}"], "either --budget or --blocks"),
    (["--b-cmd-prefix", "env 'X=1", "--blocks", "2", "--out", "{out}"], "--b-cmd-prefix"),
    (["--blocks", "2", "--max-loss", "2", "--out", "{out}"], "--max-loss"),
])
def test_bad_input_exits_2_with_one_line_and_runs_nothing(tmp_path, args, words):
    out = tmp_path / "out"
    result = _invoke([a.replace("{out}", str(out)) for a in args])
    assert result.exit_code == 2, result.output
    assert words in result.output
    assert "Traceback" not in result.output
    assert not (out / "points").exists()


def test_out_is_needed_to_run():
    result = _invoke(["--blocks", "2"])
    assert result.exit_code == 2 and "--out" in result.output


def test_a_dry_run_prints_both_sides_in_abba_order(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    out = tmp_path / "dry"
    result = _invoke(["--launcher", "mpirun", "--oversubscribe", "--b-env", "OMPI_MCA_btl=self,tcp",
                      "--b-lib", "/opt/new lib", "--b-cmd-prefix", "numactl -N 0", "--blocks", "2",
                      "--min-bytes", "64K", "--max-bytes", "128K", "--dry-run", "--out", str(out)])
    assert result.exit_code == 0, result.output
    points = [line.split()[2] for line in result.output.splitlines() if line.startswith("# point ")]
    assert [p.split("-")[2] for p in points] == ["a", "b", "b", "a"]
    commands = [line for line in result.output.splitlines() if line.startswith("env ")]
    assert len(commands) == 4
    b_words = shlex.split(commands[1])
    assert "OMPI_MCA_btl=self,tcp" in b_words and "COLLSCOPE_CANARY_SIDE=B" in b_words
    assert any(w.startswith("LD_LIBRARY_PATH=/opt/new lib") for w in b_words)
    assert any(w.endswith("canary-exec") for w in b_words)  # the prefix wraps the program, never a shell
    a_words = shlex.split(commands[0])
    assert "COLLSCOPE_CANARY_SIDE=A" in a_words and not any(w.startswith("OMPI_MCA_btl=") for w in a_words)
    assert not out.exists()  # a dry run writes nothing


def _nccl_tests_table(busbw: float) -> str:
    """An all_reduce_perf table in the shape nccl-tests 2.x prints (written here, not copied)."""
    rows = []
    for size in (65536, 131072, 262144, 524288, 1048576):
        time_us = size / (busbw * 1e3)
        rows.append(f"{size:>12} {size // 4:>12}     float     sum      -1  {time_us:8.2f}  {size / time_us / 1e3:6.2f}"
                    f"  {busbw:6.2f}      0  {time_us:8.2f}  {size / time_us / 1e3:6.2f}  {busbw:6.2f}      0")
    return ("# Collective test starting: all_reduce_perf\n"
            "# nThread 1 nGpus 1 minBytes 65536 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 "
            "agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
            "#  Rank  0 Group  0 Pid   1001 on     node01 device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
            "#  Rank  1 Group  0 Pid   1002 on     node01 device  1 [0x2c] NVIDIA H100 80GB HBM3\n#\n"
            "#                                                              out-of-place                       "
            "in-place\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
            "busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
            "(GB/s)\n" + "\n".join(rows) + "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : "
            f"{busbw:.2f}\n#\n")


def test_from_results_judges_existing_tables_and_says_they_were_not_interleaved(tmp_path):
    before, after = tmp_path / "before.txt", tmp_path / "after.txt"
    before.write_text(_nccl_tests_table(40.0))
    after.write_text(_nccl_tests_table(20.0))
    result = _invoke(["--from-results", str(before), str(after), "--from-results", str(before), str(after),
                      "--json"])
    assert result.exit_code in (1, 3), result.output
    assert "not interleaved" in result.output
    doc = json.loads(result.output[result.output.index("{"):])
    assert doc["interleaved"] is False
    # DESIGN.md's canary --json keys
    assert {"verdict", "workload_change", "ranges", "aa_noise", "blocks", "tuner_rules", "needed_blocks"} <= set(doc)
    assert doc["verdict"] in ("no-go", "inconclusive") and doc["exit_code"] == result.exit_code
    assert len(doc["workload_change"]["ci"]) == 2 and doc["workload_change"]["estimate"] > 0  # B is slower
    assert doc["ranges"] and all({"op", "min_bytes", "max_bytes", "change", "ci", "a_choice", "b_choice"} <= set(r)
                                 for r in doc["ranges"])


def test_a_workload_dry_run_measures_its_sizes_exactly(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    workload = tmp_path / "job.csv"
    workload.write_text("op,size_bytes,calls,nranks\nall_reduce,3000000,4,2\nall_reduce,65536,10,2\n")
    result = _invoke(["--launcher", "mpirun", "--workload", str(workload), "--blocks", "2", "--dry-run",
                      "--out", str(tmp_path / "dry")])
    assert result.exit_code == 0, result.output
    commands = [shlex.split(line) for line in result.output.splitlines() if line.startswith("env ")]
    assert len(commands) == 4
    assert all(words[words.index("--sizes") + 1] == "65536,3000000" for words in commands)


def test_another_canary_in_the_same_directory_is_refused(tmp_path):
    from collscope.canary.layout import CanaryMeta, write_canary
    from collscope.canary.plan import parse_side

    out = tmp_path / "taken"
    out.mkdir()
    write_canary(out, CanaryMeta(sweep_id="canary-0000000000", a=parse_side("A"), b=parse_side("B"),
                                 blocks_planned=2, max_blocks=30, budget_s=None, block_s=None, max_loss=0.01,
                                 workload=None))
    result = _invoke(["--b-env", "OMPI_MCA_btl=self,tcp", "--blocks", "2", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "holds canary 'canary-0000000000'" in result.output
    assert not (out / "points").exists()
