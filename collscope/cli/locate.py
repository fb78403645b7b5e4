"""``collscope locate``: find the slow or broken node, link or rail of a Slurm allocation."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from collscope.cli.options import SIZE, nccl_tests_dir_option
from collscope.collectives.allocation import GPU_VARIABLES, gpus_per_node
from collscope.errors import ConfigError
from collscope.files import absolute_path
from collscope.locate.engines import check_rails, choose_engine
from collscope.locate.model import LocateConfig, LocateResult, Runner
from collscope.locate.nodelist import format_nodelist, parse_nodelist
from collscope.locate.records import LocateWriter
from collscope.locate.render import drain_argv, render_steps, render_text, shell_line
from collscope.locate.search import locate
from collscope.locate.steps import StepOptions, first_steps
from collscope.locate.topology import LocateTopology, topology_from_cluster_json
from collscope.vocab.engines import EngineRow

__all__ = ["locate_command"]


def _nodes(nodes: str | None) -> list[str]:
    allocation = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if nodes is None and allocation is None:
        raise ConfigError("no nodes: give --nodes NODELIST (node[1-4]), or run inside an allocation "
                          "(sbatch slurm/locate.sh, salloc) where SLURM_JOB_NODELIST says them")
    names = parse_nodelist(nodes if nodes is not None else str(allocation))
    if allocation is not None:
        have = parse_nodelist(allocation)
        outside = [n for n in names if n not in have]
        if outside:
            raise ConfigError(f"--nodes {format_nodelist(names)}: {format_nodelist(outside)} not in this "
                              f"allocation ({format_nodelist(have)}, {len(have)} nodes); valid: nodes of "
                              "SLURM_JOB_NODELIST")
    if len(names) < 2:
        raise ConfigError(f"--nodes {format_nodelist(names)}: locate needs at least 2 nodes (one node has no "
                          "network between nodes to test; run collscope bench on it)")
    return names


def _topology(path: Path | None, nodes: list[str]) -> LocateTopology:
    if path is None:
        return LocateTopology()
    if path.is_dir():
        from collscope.topo.cluster import load_cluster

        doc = load_cluster(path).to_json()
    else:
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"--topo {path}: not a capture directory or 'topo cluster --json' file ({exc})") \
                from exc
    return topology_from_cluster_json(doc, nodes, source=str(path))


def _default_out() -> Path:
    job = os.environ.get("SLURM_JOB_ID")
    return Path("results") / (f"locate-{job}" if job else time.strftime("locate-%Y%m%d-%H%M%S"))


def _nccl_tests_binary(row: EngineRow, nccl_tests_dir: Path | None) -> str:
    """Engine nccl-tests: the all_reduce_perf it runs on every node (the MPI build, found here: the path must be
    the same on every node, as a shared file system gives it); other engines: unused."""
    if row.program != "nccl-tests":
        return "all_reduce_perf"
    from collscope.collectives.nccl_tests.run import find_nccl_tests_binary

    return str(find_nccl_tests_binary("all_reduce", nccl_tests_dir, mpi=True))


def _positive(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _gpu_srun_facts(row: EngineRow) -> dict[str, Any]:
    """GPU engines: what the sweeps' srun policy for GPU ranks needs (srun's version, the allocation's CPUs), as
    StepOptions fields. Nothing for the host engines."""
    if not row.needs_gpus:
        return {}
    from collscope.sweeps.environment import slurm_version

    return {"slurm_version": slurm_version(), "cpus_per_task": _positive("SLURM_CPUS_PER_TASK"),
            "cpus_on_node": _positive("SLURM_CPUS_ON_NODE")}


def _make_runner(options: StepOptions, work_dir: Path, timeout_s: float) -> Runner:
    """The runner of real tests (tests replace this to run over a simulated fabric)."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise ConfigError("not inside a Slurm allocation (no SLURM_JOB_ID): run 'sbatch -N 4 slurm/locate.sh' "
                          "or locate inside 'salloc -N 4'")
    from collscope.locate.srun import SrunRunner

    return SrunRunner(options=options, work_dir=work_dir, timeout_s=timeout_s)


