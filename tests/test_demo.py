"""`collscope demo` end to end, as the README's first command runs it (real mpirun sweep on persistent workers,
real report), and its ``--workers`` choice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import collscope.demo
from collscope.cli import main
from collscope.results.store import ResultsDir

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_sweep_lines() -> list[str]:
    """The ``[2/4] sweep`` lines of the README's demo sample (what the demo printed, trimmed)."""
    sample = re.search(r"What `collscope demo` printed.*?\n```\n(.*?)\n```", README.read_text(), re.S)
    assert sample, "README.md has no demo output sample"
    return [line for line in sample.group(1).splitlines() if line.startswith("[2/4] sweep ")]


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
    # the Open MPI points ran on persistent workers (one mpirun, the algorithms switched in-process)
    logs = sorted((out / "sweep-mpi" / "points").glob("*.log"))
    assert len(logs) == 9 and all("# persistent worker job" in p.read_text() for p in logs), logs
    # the README's sample says what the demo prints about its sweeps
    printed = [line.replace(str(out), "demo") for line in text.splitlines() if line.startswith("[2/4] sweep ")]
    shown = _readme_sweep_lines()
    assert shown and set(shown) <= set(printed), (shown, printed)
    page = (out / "report" / "index.html").read_text()
    assert page.count("data:image/png;base64,") >= 3 and "Recommendation" in page
    assert (out / "recommendation.env").read_text().startswith("# collscope recommend")
    topo = json.loads((out / "topology" / "topology.json").read_text())
    assert len(topo["gpus"]) == 8 or topo["sample"] is None


def test_demo_workers_default_persistent_and_per_point_reachable(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """The command passes --workers to the library (default persistent); a bad choice is exit 2 naming both."""
    seen: list[str] = []

    def fake_run_demo(out_dir: Path, *, echo: object, workers: str) -> collscope.demo.DemoResult:
        seen.append(workers)
        return collscope.demo.DemoResult(out_dir=Path(out_dir), topology_source="sample x", seconds=1.0)

    monkeypatch.setattr(collscope.demo, "run_demo", fake_run_demo)
    runner = CliRunner()
    for args in ([], ["--workers", "per-point"], ["--workers", "persistent"]):
        result = runner.invoke(main, ["demo", "--out", str(tmp_path / "d"), *args])
        assert result.exit_code == 0, result.output
    assert seen == ["persistent", "per-point", "persistent"]
    bad = runner.invoke(main, ["demo", "--workers", "pooled"])
    assert bad.exit_code == 2 and "persistent" in bad.output and "per-point" in bad.output, bad.output
