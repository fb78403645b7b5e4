"""``collscope sweep run|status``: plan and run a sweep; read its progress back."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from collscope.cli.options import engine_option, nccl_tests_dir_option, size_range_options, topo_option
from collscope.errors import ConfigError

if TYPE_CHECKING:
    from collscope.sweeps.adaptive.run import AdaptiveOutcome
    from collscope.sweeps.runner import SweepOutcome


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


@sweep.command("run")
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--preset", default=None, help="A named preset instead of SPEC.yaml (mpi-algos, nccl-algo-proto, ...).")
@click.option("--launcher", type=click.Choice(["local", "mpirun", "srun"]), default="local", show_default=True)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Results directory (rerun the same command to resume).")
@click.option("--nranks", type=int, default=None, help="Ranks per point (overrides the spec).")
@click.option("--nnodes", type=int, default=None, help="Nodes (overrides the spec).")
@engine_option(required=False)
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default=None, help="torch backend.")
@nccl_tests_dir_option
@size_range_options(min_default="the spec's", max_default="the spec's")
@click.option("--iters", type=int, default=None)
@click.option("--warmup", type=int, default=None)
@click.option("--repeats", type=int, default=None,
              help="Measurements of each point [default: the spec's; 3 unless it says otherwise: the analysis "
                   "claims no difference on fewer].")
@click.option("--timeout", "timeout_s", type=float, default=None, help="Seconds per point (kills the point).")
@click.option("--hostfile", default=None, help="mpirun hostfile.")
@click.option("--mpi-flavour", type=click.Choice(["openmpi", "mpich"]), default="openmpi", show_default=True)
@click.option("--oversubscribe", is_flag=True,
              help="mpirun: allow more ranks than cores (Open MPI --oversubscribe; it turns binding off).")
@click.option("--srun-mpi", type=click.Choice(["pmix", "pmi2", "none"]), default=None,
              help="srun --mpi=... [default: pmix for the mpi and nccl-tests engines (Open MPI 5 speaks only PMIx; "
                   "nccl-tests under srun is its MPI build), none for torch (Slurm's MpiDefault)].")
@click.option("--gpus-per-node", type=click.IntRange(min=0), default=None,
              help="srun: GPUs of each node [default: the allocation's SLURM_GPUS_ON_NODE/_PER_NODE/SLURM_JOB_GPUS; "
                   "0: CPU nodes]. GPU steps get --ntasks-per-node, --cpus-per-task, --cpu-bind=cores and GPU "
                   "binding off (docs/slurm.md, GPU nodes).")
@click.option("--one-gpu-per-task", is_flag=True,
              help="srun on GPU nodes: the site gives each task one GPU whatever srun asks (nccl-tests then gets "
                   "NCCL_TESTS_DEVICE=0).")
@topo_option("topo_paths", cluster=False)
@click.option("--rails", "rails", default=None, metavar="NAME,NAME",
              help="Rail presets (mpi-rails, gloo-rails, nccl-pxn-rails): the rails, e.g. cl0,cl1 (interfaces) or "
                   "mlx5_0,mlx5_3 (HCAs); default: from --topo, else the preset's.")
@click.option("--shard", default=None, metavar="I/N",
              help="Run only repeats I, I+N, ... of every configuration (job arrays: each shard measures every "
                   "configuration; N at most --repeats).")
@click.option("--retry-failed", is_flag=True, help="Run points whose last attempt failed again.")
@click.option("--dry-run", is_flag=True, help="Print every command and environment; run nothing.")
@click.option("--strategy", type=click.Choice(["grid", "adaptive"]), default="grid", show_default=True,
              help="grid: every point; adaptive: a few sizes per configuration first, then only contenders near "
                   "crossovers (engines mpi and torch).")
@click.option("--min-gain", type=float, default=0.02, show_default=True,
              help="adaptive: drop configurations that cannot beat the default by more than this fraction.")
@click.option("--max-rounds", type=int, default=8, show_default=True, help="adaptive: most rounds.")
@click.option("--workers", type=click.Choice(["per-point", "persistent"]), default="per-point", show_default=True,
              help="per-point: one launch per point; persistent: ranks launched once per group of points that can "
                   "share a launch (engine mpi: Open MPI algorithms switched in-process through MPI_T).")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
@click.option("--keep-env", is_flag=True,
              help="Time every point in the environment as inherited: keep NCCL_ALGO/NCCL_PROTO/NCCL_TUNER_PLUGIN, "
                   "swept knobs and NCCL conf file entries (by default unset, or the sweep refuses), and the spec's "
                   "and your NCCL_DEBUG* (by default WARN in timed runs). sweep.json's inherited_env says what "
                   "shaped the baseline (docs/slurm.md, What a sweep inherits).")
def run(spec_file: Path | None, preset: str | None, launcher: str, out_dir: Path, nranks: int | None,
        nnodes: int | None, engine: str | None, backend: str | None, nccl_tests_dir: Path | None,
        min_bytes: int | None, max_bytes: int | None, iters: int | None, warmup: int | None, repeats: int | None,
        timeout_s: float | None, hostfile: str | None, mpi_flavour: str, oversubscribe: bool, srun_mpi: str | None,
        gpus_per_node: int | None, one_gpu_per_task: bool, topo_paths: tuple[str, ...], rails: str | None,
        shard: str | None, retry_failed: bool, dry_run: bool, strategy: str, min_gain: float, max_rounds: int,
        workers: str, progress: bool | None, keep_env: bool) -> None:
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
      collscope sweep run --preset mpi-algos --launcher local --workers persistent --out results/fast
    """
    # SIGINT/SIGTERM wait while the sweep's modules load: an exception raised inside an import can be swallowed by
    # a C extension's init (msgspec's), and the sweep then ran as if nothing had been sent. Delivered after, here.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        from collscope.sweeps.session import SweepRequest, run_session
        from collscope.sweeps.termination import on_sigterm

        previous = on_sigterm()  # SIGTERM at any moment of the run, not only while a point runs: exit code 143
        if previous is not None:
            click.get_current_context().call_on_close(lambda: signal.signal(signal.SIGTERM, previous))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if (spec_file is None) == (preset is None):
        raise click.UsageError("give either SPEC.yaml or --preset NAME")
    overrides = {"nranks": nranks, "nnodes": nnodes, "engine": engine, "backend": backend,
                 "nccl_tests_dir": None if nccl_tests_dir is None else str(nccl_tests_dir), "min_bytes": min_bytes,
                 "max_bytes": max_bytes, "iters": iters, "warmup": warmup, "repeats": repeats, "timeout_s": timeout_s}
    request = SweepRequest(
        spec_file=spec_file, preset=preset, out_dir=out_dir, overrides=overrides,
        launcher=launcher, mpi_flavour=mpi_flavour, hostfile=hostfile,  # type: ignore[arg-type]
        srun_mpi=srun_mpi, oversubscribe=oversubscribe, topo_paths=topo_paths,  # type: ignore[arg-type]
        gpus_per_node=gpus_per_node, one_gpu_per_task=one_gpu_per_task,
        rails=tuple(r.strip() for r in rails.split(",") if r.strip()) if rails else (),
        shard=_parse_shard(shard), retry_failed=retry_failed, dry_run=dry_run, strategy=strategy,  # type: ignore[arg-type]
        min_gain=min_gain, max_rounds=max_rounds, progress=sys.stderr.isatty() if progress is None else progress,
        workers=workers, keep_env=keep_env)  # type: ignore[arg-type]
    outcome = run_session(request, echo=lambda m: click.echo(m, err=True))
    if dry_run:
        for text in outcome.commands:
            click.echo(text)
        return
    for line in (render_adaptive(outcome.adaptive, out_dir) if outcome.adaptive is not None
                 else render_grid(outcome.grid, out_dir)):
        click.echo(line)
    if outcome.failed:
        sys.exit(1)