def _drain(result: LocateResult) -> None:
    from collscope import proc

    argv = drain_argv(result)
    assert argv is not None
    done = proc.run(argv, timeout_s=30, install_hint="scontrol comes with Slurm (apt-get install slurm-client)")
    if not done.ok:
        click.echo(f"error: {shell_line(argv)} failed (exit {done.returncode}): "
                   f"{(done.stderr or done.stdout).strip()[-300:]}", err=True)
        sys.exit(1)
    click.echo(f"drained: {result.exclude}", err=True)


@click.command("locate")
@click.option("--nodes", default=None, metavar="NODELIST",
              help="Nodes to test, Slurm syntax (node[1-4,7]) [default: SLURM_JOB_NODELIST].")
@click.option("--rails", type=click.IntRange(1, 64), default=1, show_default=True,
              help="1: tests use every rail together; R: each of rails 0..R-1 is searched alone.")
@click.option("--engine", type=click.Choice(["mpi", "torch", "nccl-tests"]), default=None,
              help="nccl-tests or torch (with nccl) on GPU nodes: every GPU, NVLink, GPUDirect RDMA; mpi or torch "
                   "(with gloo) on CPU nodes: the host network  [default: nccl-tests on GPU nodes, else mpi].")
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default=None,
              help="--engine torch: the process-group backend  [default: nccl on GPU nodes, else gloo].")
@click.option("--size", "size_bytes", type=SIZE, default="16M", show_default=True,
              help="all_reduce size of every test.")
@click.option("--repeats", type=click.IntRange(min=3), default=3, show_default=True, help="Measurements per test.")
@click.option("--iters", type=click.IntRange(min=1), default=10, show_default=True, help="Timed iterations.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=120.0, show_default=True,
              metavar="S", help="Kill bound of one step; a step past it makes its nodes suspects.")
@click.option("--expect-busbw", "expect_gbps", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="GBPS", help="busbw a healthy inter-node test reaches [default: learned from the tests].")
@click.option("--min-gap", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.3,
              show_default=True, help="A slow test is below (1 - min-gap) x the band's median ...")
@click.option("--k-mad", type=click.FloatRange(min=0, min_open=True), default=3.0, show_default=True,
              help="... and below median x exp(-k x MAD of log busbw).")
@click.option("--gpus-per-node", "gpus_option", type=click.IntRange(min=0), default=None, metavar="G",
              help=f"GPUs per node; 0 tests the host network on purpose  [default: from the allocation: "
                   f"{', '.join(GPU_VARIABLES)}].")
@click.option("--rail-nics", default=None, metavar="NIC,NIC", help="GPU rails: the NIC of each rail (NCCL_IB_HCA).")
@click.option("--iface-prefix", default="cl", show_default=True, help="CPU rails: rail r is interface PREFIX<r>.")
@click.option("--srun-mpi", type=click.Choice(["pmix", "pmi2", "none"]), default="pmix", show_default=True)
@click.option("--topo", "topo_path", type=click.Path(exists=True, path_type=Path), default=None,
              help="Topology captures (a 'topo collect' directory tree) or 'topo cluster --json' output: rail NICs, "
                   "leaf switches.")
@nccl_tests_dir_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Results directory [default: results/locate-<job id>].")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--drain", is_flag=True, help="Run the scontrol drain line for the suspects (else it is printed).")
@click.option("--dry-run", is_flag=True,
              help="Print the engine, why, and the srun steps of the first rounds (with their environment); run "
                   "nothing.")
