"""``collscope bench``: measure one configuration with the mpi4py or torch harness, or run nccl-tests.

For ``mpi`` and ``torch`` this is the per-rank program a launcher starts; rank 0 writes the records (one
atomic append per size to ``--out``, or JSON lines on stdout) and prints a table. A failing rank fails the
whole run quickly: under MPI the error is printed and the job aborted (``MPI_Abort`` with code 2); under torch
the process-group timeout bounds every wait and the error exits the rank with code 2 (torchrun and mpirun
then stop the others).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

import click

from collscope.cli.options import engine_option, nccl_tests_dir_option, size_range_options, sizes_option
from collscope.collectives.record import Measurement, append_jsonl
from collscope.collectives.spec import BENCH_DTYPES, BENCH_OPS, BenchSpec
from collscope.errors import CollscopeError
from collscope.vocab.engines import ENGINE_ROWS, engine_row

__all__ = ["bench", "render_row", "TABLE_HEADER"]

TABLE_HEADER = (f"{'size':>12} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} {'time_us':>10} "
                f"{'algbw_GB/s':>11} {'busbw_GB/s':>11} {'#wrong':>7}")


def render_row(r: Measurement) -> str:
    """One table line per record, columns as nccl-tests prints them."""
    wrong = "N/A" if r.wrong is None else str(r.wrong)
    return (f"{r.size_bytes:>12} {r.count if r.count is not None else '':>12} {r.dtype:>8} {r.redop or 'none':>6} "
            f"{r.root if r.root is not None else -1:>5} {r.time_us:>10.2f} {r.algbw_gbps:>11.3f} "
            f"{r.busbw_gbps:>11.3f} {wrong:>7}")


class _Sink:
    """Rank 0's output: records to --out (or stdout as JSON lines) and the table (stdout, or stderr)."""

    def __init__(self, out: Path | None) -> None:
        self.out = out
        self.table_to_stderr = out is None
        self.records: list[Measurement] = []

    def __call__(self, record: Measurement) -> None:
        if not self.records:
            self._table(f"# collscope bench {record.engine}/{record.backend} {record.op}, {record.nranks} ranks "
                        f"on {record.nnodes} node(s), {record.iters} iters, {record.warmup} warm-up")
            self._table(f"#{TABLE_HEADER[1:]}")
        self.records.append(record)
        if self.out is not None:
            append_jsonl(self.out, [record])
        else:
            click.echo(json.dumps(record.to_dict(), sort_keys=True))
        self._table(render_row(record))

    def _table(self, line: str) -> None:
        click.echo(line, err=self.table_to_stderr)

    def finish(self) -> None:
        wrong = sum(r.wrong or 0 for r in self.records)
        if self.records:
            where = f", records appended to {self.out}" if self.out is not None else ""
            self._table(f"# {len(self.records)} sizes, {wrong} wrong elements{where}")
        if wrong or any(not r.ok for r in self.records):
            click.echo(f"error: {wrong} wrong elements; the collective returned incorrect values", err=True)
            sys.exit(1)


def _run_mpi(spec: BenchSpec, sink: _Sink, timeout_s: float) -> None:
    from collscope.collectives.harness.watchdog import run_mpi_guarded

    run_mpi_guarded(spec, timeout_s=timeout_s, on_record=sink, report=lambda m: click.echo(m, err=True),
                    on_rank=_quiet_unless_root)


def _run_torch(spec: BenchSpec, backend: str, sink: _Sink) -> None:
    from collscope.collectives.harness.torch import run_torch_bench
    from collscope.collectives.harness.watchdog import failure_line
    from collscope.collectives.ranks import rank_info

    rank = rank_info(os.environ).rank
    _quiet_unless_root(rank)
    try:
        run_torch_bench(spec, "nccl" if backend == "nccl" else "gloo", on_record=sink if rank == 0 else None)
    except CollscopeError:
        raise
    except Exception as exc:
        click.echo(failure_line(rank, "torch", exc), err=True)
        sys.exit(2)


