"""The fake tools of tests/fakes.py answer like the real ones: recorded output, exit codes, unknown options."""

from __future__ import annotations

import json
import shutil
import subprocess

from collscope.topo.samples import sample_path
from tests.fakes import NCCL_TESTS_FIXTURES, Answer, FakeTools


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False, env=env)


def test_node_fakes_are_on_path_and_answer_per_subcommand(fake_tools: FakeTools):
    fake_tools.node(sample_path())
    assert shutil.which("nvidia-smi") == str(fake_tools.bin_dir / "nvidia-smi")
    topo = _run("nvidia-smi", "topo", "-m")
    assert topo.returncode == 0 and topo.stdout == (sample_path() / "nvidia-smi-topo.txt").read_text()
    query = _run("nvidia-smi", "--query-gpu=index,name", "--format=csv")
    assert query.stdout == (sample_path() / "nvidia-smi-query-gpu.csv").read_text()
    assert _run("ibstat").stdout == (sample_path() / "ibstat.txt").read_text()
    assert _run("ibdev2netdev", "-v").stdout == (sample_path() / "ibdev2netdev.txt").read_text()
    unknown = _run("nvidia-smi", "--bogus")
    assert unknown.returncode == 9 and "unexpected arguments: --bogus" in unknown.stderr


def test_failures_records_and_nccl_env_echo(tmp_path, fake_tools: FakeTools):
    fake_tools.ibdev2netdev(Answer(stderr="ibdev2netdev: failed to read sysfs\n", exit_code=1))
    failed = _run("ibdev2netdev", "-v")
    assert (failed.returncode, failed.stdout, failed.stderr) == (1, "", "ibdev2netdev: failed to read sysfs\n")
    record = tmp_path / "argv.json"
    fake_tools.nccl_tests("all_reduce", NCCL_TESTS_FIXTURES / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt",
                          record_to=record, echo_env=("NCCL_ALGO", "NCCL_PROTO"))
    out = _run("all_reduce_perf", "-b", "8 bytes; quoted'", env={**fake_tools.env(), "NCCL_ALGO": "Tree"})
    lines = out.stdout.splitlines()
    echo = next(i for i, line in enumerate(lines) if "NCCL_ALGO set by environment to Tree" in line)
    assert all(line.startswith("#") for line in lines[:echo]) and not lines[echo].startswith("#")
    assert "NCCL_PROTO" not in out.stdout  # not set, so NCCL would not echo it
    assert json.loads(record.read_text())["argv"] == ["-b", "8 bytes; quoted'"]