def locate_command(nodes: str | None, rails: int, engine: str | None, backend: str | None, size_bytes: int,
                   repeats: int, iters: int, warmup: int, timeout_s: float, expect_gbps: float | None,
                   min_gap: float, k_mad: float, gpus_option: int | None, rail_nics: str | None, iface_prefix: str,
                   srun_mpi: str, topo_path: Path | None, nccl_tests_dir: Path | None, out: Path | None,
                   as_json: bool, drain: bool, dry_run: bool) -> None:
    """Find the slow or broken node, link or rail of an allocation in about log2 N rounds of parallel tests.

    Every node alone first (broken nodes caught before they poison pairs), then a group test of the healthy
    nodes; when it is slow, halves tested at the same time (disjoint srun job steps), recursing into the slow
    ones, and each suspect confirmed against known-good nodes. With --rails R the same runs on each rail
    alone. A node is named only on proof; what stays ambiguous is listed with what to rerun.

    On GPU nodes (--gpus-per-node, or the allocation's SLURM_GPUS_ON_NODE ...) the tests run NCCL on every GPU
    (nccl-tests, or torch with nccl); the host engines are refused there unless --gpus-per-node 0.

    Exit status: 0 nothing found; 1 suspects (or unresolved bad tests); 2 bad input.

    \b
    Example:
      sbatch -N 16 slurm/locate.sh
      collscope locate --nodes node[1-4] --rails 2 --out results/locate
      collscope locate --gpus-per-node 8 --rails 8 --topo topo/ --expect-busbw 180 --json
      collscope locate --rails 2 --rail-nics mlx5_0,mlx5_3 --dry-run
    """
    names = _nodes(nodes)
    gpus = gpus_per_node(gpus_option, os.environ)
    choice = choose_engine(engine, backend, gpus)
    row = choice.row
    topo = _topology(topo_path, names)
    nics = tuple(rail_nics.split(",")) if rail_nics else topo.rail_nics
    check_rails(row, rails, rail_nics=nics, nics_given=rail_nics is not None, environ=os.environ,
                iface_prefix=iface_prefix)
    options = StepOptions(engine=row.engine, backend=row.backend or "gloo", size_bytes=size_bytes, iters=iters,
                          warmup=warmup, python=sys.executable, srun_mpi=None if srun_mpi == "none" else srun_mpi,
                          gpus_per_node=gpus.value or 0, iface_prefix=iface_prefix, rail_nics=nics,
                          nccl_tests_binary=_nccl_tests_binary(row, nccl_tests_dir),
                          rank_timeout_s=max(1.0, 0.9 * timeout_s),
                          **_gpu_srun_facts(row))
    config = LocateConfig(repeats=repeats, k_mad=k_mad, min_gap=min_gap, expect_busbw_gbps=expect_gbps,
                          rails=rails, leaf_of=topo.leaf_of)
    root = absolute_path(out or _default_out(), "--out")  # steps start elsewhere: every name absolute
    if dry_run:
        steps = first_steps(names, options, rails=rails, environ=os.environ, work_dir=root / "steps")
        click.echo(render_steps(steps, nodes=names, rails=rails, engine_reason=choice.reason), nl=False)
        return
    sweep_id = f"locate-{os.environ.get('SLURM_JOB_ID') or time.strftime('%Y%m%d%H%M%S')}"
    spec = {"kind": "locate", "nodes": names, "rails": rails, "engine": row.engine, "backend": row.backend,
            "gpus_per_node": gpus.to_dict(), "engine_reason": choice.reason, "size_bytes": size_bytes,
            "repeats": repeats, "iters": iters, "warmup": warmup, "timeout_s": timeout_s,
            "expect_busbw_gbps": expect_gbps, "min_gap": min_gap, "k_mad": k_mad}
    writer = LocateWriter(root, sweep_id=sweep_id, spec=spec)
    runner = _make_runner(options, writer.steps_dir, timeout_s)
    result = locate(names, runner, config, on_round=writer.on_round)
    document = {**result.to_dict(engine=row.engine, size_bytes=size_bytes), "backend": row.backend,
                "gpus_per_node": gpus.to_dict(), "engine_reason": choice.reason, "out": str(root)}
    writer.finish(document)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo(render_text(result, engine=row.name, size_bytes=size_bytes, engine_reason=choice.reason), nl=False)
        click.echo(f"results: {root}")
    if drain and result.suspects:
        _drain(result)
    if result.suspects or result.unresolved:
        sys.exit(1)
