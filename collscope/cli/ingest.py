"""``collscope ingest``: nccl-tests outputs (text of any version, or ``-J`` JSON) -> Measurement records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from collscope.cli.options import check_output_file
from collscope.collectives.nccl_tests.parse import parse_nccl_tests
from collscope.collectives.nccl_tests.records import NcclTestsRun
from collscope.collectives.record import OPS, Measurement, write_jsonl
from collscope.files import read_input_text


def summary_line(name: str, run: NcclTestsRun) -> str:
    """One line per file: op, ranks, sizes, records, average busbw, out-of-bounds status."""
    nodes = f" on {run.nnodes} node{'s' if run.nnodes != 1 else ''}" if run.nnodes else ""
    avg = f"avg busbw {run.avg_busbw_gbps:g} GB/s" if run.avg_busbw_gbps is not None else "no avg busbw line"
    if run.out_of_bounds is None:
        oob = "no out-of-bounds line"
    else:
        oob = f"out-of-bounds {run.out_of_bounds} {'FAILED' if run.oob_failed else 'OK'}"
    wrong = sum(1 for r in run.records if not r.ok)
    bad = f", {wrong} records not ok" if wrong else ""
    return (f"{name}: {run.op}, {run.nranks} ranks{nodes}, {len(run.sizes)} sizes, {len(run.records)} records, "
            f"{avg}, {oob}{bad}")


@click.command("ingest")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--op", type=click.Choice(OPS), default=None,
              help="The collective, for outputs that do not name their binary.")
@click.option("--nranks", type=click.IntRange(min=1), default=None,
              help="Number of ranks, for outputs without a rank list whose bandwidths do not tell it.")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the records of all FILEs to this JSONL file (replaced atomically).")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON lines on stdout.")
def ingest(files: tuple[Path, ...], op: str | None, nranks: int | None, out: Path | None, as_json: bool) -> None:
    """Convert nccl-tests outputs (text of any version, or -J JSON) into Measurement records.

    Prints one summary line per file (op, ranks, sizes, average busbw, out-of-bounds status); with --json the
    records go to stdout as JSON lines and the summaries to stderr. --out replaces the file with the records
    of all FILEs in one atomic write, so rerunning the same command never duplicates records.

    Exit status: 0 all converted; 1 a file reported out-of-bounds or wrong values (its records are still
    written, marked ok=false); 2 a file is not nccl-tests output (one line naming the file and line).

    \b
    Example:
      collscope ingest all_reduce_16r.txt
      collscope ingest logs/*.txt --out results/nccl.jsonl
      collscope ingest table-only.txt --op all_reduce --nranks 64 --json
    """
    if out is not None:
        check_output_file(out, "--out")
    runs: list[tuple[Path, NcclTestsRun]] = []
    for path in files:
        text = read_input_text(path, "an nccl-tests output (UTF-8 text, or -J JSON)")
        runs.append((path, parse_nccl_tests(text, source=str(path), op=op, nranks=nranks)))

    summary = sys.stderr if as_json else sys.stdout
    records: list[Measurement] = []
    for path, run in runs:
        records.extend(run.records)
        click.echo(summary_line(str(path), run), file=summary)
        for warning in run.warnings:
            click.echo(f"note: {path}: {warning}", err=True)
        for error in run.errors:
            click.echo(f"failure: {path}: {error}", err=True)
        if as_json:
            for record in run.records:
                click.echo(json.dumps(record.to_dict(), sort_keys=True))
    if out is not None:
        count = write_jsonl(out, records)
        click.echo(f"wrote {count} records to {out}", err=True)
    if any(run.failed for _, run in runs):
        sys.exit(1)
