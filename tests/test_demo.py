"""`collscope demo` end to end, as the README's first command runs it (real mpirun sweep, real report)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collscope.results.store import ResultsDir


def test_demo_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("mpi4py", reason="the demo's sweep needs Open MPI: pip install 'collscope[mpi]'")
    if not (Path(sys.executable).parent / "mpirun").exists():
        pytest.skip("the demo's sweep needs Open MPI's mpirun beside this python: pip install 'collscope[mpi]'")
    out = tmp_path / "demo out"
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = "/usr/bin:/bin"  # nothing configured: mpirun must be found beside the venv's python
    run = subprocess.run([sys.executable, "-m", "collscope", "demo", "--out", str(out)], env=env,
                         capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    text = run.stdout
    if not any(Path(p, "nvidia-smi").exists() for p in env["PATH"].split(":")):
        assert "bundled SAMPLE 'hgx-h100-8gpu'" in text and "NOT this machine" in text
    assert f"open {out / 'report' / 'index.html'}" in text
    status = ResultsDir(out / "sweep-mpi").status()
    assert status.points == status.done == 9 and status.failed == 0
    page = (out / "report" / "index.html").read_text()
    assert page.count("data:image/png;base64,") >= 3 and "Recommendation" in page
    assert (out / "recommendation.env").read_text().startswith("# collscope recommend")
    topo = json.loads((out / "topology" / "topology.json").read_text())
    assert len(topo["gpus"]) == 8 or topo["sample"] is None
