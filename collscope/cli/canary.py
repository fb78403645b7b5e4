"""``collscope canary``: A against B, interleaved, with a go / no-go; ``--from-results`` and ``canary report``.

A thin layer: :mod:`collscope.canary.run` runs, :mod:`collscope.canary.run_judge` judges,
:mod:`collscope.canary.compare_results` judges existing results, :mod:`collscope.canary.report` draws. Exit codes:
go 0, no-go 1, inconclusive 3, bad input 2.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import click

from collscope.cli._errors import user_errors
from collscope.cli.options import engine_option, nccl_tests_dir_option, size_range_options
from collscope.errors import ConfigError

_EPILOG_CAVEAT = ("caveat: the two sides were not interleaved (measured at other times, maybe on other nodes): "
                  "node and time-of-day effects are not separated from the change")


def _side_options(func: Any) -> Any:
    for side in ("b", "a"):
        name = side.upper()
        what = "the baseline (today's configuration)" if side == "a" else "the candidate"
        func = click.option(f"--{side}-label", default=None, metavar="TEXT",
                            help=f"Name of side {name} in the verdict and the report [default: {name}].")(func)
        func = click.option(f"--{side}-cmd-prefix", default=None, metavar="WORDS",
                            help=f"Words put before side {name}'s per-rank program, split like a shell but never "
                                 "run by one (apptainer exec img.sif, numactl -N 0).")(func)
        func = click.option(f"--{side}-lib", default=None, metavar="DIR",
                            help=f"A library directory put first on LD_LIBRARY_PATH for side {name} (another "
                                 "NCCL build, a plugin).")(func)
        func = click.option(f"--{side}-env", multiple=True, metavar="K=V",
                            help=f"A variable of side {name}, {what} (repeatable).")(func)
    return func


@click.group("canary", invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@_side_options
@click.option("--launcher", type=click.Choice(["local", "mpirun", "srun"]), default="local", show_default=True)
@click.option("--nranks", type=click.IntRange(min=1), default=2, show_default=True, help="Ranks of each launch.")
@click.option("--nnodes", type=click.IntRange(min=1), default=1, show_default=True, help="Nodes of each launch.")
@engine_option(required=False)
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default=None, help="torch backend.")
@nccl_tests_dir_option
@click.option("--op", "ops", multiple=True, metavar="OP",
              help="Collective to measure (repeatable) [default: the workload's, else all_reduce].")
@size_range_options(min_default="the workload's, else 8", max_default="the workload's, else 1M")
@click.option("--workload", "workload_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="The job's calls per step (trace --workload-out): its sizes are measured and "
                                   "its calls weight the verdict [default: one call per measured size].")
@click.option("--iters", type=click.IntRange(min=1), default=None, help="Timed iterations per size [default: 20].")
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warm-up iterations [default: 5].")
@click.option("--timeout", "timeout_s", type=float, default=None, help="Seconds per launch (kills it).")
@click.option("--budget", default=None, metavar="DURATION",
              help="Wall clock to spend (90s, 10m, 1h): block 0 is timed, then as many blocks as fit run "
                   "(2..--max-blocks) [default: 10m unless --blocks].")
@click.option("--blocks", type=click.IntRange(min=2), default=None, help="A fixed number of ABBA blocks.")
@click.option("--max-blocks", type=click.IntRange(min=2), default=30, show_default=True,
              help="Most blocks a budget plans.")
@click.option("--max-loss", type=float, default=0.01, show_default=True,
              help="The loss of the workload's communication time that is still a go (0.01 = 1%).")
@click.option("--hostfile", default=None, help="mpirun hostfile.")
@click.option("--mpi-flavour", type=click.Choice(["openmpi", "mpich"]), default="openmpi", show_default=True)
@click.option("--oversubscribe", is_flag=True, help="mpirun: allow more ranks than cores.")
@click.option("--srun-mpi", type=click.Choice(["pmix", "pmi2", "none"]), default=None, help="srun --mpi=...")
@click.option("--gpus-per-node", type=click.IntRange(min=0), default=None, help="srun: GPUs of each node.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Results directory (rerun the same command to resume).")
@click.option("--from-results", "from_results", nargs=2, multiple=True, metavar="A B",
              type=click.Path(exists=True, path_type=Path),
              help="Judge existing results instead of running: A's and B's (results directories or nccl-tests "
                   "outputs; repeatable). Not interleaved, and said so.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict (and the why) as JSON.")
@click.option("--dry-run", is_flag=True, help="Print every command of the plan; run nothing.")
@click.option("--retry-failed", is_flag=True, help="Measure points whose last attempt failed again.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
@click.pass_context
def canary(ctx: click.Context, **kw: Any) -> None:
    """A go / no-go for a change (NCCL, plugin, driver, image, setting): B against A, interleaved.

    Both sides run on the same nodes in ABBA blocks (block k: A then B when k is even, B then A when odd). The
    verdict is the change of the workload's communication time per step with a 95% bootstrap interval over
    blocks, and the busbw change per size range: no-go (exit 1) when the interval lies above --max-loss or a
    range carrying > 5% of the time loses beyond noise; go (exit 0) when it lies inside --max-loss;
    inconclusive (exit 3) otherwise, with how many more blocks would decide. verdict.json goes into --out.

    \b
    Examples:
      collscope canary --b-env OMPI_MCA_btl=self,tcp --launcher mpirun --nranks 2 --min-bytes 64K \\
          --max-bytes 4M --blocks 6 --out results/canary-tcp
      collscope canary --b-lib /opt/nccl-2.29/lib --engine nccl-tests --launcher srun --workload job.json \\
          --budget 10m --out results/nccl-2.29
      collscope canary --from-results before/ after/
      collscope canary report results/canary-tcp --out report/canary
    """
    if ctx.invoked_subcommand is not None:
        return
    with user_errors():
        if kw["from_results"]:
            code = _from_results(kw)
        else:
            code = _run(kw)
    ctx.exit(code)


def _sides(kw: dict[str, Any]) -> tuple[Any, Any]:
    from collscope.canary.plan import parse_side

    a = parse_side("A", env=kw["a_env"], lib=kw["a_lib"], cmd_prefix=kw["a_cmd_prefix"], label=kw["a_label"])
    b = parse_side("B", env=kw["b_env"], lib=kw["b_lib"], cmd_prefix=kw["b_cmd_prefix"], label=kw["b_label"])
    return a, b


def _run(kw: dict[str, Any]) -> int:
    from collscope.canary.plan import parse_duration
    from collscope.canary.run import CanaryRequest, run_canary
    from collscope.canary.run_judge import judge_canary
    from collscope.sweeps.termination import on_sigterm

    if kw["out_dir"] is None:
        raise click.UsageError("--out DIR is needed to run a canary (or give --from-results A B)")
    previous = on_sigterm()  # SIGTERM while it runs: the running point is written down as cancelled, exit 143
    if previous is not None:
        click.get_current_context().call_on_close(lambda: signal.signal(signal.SIGTERM, previous))
    a, b = _sides(kw)
    budget = kw["budget"]
    if budget is not None and kw["blocks"] is not None:
        raise ConfigError("give either --budget or --blocks, not both")
    budget_s = parse_duration(budget) if budget is not None else (None if kw["blocks"] else 600.0)
    request = CanaryRequest(
        out_dir=kw["out_dir"], a=a, b=b, launcher=kw["launcher"], engine=kw["engine"] or "mpi",
        backend=kw["backend"], ops=tuple(kw["ops"]), nranks=kw["nranks"], nnodes=kw["nnodes"],
        min_bytes=kw["min_bytes"], max_bytes=kw["max_bytes"], iters=kw["iters"], warmup=kw["warmup"],
        timeout_s=kw["timeout_s"], workload=kw["workload_path"], budget_s=budget_s, blocks=kw["blocks"],
        nccl_tests_dir=None if kw["nccl_tests_dir"] is None else str(kw["nccl_tests_dir"]),
        max_blocks=kw["max_blocks"], max_loss=kw["max_loss"], hostfile=kw["hostfile"],
        mpi_flavour=kw["mpi_flavour"], srun_mpi=kw["srun_mpi"], oversubscribe=kw["oversubscribe"],
        gpus_per_node=kw["gpus_per_node"], dry_run=kw["dry_run"], retry_failed=kw["retry_failed"],
        progress=sys.stderr.isatty() if kw["progress"] is None else kw["progress"])
    run = run_canary(request, echo=lambda m: click.echo(m, err=True))
    if kw["dry_run"]:
        for text in run.commands:
            click.echo(text)
        return 0
    for failed in run.failed:
        click.echo(f"  {failed.point_id}: {failed.reason}: {failed.detail}", err=True)
    judgement = judge_canary(run.out_dir)
    _show(judgement.verdict, judgement.why, kw["as_json"], {"results_dir": str(run.out_dir),
                                                            "labels": run.meta.labels if run.meta else None})
    return int(judgement.verdict.exit_code)


def _from_results(kw: dict[str, Any]) -> int:
    from collscope.canary.compare_results import judge_results
    from collscope.canary.run_judge import load_workload

    pairs = kw["from_results"]
    verdict = judge_results([p[0] for p in pairs], [p[1] for p in pairs], workload=load_workload(kw["workload_path"]),
                            max_loss=kw["max_loss"], op=kw["ops"][0] if len(kw["ops"]) == 1 else None,
                            nranks=None)
    click.echo(_EPILOG_CAVEAT, err=True)
    _show(verdict, None, kw["as_json"], {"from_results": [[str(a), str(b)] for a, b in pairs]})
    return int(verdict.exit_code)


def _show(verdict: Any, why: Any, as_json: bool, extra: dict[str, Any]) -> None:
    """The verdict as text (the verdict's own rendering, then the why) or as one JSON document."""
    if as_json:
        from collscope.canary.document import canary_document

        click.echo(json.dumps(canary_document(verdict, why, **extra), indent=2, default=str))
        return
    from collscope.canary.verdict import render_verdict

    click.echo(render_verdict(verdict))
    if why is not None:
        for line in (*why.statements, *why.notes):
            click.echo(f"why: {line}")
        if why.tuner_csv:
            click.echo("tuner rules restoring A's choice on B (NCCL tuner-plugin CSV):")
            click.echo(why.tuner_csv.rstrip("\n"))


@canary.command("report")
@click.argument("results_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory of the report (index.html, self-contained).")
def report(results_dir: Path, out_dir: Path) -> None:
    """Both sides' curves with their bands, the per-range changes and the verdict, as an HTML report.

    \b
    Example:
      collscope canary report results/canary-tcp --out report/canary
    """
    with user_errors():
        from collscope.canary.layout import read_canary
        from collscope.canary.report import write_canary_report
        from collscope.canary.run_judge import judge_canary

        judgement = judge_canary(results_dir)
        path = write_canary_report(judgement.frame, judgement.verdict, out_dir, why=judgement.why,
                                   labels=read_canary(results_dir).labels)
    click.echo(str(path))
