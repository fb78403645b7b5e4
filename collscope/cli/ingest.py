"""``collscope ingest``: nccl-tests outputs (text of any version, or ``-J`` JSON) -> Measurement records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from collscope.cli.options import check_output_file, geometry_options
from collscope.collectives.nccl_tests.reading import text_cap
from collscope.collectives.nccl_tests.records import NcclTestsRun
from collscope.collectives.nccl_tests.runs import parse_nccl_tests_runs
from collscope.collectives.record import OPS, Measurement, write_jsonl
from collscope.files import read_input_text


def summary_line(name: str, run: NcclTestsRun) -> str:
    """One line per run: op, ranks, nodes (or "nodes unknown"), sizes, records, average busbw, out-of-bounds."""
    nodes = f" on {run.nnodes} node{'s' if run.nnodes != 1 else ''}" if run.nnodes else " (nodes unknown)"
    avg = f"avg busbw {run.avg_busbw_gbps:g} GB/s" if run.avg_busbw_gbps is not None else "no avg busbw line"
    if run.out_of_bounds is None:
        oob = "no out-of-bounds line"
    else:
        oob = f"out-of-bounds {run.out_of_bounds} {'FAILED' if run.oob_failed else 'OK'}"
    wrong = sum(1 for r in run.records if not r.ok)
    bad = f", {wrong} records not ok" if wrong else ""
    library = f" ({run.backend})" if run.backend != "nccl" else ""
    return (f"{name}: {run.op}{library}, {run.nranks} ranks{nodes}, {len(run.sizes)} sizes, "
            f"{len(run.records)} records, {avg}, {oob}{bad}")


def geometry_lines(run: NcclTestsRun) -> list[str]:
    """The op and the geometry of a run, one line each with its evidence (an unknown field says so)."""
    return [f"op: {run.op} ({run.op_evidence})", *run.geometry.lines()]


def geometry_json(name: str, run: NcclTestsRun) -> dict[str, object]:
    """The object ``ingest --json`` writes on stderr after a run's summary line."""
    return {"file": name, "op": run.op, "op_evidence": run.op_evidence, "geometry": run.geometry.to_json()}


@click.command("ingest")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@geometry_options("nranks", "nnodes", "nvl_domain", "op", op_choices=OPS)
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the records of all FILEs to this JSONL file (replaced atomically).")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON lines on stdout.")
def ingest(files: tuple[Path, ...], nranks: int | None, nnodes: int | None, nvl_domain: int | None, op: str | None,
           out: Path | None, as_json: bool) -> None:
    """Convert nccl-tests outputs (text of any version, or -J JSON) into Measurement records.

    Prints one summary line per run (op, ranks, sizes, average busbw, out-of-bounds status; a file holding several
    pasted runs gives one per run); with --json the records go to stdout as JSON lines and the summaries to stderr.
    Launcher prefixes ([1,0]<stdout>:, srun -l labels, host:, timestamps) are stripped, and said so in a note.
    --out replaces the file with the records of all FILEs in one atomic write, so rerunning the same command
    never duplicates records.

    Below each summary line, indented: the op and the job's geometry (ranks, nodes, ranks and GPUs per node,
    NVLink domain), each with the evidence it was read from (rank lines, NCCL INFO lines, the launch command,
    busbw/algbw) or said to be unknown. --nranks, --nnodes, --nvl-domain and --op override what the output
    says (a note names the clue that disagreed); a complete rank list that does not show the --nranks passed is
    refused. With --json, stderr gets each run's summary line followed by one JSON line {"file", "op",
    "op_evidence", "geometry"} (docs/formats.md, "Geometry").

    Exit status: 0 all converted; 1 a file reported out-of-bounds or wrong values (its records are still
    written, marked ok=false); 2 a file is not nccl-tests output (one line naming the file and line).

    \b
    Example:
      collscope ingest all_reduce_16r.txt
      collscope ingest logs/*.txt --out results/nccl.jsonl
      collscope ingest table-only.txt --op all_reduce --nranks 64 --json
      collscope ingest nvl72-last-rank-line.txt --nnodes 18 --nvl-domain 72
    """
    if out is not None:
        check_output_file(out, "--out")
    runs: list[tuple[str, NcclTestsRun]] = []
    for path in files:
        cap, why = text_cap()
        text = read_input_text(path, "an nccl-tests output (UTF-8 text, or -J JSON)", max_bytes=cap, why_capped=why)
        found = parse_nccl_tests_runs(text, source=str(path), op=op, nranks=nranks, nnodes=nnodes,
                                      nvl_domain=nvl_domain)
        runs += [(f"{path} (run {i} of {len(found)})" if len(found) > 1 else str(path), run)
                 for i, run in enumerate(found, 1)]

    summary = sys.stderr if as_json else sys.stdout
    records: list[Measurement] = []
    for name, run in runs:
        records.extend(run.records)
        click.echo(summary_line(name, run), file=summary)
        if as_json:
            click.echo(json.dumps(geometry_json(name, run), sort_keys=True), file=summary)
        else:
            for line in geometry_lines(run):
                click.echo(f"  {line}")
        for warning in run.warnings:
            click.echo(f"note: {name}: {warning}", err=True)
        for error in run.errors:
            click.echo(f"failure: {name}: {error}", err=True)
        if as_json:
            for record in run.records:
                click.echo(json.dumps(record.to_dict(), sort_keys=True))
    if out is not None:
        count = write_jsonl(out, records)
        click.echo(f"wrote {count} records to {out}", err=True)
    if any(run.failed for _, run in runs):
        sys.exit(1)