def _run_nccl_tests(spec: BenchSpec, nccl_tests_dir: Path | None, timeout_s: float, sink: _Sink, *, ngpus: int,
                    launcher: str | None, nranks: int | None, nnodes: int, gpus_per_node: int | None) -> None:
    """Run the nccl-tests binary for ``spec`` (both placements, as nccl-tests prints them) and emit its records:
    one process driving ``ngpus`` GPUs, or ``nranks`` processes of the MPI build under ``launcher``."""
    from collscope.collectives.nccl_tests.run import run_nccl_tests
    from collscope.collectives.nccl_tests.spec import nccl_tests_spec_for_bench
    from collscope.sweeps.environment import enclosing_launch, program_launcher

    inside = enclosing_launch()
    if inside is not None:
        kind, size = inside
        raise click.UsageError(
            f"this process is one of {size} tasks started by {kind}: each would run its own nccl-tests binary, "
            f"{size} separate one-rank runs; run collscope bench --engine nccl-tests once (not under {kind}) and let "
            f"it start the ranks: collscope bench --engine nccl-tests --launcher {kind} --nranks {size} ...")
    nt_spec = replace(nccl_tests_spec_for_bench(spec, nranks=(nranks or 1) * ngpus), ngpus=ngpus)
    prefix: tuple[str, ...] = ()
    extra_env: dict[str, str] = {}
    if launcher is not None:
        assert nranks is not None  # the command checks it
        command = program_launcher(launcher, "nccl-tests", nranks=nranks, nnodes=nnodes,  # type: ignore[arg-type]
                                   gpus_per_process=ngpus, gpus_per_node=gpus_per_node)
        prefix, extra_env = command.argv, command.env
        nt_spec = replace(nt_spec, mpi=True)  # the MPI build: <op>_perf_mpi first, then <op>_perf
    execution = run_nccl_tests(nt_spec, nccl_tests_dir=nccl_tests_dir, launcher=prefix, extra_env=extra_env,
                               timeout_s=timeout_s, nranks=(nranks or 1) * ngpus)
    for record in execution.records:
        sink(record)
    if execution.failure and execution.failure != "wrong values":
        tail = execution.output_tail[-800:]
        click.echo(f"error: nccl-tests {spec.op}: {execution.failure}\n{tail}", err=True)
        sys.exit(1)


def _quiet_unless_root(rank: int) -> None:
    if rank != 0:
        logging.getLogger("collscope").setLevel(logging.ERROR)


@click.command("bench")
@engine_option(required=True)
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default=None,
              help="torch process-group backend [default: gloo; nccl for GPUs].")
@click.option("--op", type=click.Choice(BENCH_OPS), required=True, help="Collective to measure.")
@size_range_options(short_flags=True)
@click.option("--factor", "-f", type=float, default=2.0, show_default=True, help="Size multiplier per step.")
@sizes_option(instead_of="-b/-e/-f", applies_to="engines mpi and torch")
@click.option("--iters", "-n", type=int, default=20, show_default=True, help="Timed iterations per size.")
@click.option("--warmup", "-w", type=int, default=5, show_default=True, help="Warm-up iterations per size.")
@click.option("--check", is_flag=True, help="Verify results on rank-dependent values; exit 1 if any are wrong.")
@click.option("--dtype", type=click.Choice(BENCH_DTYPES), default="float32", show_default=True)
@click.option("--redop", type=click.Choice(["sum", "max", "min"]), default="sum", show_default=True)
@click.option("--root", type=int, default=0, show_default=True, help="Broadcast root.")
@click.option("--in-place", is_flag=True, help="Output buffer as input (MPI_IN_PLACE; torch views).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Buffer location [default: cuda with --backend nccl, else cpu].")
@click.option("--cuda-graph", is_flag=True, help="torch + nccl: time one CUDA graph holding the batch.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append records (JSONL) here; without it records go to stdout and the table to stderr.")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True, metavar="S",
              help="torch: bound on rendezvous and each collective; mpi: bound on the whole run (abort).")
@nccl_tests_dir_option
@click.option("--ngpus", "-g", type=click.IntRange(min=1), default=1, show_default=True,
              help="nccl-tests: GPUs driven by each nccl-tests process (its -g).")
@click.option("--launcher", type=click.Choice(["mpirun", "srun"]), default=None,
              help="nccl-tests: start --nranks processes of the MPI build under mpirun or srun (one per GPU with "
                   "-g 1); run this command once, not under a launcher.")
@click.option("--nranks", type=click.IntRange(min=1), default=None, help="nccl-tests with --launcher: processes.")
@click.option("--nnodes", type=click.IntRange(min=1), default=1, show_default=True,
              help="nccl-tests with --launcher: nodes the processes are spread over.")
