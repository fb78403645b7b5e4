"""COLLSCOPE_IBNETDISCOVER=1 asks slurm/collect-topo.sh for the fabric capture: a missing ibnetdiscover is an error
before anything is captured (it was skipped without a word), a failing one an error after the node captures; a
working one writes DIR/ibnetdiscover.txt (issue 26 item 7). Run outside an allocation, as
tests/topo/test_cli_topo.py runs the script, with fake tools answering in the real tools' formats."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fakes import FIXTURES, Answer, FakeTools, write_executable
from tests.topo.test_cli_topo import _fake_node

SCRIPT = Path(__file__).resolve().parents[2] / "slurm" / "collect-topo.sh"


def _run(tmp_path: Path, fake_tools: FakeTools) -> tuple[subprocess.CompletedProcess[str], Path]:
    _fake_node(fake_tools)
    collscope_cmd = write_executable(tmp_path / "collscope", f'#!/bin/sh\nexec "{sys.executable}" -m collscope "$@"\n')
    env = {k: v for k, v in fake_tools.env().items() if not k.startswith("SLURM_")}
    env.update(COLLSCOPE=str(collscope_cmd), COLLSCOPE_IBNETDISCOVER="1",
               PATH=f"{fake_tools.bin_dir}:/usr/bin:/bin")
    out = tmp_path / "topo"
    return subprocess.run(["bash", str(SCRIPT), str(out)], env=env, capture_output=True, text=True, timeout=120), out


def test_missing_ibnetdiscover_is_an_error_before_any_capture(tmp_path: Path, fake_tools: FakeTools) -> None:
    proc, out = _run(tmp_path, fake_tools)
    assert proc.returncode == 2, proc.stderr
    assert "COLLSCOPE_IBNETDISCOVER=1 asks for ibnetdiscover, but it is not on PATH" in proc.stderr, proc.stderr
    assert "install infiniband-diags" in proc.stderr and not out.exists()


def test_a_failing_ibnetdiscover_is_an_error_after_the_node_captures(tmp_path: Path, fake_tools: FakeTools) -> None:
    fake_tools.add("ibnetdiscover", Answer(stderr="ibwarn: [1234] mad_rpc_open_port: can't open UMAD port ((null):0)\n",
                                           exit_code=255))
    proc, out = _run(tmp_path, fake_tools)
    assert proc.returncode == 1, proc.stderr
    assert "ibnetdiscover failed (COLLSCOPE_IBNETDISCOVER=1)" in proc.stderr, proc.stderr
    assert not (out / "ibnetdiscover.txt").exists() and any(p.is_dir() for p in out.iterdir())


def test_a_working_ibnetdiscover_is_saved(tmp_path: Path, fake_tools: FakeTools) -> None:
    fabric = sorted((FIXTURES / "infiniband").glob("ibnetdiscover*"))[0]
    fake_tools.add("ibnetdiscover", Answer(stdout=fabric))
    proc, out = _run(tmp_path, fake_tools)
    assert proc.returncode == 0, proc.stderr
    assert (out / "ibnetdiscover.txt").read_text() == fabric.read_text()
