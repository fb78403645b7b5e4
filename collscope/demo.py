"""``collscope demo``: the main job end to end on this machine with nothing configured.

1. topology: this node through nvidia-smi and the InfiniBand tools, or, without them, the bundled sample
   (labelled as a sample everywhere it appears);
2. a real sweep on the local CPU: Open MPI's allreduce algorithms through mpirun (the CPU twin of an NCCL
   algorithm sweep), and torch.distributed with gloo when torch is installed; by default on persistent workers
   (one mpirun for every point whose launch settings match, the algorithms switched in-process, as
   ``sweep run --workers persistent``), ``workers="per-point"`` for one launch per point;
3. analysis, recommendation and a report with figures.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from collscope.errors import CollscopeError, ConfigError
from collscope.units import format_size

if TYPE_CHECKING:
    from collscope.sweeps.run_options import Workers

__all__ = ["DemoResult", "run_demo"]


@dataclass
class DemoResult:
    out_dir: Path
    topology_source: str
    """``"live"`` or ``"sample <name>"``."""
    sweeps: list[Path] = field(default_factory=list)
    report: Path | None = None
    recommendation: str = ""
    seconds: float = 0.0


_WORKERS_TEXT = {"persistent": "persistent workers", "per-point": "one launch per point"}


def _topology(out: Path, echo: Callable[[str], None]) -> tuple[str, Path]:
    from collscope.topo.capture import collect_to_dir
    from collscope.topo.detect import load_captures
    from collscope.topo.draw import draw_png
    from collscope.topo.node import build_node
    from collscope.topo.render import node_summary_text, node_to_json
    from collscope.topo.samples import DEFAULT_SAMPLE, sample_path

    capture_dir = out / "topology" / "captures"
    sample: str | None = None
    if shutil.which("nvidia-smi"):
        collect_to_dir(capture_dir)
    else:
        sample = DEFAULT_SAMPLE
        shutil.copytree(sample_path(sample), capture_dir, dirs_exist_ok=True)
        echo(f"[1/4] topology: nvidia-smi not found on this machine, so this uses the bundled SAMPLE {sample!r} "
             "(an 8x H100 node written in the real tools' formats; NOT this machine)")
    node = build_node(load_captures([capture_dir]), sample=sample)
    draw_png(node, out / "topology" / "topology.png")
    (out / "topology" / "topology.json").write_text(json.dumps(node_to_json(node), indent=2, default=str))
    if sample is None:
        echo("[1/4] topology: this node, captured live")
    echo("\n".join("      " + line for line in node_summary_text(node).splitlines()[:6]))
    return ("live" if sample is None else f"sample {sample}"), capture_dir


def _sweeps(out: Path, echo: Callable[[str], None], workers: Workers) -> list[Path]:
    from collscope.sweeps.environment import launch_options
    from collscope.sweeps.meta import sweep_meta
    from collscope.sweeps.persistent import plan_groups
    from collscope.sweeps.plan import plan_sweep, preset
    from collscope.sweeps.runner import RunOptions, run_sweep
    from collscope.sweeps.spec import SweepSpec

    launch = launch_options("local", "mpi", require_mpirun=True)
    specs: list[tuple[str, SweepSpec]] = [
        ("mpi", dataclasses.replace(preset("demo"), max_bytes=1 << 20, repeats=3))]
    if importlib.util.find_spec("torch") is not None:
        specs.append(("torch-gloo", SweepSpec(name="demo-torch-gloo", engine="torch", backend="gloo",
                                              ops=("all_reduce",), min_bytes=8, max_bytes=1 << 20, nranks=2,
                                              iters=20, warmup=5, repeats=3, timeout_s=180.0)))
    else:
        echo("      torch is not installed: the torch.distributed (gloo) part is skipped "
             "(pip install 'collscope[torch]')")
    dirs = []
    for label, spec in specs:
        plan = plan_sweep(spec)
        target = out / f"sweep-{label}"
        echo(f"[2/4] sweep {label}: {len(plan.points)} points ({spec.engine}, {spec.nranks} ranks, "
             f"{format_size(spec.min_bytes)}..{format_size(spec.max_bytes)}, {spec.repeats} repeats, "
             f"{_WORKERS_TEXT[workers] if plan_groups(spec, plan.points)[0].persistent else _WORKERS_TEXT['per-point']}"
             f") -> {target}")
        outcome = run_sweep(plan, target, RunOptions(launcher="local", launch=launch, progress=False,
                                                     workers=workers),
                            meta=sweep_meta(engine=spec.engine).to_dict(), echo=echo)
        failed = outcome.failed
        if failed:
            echo(f"      {len(failed)} point(s) failed: " + "; ".join(f"{f.reason}: {f.detail}" for f in failed[:3]))
        dirs.append(target)
    return dirs


def run_demo(out_dir: Path | str, *, echo: Callable[[str], None] = print,
             workers: Workers = "persistent") -> DemoResult:
    """Run the whole demo into ``out_dir``; returns where everything is. ``workers``: ``"persistent"`` (one launch
    for the points an engine's worker can switch between; the torch engine has no such worker and runs one launch
    per point either way) or ``"per-point"`` (one launch per point)."""
    from collscope.analysis.compare import analyze
    from collscope.analysis.compare_render import render_text
    from collscope.analysis.load import load_results
    from collscope.analysis.recommend.core import recommend
    from collscope.analysis.recommend.env import render_env
    from collscope.analysis.report import write_report

    start = time.monotonic()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    topo_source, capture_dir = _topology(out, echo)
    result = DemoResult(out_dir=out, topology_source=topo_source)
    result.sweeps = _sweeps(out, echo, workers)
    try:
        df = load_results(result.sweeps)
    except CollscopeError as exc:
        raise ConfigError(f"the demo sweeps produced no readable records: {exc}") from exc
    analysis = analyze(df)
    (out / "analysis.json").write_text(analysis.to_json())
    (out / "analysis.txt").write_text(render_text(analysis))
    echo(f"[3/4] analysis: {analysis.n_records} records, {len(analysis.configs)} configurations; "  # as analyze
         f"{len(analysis.anomalies)} anomalies noted -> {out / 'analysis.txt'}")
    result.recommendation = render_env(recommend(df))
    (out / "recommendation.env").write_text(result.recommendation)
    result.report = write_report(list(result.sweeps), out / "report", topo_paths=[str(capture_dir)])
    result.seconds = time.monotonic() - start
    echo(f"[4/4] report: {result.report}")
    return result