@click.option("--gpus-per-node", type=click.IntRange(min=0), default=None,
              help="nccl-tests with --launcher srun: GPUs of each node [default: the allocation's SLURM_GPUS_*].")
def bench(engine: str, backend: str | None, op: str, min_bytes: int | None, max_bytes: int | None, factor: float,
          sizes: tuple[int, ...] | None, iters: int, warmup: int, check: bool, dtype: str, redop: str, root: int,
          in_place: bool, device: str | None, cuda_graph: bool, out: Path | None, timeout_s: float,
          nccl_tests_dir: Path | None, ngpus: int, launcher: str | None, nranks: int | None, nnodes: int,
          gpus_per_node: int | None) -> None:
    """Measure one collective configuration over a ladder of sizes (nccl-tests semantics).

    For --engine mpi and torch, every rank of a job runs this command; rank 0 writes the records.
    Time per op is a batch of --iters calls after a barrier, divided by --iters, maximum over ranks.

    \b
    Examples:
      mpirun -np 2 collscope bench --engine mpi --op all_reduce -b 8 -e 64M --check --out ar.jsonl
      torchrun --nproc-per-node 8 -m collscope bench --engine torch --backend nccl --op all_gather -b 1K -e 1G
      OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4 \\
        mpirun -np 4 collscope bench --engine mpi --op all_reduce -b 1M -e 16M
      mpirun -np 2 collscope bench --engine mpi --op all_reduce --sizes 8,4K,1M
      collscope bench --engine nccl-tests --op all_reduce -b 8 -e 1G -f 2 --ngpus 8
      collscope bench --engine nccl-tests --op all_gather -b 8 -e 1G -f 2 --launcher srun --nranks 16 --nnodes 2

    For --engine nccl-tests this command runs the binary itself: run it once (under sbatch or salloc for
    --launcher srun), never under srun or mpirun, which would start one separate nccl-tests run per task.
    """
    with_backends = sorted({r.engine for r in ENGINE_ROWS if r.backend is not None})
    if backend is not None and engine not in with_backends:
        raise click.UsageError(f"--backend applies to --engine {' or '.join(with_backends)} only")
    row = engine_row(engine, backend)  # torch without --backend: its default backend (gloo)
    given = [name for name, value in (("--ngpus", ngpus != 1), ("--launcher", launcher), ("--nranks", nranks),
                                      ("--nnodes", nnodes != 1), ("--gpus-per-node", gpus_per_node is not None))
             if value]
    if given and row.program != "nccl-tests":
        raise click.UsageError(f"{', '.join(given)} apply to --engine nccl-tests; engines mpi and torch are the "
                               "per-rank program: start them under the launcher (mpirun -np N collscope bench ...)")
    if (launcher is None) != (nranks is None) or (launcher is None and (nnodes != 1 or gpus_per_node is not None)):
        raise click.UsageError("--launcher and --nranks go together (--nnodes and --gpus-per-node need them)")
    if sizes is None and (min_bytes is None or max_bytes is None):
        raise click.UsageError("give --min-bytes and --max-bytes, or --sizes")
    if sizes is not None:
        if row.program != "bench":
            raise click.UsageError("--sizes applies to engines mpi and torch (nccl-tests takes -b/-e/-f)")
        min_bytes, max_bytes = min(sizes), max(sizes)
    assert min_bytes is not None and max_bytes is not None  # checked just above
    backend = row.backend or "gloo"
    device = device or ("cuda" if row.needs_gpus and row.program == "bench" else "cpu")
    spec = BenchSpec(op=op, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor, sizes=sizes,  # type: ignore[arg-type]
                     iters=iters, warmup=warmup, dtype=dtype, redop=redop, root=root, in_place=in_place,  # type: ignore[arg-type]
                     check=check, device=device, cuda_graph=cuda_graph, timeout_s=timeout_s)  # type: ignore[arg-type]
    sink = _Sink(out)
    if engine == "mpi":
        _run_mpi(spec, sink, timeout_s)
    elif engine == "torch":
        _run_torch(spec, backend, sink)
    else:
        _run_nccl_tests(spec, nccl_tests_dir, timeout_s, sink, ngpus=ngpus, launcher=launcher, nranks=nranks,
                        nnodes=nnodes, gpus_per_node=gpus_per_node)
    sink.finish()

