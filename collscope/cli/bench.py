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
import threading
from pathlib import Path
from typing import Any

import click

from collscope.cli._errors import _user_errors
from collscope.collectives.record import Measurement, append_jsonl
from collscope.collectives.spec import BENCH_DTYPES, BENCH_OPS, BenchSpec
from collscope.errors import CollscopeError, ConfigError
from collscope.units import parse_size

__all__ = ["bench", "render_row", "TABLE_HEADER"]

TABLE_HEADER = (f"{'size':>12} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} {'time_us':>10} "
                f"{'algbw_GB/s':>11} {'busbw_GB/s':>11} {'#wrong':>7}")


def render_row(r: Measurement) -> str:
    """One table line per record, columns as nccl-tests prints them."""
    wrong = "N/A" if r.wrong is None else str(r.wrong)
    return (f"{r.size_bytes:>12} {r.count if r.count is not None else '':>12} {r.dtype:>8} {r.redop or 'none':>6} "
            f"{r.root if r.root is not None else -1:>5} {r.time_us:>10.2f} {r.algbw_gbps:>11.3f} "
            f"{r.busbw_gbps:>11.3f} {wrong:>7}")


class _SizeType(click.ParamType):
    """A byte size such as ``8``, ``64K``, ``16M`` (binary suffixes, as nccl-tests' -b/-e)."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SIZE = _SizeType()


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


def _fail(rank: int, engine: str, exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:400]
    return f"error: rank {rank} ({engine} engine): {type(exc).__name__}: {first}"


def _run_mpi(spec: BenchSpec, sink: _Sink, timeout_s: float) -> None:
    from collscope.collectives.harness.mpi import check_mpi_spec, import_mpi, run_mpi_bench

    check_mpi_spec(spec)  # the same on every rank: a plain exit 2, no abort needed
    mpi = import_mpi()
    comm = mpi.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    _quiet_unless_root(rank)

    def abort(message: str) -> None:
        click.echo(message, err=True)
        sys.stderr.flush()
        comm.Abort(2)

    watchdog = threading.Timer(timeout_s, abort, args=(
        f"error: rank {rank} (mpi engine): no result after {timeout_s:g} s (--timeout); aborting the job",))
    watchdog.daemon = True
    watchdog.start()
    try:
        run_mpi_bench(spec, comm, on_record=sink if rank == 0 else None)
    except Exception as exc:
        if size == 1 and isinstance(exc, CollscopeError):
            raise
        abort(_fail(rank, "mpi", exc))
    finally:
        watchdog.cancel()


def _run_torch(spec: BenchSpec, backend: str, sink: _Sink) -> None:
    from collscope.collectives.harness.torch import run_torch_bench
    from collscope.collectives.ranks import rank_info

    rank = rank_info(os.environ).rank
    _quiet_unless_root(rank)
    try:
        run_torch_bench(spec, "nccl" if backend == "nccl" else "gloo", on_record=sink if rank == 0 else None)
    except CollscopeError:
        raise
    except Exception as exc:
        click.echo(_fail(rank, "torch", exc), err=True)
        sys.exit(2)


_NCCL_TESTS_DTYPE = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16",
                     "int32": "int32", "int64": "int64", "int8": "int8", "uint8": "uint8"}


def _run_nccl_tests(spec: BenchSpec, nccl_tests_dir: Path | None, timeout_s: float, sink: _Sink) -> None:
    """Run the nccl-tests binary for ``spec`` (both placements, as nccl-tests prints them) and emit its records."""
    from collscope.collectives.nccl_tests.run import NcclTestsSpec, run_nccl_tests

    if spec.factor != int(spec.factor):
        raise ConfigError(f"nccl-tests takes a whole size factor (-f); got {spec.factor:g}")
    nt_spec = NcclTestsSpec(op=spec.op, min_bytes=spec.min_bytes, max_bytes=spec.max_bytes,
                            step_factor=int(spec.factor), iters=spec.iters, warmup_iters=spec.warmup,
                            check_iters=1 if spec.check else 0, dtype=_NCCL_TESTS_DTYPE[spec.dtype],
                            redop=spec.redop, root=spec.root, cudagraph_launches=1 if spec.cuda_graph else None)
    execution = run_nccl_tests(nt_spec, nccl_tests_dir=nccl_tests_dir, timeout_s=timeout_s)
    for record in execution.records:
        sink(record)
    if execution.failure and execution.failure != "wrong values":
        tail = execution.output_tail[-800:]
        click.echo(f"error: nccl-tests {spec.op}: {execution.failure}\n{tail}", err=True)
        sys.exit(1)


def _parse_sizes(text: str | None) -> tuple[int, ...] | None:
    """``--sizes 8,1K,64K`` -> (8, 1024, 65536); UsageError naming the bad item."""
    if text is None:
        return None
    out = []
    for item in text.split(","):
        try:
            out.append(parse_size(item.strip()))
        except ValueError as exc:
            raise click.UsageError(f"--sizes {text!r}: {exc}") from None
    return tuple(out)


def _quiet_unless_root(rank: int) -> None:
    if rank != 0:
        logging.getLogger("collscope").setLevel(logging.ERROR)


@click.command("bench")
@click.option("--engine", type=click.Choice(["mpi", "torch", "nccl-tests"]), required=True,
              help="mpi: mpi4py harness; torch: torch.distributed harness; nccl-tests: run the binary.")
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default=None,
              help="torch process-group backend [default: gloo; nccl for GPUs].")
@click.option("--op", type=click.Choice(BENCH_OPS), required=True, help="Collective to measure.")
@click.option("--min-bytes", "-b", type=SIZE, default=None, metavar="B", help="Smallest size (8, 1K, 4M).")
@click.option("--max-bytes", "-e", type=SIZE, default=None, metavar="B", help="Largest size.")
@click.option("--factor", "-f", type=float, default=2.0, show_default=True, help="Size multiplier per step.")
@click.option("--sizes", "sizes_text", default=None, metavar="B,B,...",
              help="Explicit sizes instead of -b/-e/-f (8,1K,64K); engines mpi and torch.")
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
@click.option("--nccl-tests-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="nccl-tests build directory (else NCCL_TESTS_HOME or PATH).")
@_user_errors
def bench(engine: str, backend: str | None, op: str, min_bytes: int | None, max_bytes: int | None, factor: float,
          sizes_text: str | None, iters: int, warmup: int, check: bool, dtype: str, redop: str, root: int,
          in_place: bool, device: str | None, cuda_graph: bool, out: Path | None, timeout_s: float,
          nccl_tests_dir: Path | None) -> None:
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
    """
    if backend is not None and engine != "torch":
        raise click.UsageError("--backend applies to --engine torch only")
    sizes = _parse_sizes(sizes_text)
    if sizes is None and (min_bytes is None or max_bytes is None):
        raise click.UsageError("give --min-bytes and --max-bytes, or --sizes")
    if sizes is not None:
        if engine == "nccl-tests":
            raise click.UsageError("--sizes applies to engines mpi and torch (nccl-tests takes -b/-e/-f)")
        min_bytes, max_bytes = min(sizes), max(sizes)
    assert min_bytes is not None and max_bytes is not None  # checked just above
    backend = backend or "gloo"
    device = device or ("cuda" if engine == "torch" and backend == "nccl" else "cpu")
    spec = BenchSpec(op=op, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor, sizes=sizes,  # type: ignore[arg-type]
                     iters=iters, warmup=warmup, dtype=dtype, redop=redop, root=root, in_place=in_place,  # type: ignore[arg-type]
                     check=check, device=device, cuda_graph=cuda_graph, timeout_s=timeout_s)  # type: ignore[arg-type]
    sink = _Sink(out)
    if engine == "mpi":
        _run_mpi(spec, sink, timeout_s)
    elif engine == "torch":
        _run_torch(spec, backend, sink)
    else:
        _run_nccl_tests(spec, nccl_tests_dir, timeout_s, sink)
    sink.finish()