def render_grid(outcome: SweepOutcome | None, out_dir: Path) -> list[str]:
    """The summary of a grid sweep: points run, done before, failed (one line each)."""
    assert outcome is not None  # a grid session always has its outcome
    ran = [o for o in outcome.outcomes if o.status != "skipped"]
    done_before = len(outcome.outcomes) - len(ran)
    lines = [f"{out_dir}: ran {len(ran)} point(s) ({done_before} already done or failed before), "
             f"{len(outcome.failed)} failed"]
    lines += [f"  {failed.point_id}: {failed.reason}: {failed.detail}" for failed in outcome.failed]
    return lines


def render_adaptive(outcome: AdaptiveOutcome, out_dir: Path) -> list[str]:
    """The summary of an adaptive sweep: rounds, points run, kept and dropped configurations, leaders per range."""
    from collscope.sweeps.adaptive.planner import size_ranges
    from collscope.units import format_size

    ran = sum(1 for out in outcome.outcomes for o in out.outcomes if o.status != "skipped")
    lines = [f"{out_dir}: adaptive, {len(outcome.rounds)} round(s), ran {ran} point(s), "
             f"{len(outcome.failed)} failed"]
    for op, decision in outcome.decisions.items():
        gone = [c for r in outcome.rounds for c in r["decisions"].get(op, {}).get("dropped", {})]
        lines.append(f"  {op}: kept {', '.join(decision.alive)}; dropped {len(gone)}")
        for r in size_ranges(decision.leaders):
            lines.append(f"    {format_size(r['min_bytes'])}..{format_size(r['max_bytes'])}: {r['config']}")
    lines += [f"  {failed.point_id}: {failed.reason}: {failed.detail}" for failed in outcome.failed]
    return lines


@sweep.command("status")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help='Print {"points", "done", "failed", "pending", "damaged", ...}.')
def status(directory: Path, as_json: bool) -> None:
    """Progress of a sweep: points done, failed (with reasons), pending and damaged.

    A damaged point has a records file that is empty, undecodable or not a regular file: it is not done, and
    rerunning the same sweep run moves the file aside (never deleted) and measures the point again.

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
               f"{doc['failed']} failed, {doc['pending']} pending, {doc['damaged']} damaged, "
               f"{doc['skipped']} skipped by constraints")
    for reason, n in sorted(doc["failure_reasons"].items()):
        click.echo(f"  {reason}: {n}")
    for f in doc["failures"]:
        click.echo(f"  {f['point_id']}: {f['reason']}: {f['detail']}")
    for d in doc["damaged_points"]:
        click.echo(f"  {d['point_id']}: damaged: {d['problem']}")
