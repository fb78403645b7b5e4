"""``collscope observe ingest|query|changes``: the fleet's history in a Parquet store, queried with DuckDB."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import click

from collscope.observe.changes import Change, Outlier
from collscope.observe.ingestion import IngestReport, check_cluster, ingest, parse_time_option
from collscope.observe.series import ChangesReport, changes_report, parse_since
from collscope.observe.views import query, rows_of
from collscope.units import format_size

_MTIME_NOTE = "no timestamp in the records: the run time is the file's modification time"


@click.group("observe")
def observe() -> None:
    """The fleet's history: measurements of many runs in one Parquet store, queried with DuckDB SQL.

    \b
    Example:
      collscope observe ingest results/ nightly/*.txt --store /shared/collscope-store --cluster alpha
      collscope observe query "SELECT op, max(busbw_gbps) FROM records GROUP BY op" --store /shared/collscope-store
    """


def _render_ingest(report: IngestReport) -> str:
    lines = [f"added {report.records} records of {report.runs} runs from {report.sources} inputs "
             f"({report.skipped} already in the store) in {report.elapsed_s:.2f} s "
             f"({report.records_per_s:,.0f} records/s)"]
    mtime = [n for n in report.notes if _MTIME_NOTE in n]
    if mtime:
        lines.append(f"note: {len(mtime)} inputs carry no timestamp: their run time is the file's modification time "
                     "(--time sets it)")
    lines += [f"note: {n}" for n in report.notes if _MTIME_NOTE not in n]
    lines += [f"damaged: {p}" for p in report.problems]
    return "\n".join(lines)


@observe.command("ingest")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--store", "store", required=True, metavar="DIR", help="The store directory (created when absent).")
@click.option("--cluster", default=None, metavar="NAME",
              help="The cluster these runs ran on [default: the records' cluster (Slurm's ClusterName), else "
                   "'unknown'].")
@click.option("--time", "time_text", default=None, metavar="ISO",
              help="The run time of inputs whose records carry none (ISO 8601; no zone: UTC) [default: the "
                   "file's modification time, said in a note].")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
def ingest_command(paths: tuple[str, ...], store: str, cluster: str | None, time_text: str | None,
                   as_json: bool) -> None:
    """Add results directories, nccl-tests outputs (text or -J), 'locate --json' and 'trace --json' outputs and
    NCCL Inspector JSON lines to the store.

    Idempotent: an input already in the store (same content hash) is skipped. A damaged input is reported with
    its file and line and left out, the others are ingested (a damaged line of a JSON-lines file: that line
    only); exit 1 then, 0 when everything was read. A killed ingest leaves the store readable; run it again to
    finish.

    \b
    Examples:
      collscope observe ingest results/ --store store/
      collscope observe ingest nightly/ --store store/ --cluster alpha --time 2026-12-01T02:00:00Z
    """
    report = ingest(paths, store, cluster=cluster, time_=parse_time_option(time_text))
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else _render_ingest(report))
    if report.problems:
        raise click.exceptions.Exit(1)


def _plain(value: Any) -> Any:
    """A query value as JSON has it: times in ISO 8601, maps as objects, NaN as null."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.hex()
    return value


def _cell(value: Any) -> str:
    value = _plain(value)
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


@observe.command("query")
@click.argument("sql", metavar="SQL")
@click.option("--store", "store", required=True, metavar="DIR", help="The store directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as a JSON array of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the rows as CSV with a header line.")
def query_command(sql: str, store: str, as_json: bool, as_csv: bool) -> None:
    """DuckDB SQL over the store's views: records (one row per measurement), runs (one per run), sources (one
    per ingested input). Columns: docs/observe.md.

    \b
    Examples:
      collscope observe query "SELECT cluster, nccl_version, count(*) FROM runs GROUP BY ALL" --store store/
      collscope observe query "SELECT run_time, busbw_gbps FROM records WHERE op = 'all_reduce'
          AND size_bytes = 1073741824 ORDER BY run_time" --store store/ --csv > trend.csv
    """
    if as_json and as_csv:
        raise click.UsageError("--json and --csv exclude each other; choose one")
    table = query(store, sql)
    names = table.column_names
    rows = rows_of(table)
    if as_json:
        click.echo(json.dumps([{k: _plain(v) for k, v in row.items()} for row in rows], indent=1))
        return
    if as_csv:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([_cell(row[n]) for n in names] for row in rows)
        click.echo(out.getvalue(), nl=False)
        return
    cells = [[_cell(row[n]) for n in names] for row in rows]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]
    click.echo("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip())
    for c in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())
    click.echo(f"({len(rows)} rows)")


# -- observe export (issue 27 item 6)

@observe.command("export")
@click.option("--prometheus", "prom_path", required=True, metavar="FILE",
              help="The textfile to write (NAME.prom in node_exporter's --collector.textfile.directory); replaced "
                   "atomically.")
@click.option("--store", "store", required=True, metavar="DIR", help="The store directory.")
@click.option("--cluster", default=None, metavar="NAME", help="Only this cluster's series [default: every cluster].")
def export_command(prom_path: str, store: str, cluster: str | None) -> None:
    """Write the latest value of every series (cluster, op, ranks, nodes, settings, dtype, size, engine) in the
    Prometheus text format for node_exporter's textfile collector.

    The metric and label names are NCCL Inspector's where they mean the same (nccl_bus_bandwidth_gbs,
    nccl_collective_exec_time_microseconds; cluster, slurm_job_id, n_nodes, nranks, collective, message_size),
    so Inspector's Grafana dashboard shows these values; collscope adds size_bytes, dtype, settings, engine,
    nccl_version, gpu_model and collscope_observe_run_timestamp_seconds (when the run ran). Run it after each
    ingest (cron).

    \b
    Example:
      collscope observe export --prometheus /var/lib/node_exporter/textfile/collscope.prom --store store/
    """
    from collscope.observe.export import export_prometheus

    report = export_prometheus(store, prom_path, cluster=cluster)
    newest = report.newest_run.isoformat() if report.newest_run else "none"
    click.echo(f"wrote {report.label_sets} series ({report.samples} samples) to {report.path}; newest run {newest}")


def _series_text(c: Change | Outlier) -> str:
    ranks = f"{c.nranks} ranks" if c.nranks is not None else "ranks unknown"
    nodes = f"{c.nnodes} nodes" if c.nnodes is not None else "nodes unknown"
    return f"{c.cluster} {c.op} {ranks} {nodes} {c.dtype or 'dtype unknown'} settings {c.settings}"


def _render_changes(report: ChangesReport) -> str:
    window = f"since {report.since.isoformat(timespec='minutes')}" if report.since else "over the whole store"
    lines = [f"{len(report.changes)} changes ({len(report.regressions)} regressions) and {len(report.outliers)} "
             f"outlying runs in {report.series} series ({report.runs} runs) {window}"]
    for c in report.changes:
        with_ = ", ".join(f"{k} {_cell(b) or '-'} -> {_cell(a) or '-'}" for k, (b, a) in c.coincides_with.items())
        lines.append(
            f"{c.kind.upper()} {_series_text(c)}: {format_size(c.size_min_bytes)}..{format_size(c.size_max_bytes)} "
            f"at {c.at.isoformat(timespec='minutes')}: busbw {c.before_busbw_gbps:.1f} -> {c.after_busbw_gbps:.1f} "
            f"GB/s at {format_size(c.representative_size_bytes)}, {c.change_pct:+.1f}% (95% CI "
            f"{c.ci_low_pct:+.1f}..{c.ci_high_pct:+.1f}%; {c.runs_before} runs before, {c.runs_after} after)")
        lines.append(f"  coincides with: {with_ or 'nothing logged changed'}")
    if report.outliers:
        lines.append("outlying runs (one run off, not a change):")
    for o in report.outliers:
        lines.append(f"  {o.at.isoformat(timespec='minutes')} {_series_text(o)}: {format_size(o.size_min_bytes)}.."
                     f"{format_size(o.size_max_bytes)} {o.deviation_pct:+.1f}% (at {format_size(o.worst_size_bytes)}: "
                     f"{o.busbw_gbps:.1f} vs {o.expected_busbw_gbps:.1f} GB/s) {o.source or ''}".rstrip())
    return "\n".join(lines)


@observe.command("changes")
@click.option("--store", "store", required=True, metavar="DIR", help="The store directory.")
@click.option("--since", "since_text", default="30d", show_default=True, metavar="SPAN|ISO",
              help="Report changes and outliers from this time on: a span back from now (30d, 12h, 2w), an ISO date "
                   "or time, or 'all'. The runs before it (as far back again, at least 30 days) are the baseline.")
@click.option("--cluster", default=None, metavar="NAME", help="Only this cluster [default: every cluster].")
@click.option("--json", "as_json", is_flag=True, help="Print the changes and outliers as JSON.")
def changes_command(store: str, since_text: str, cluster: str | None, as_json: bool) -> None:
    """Change points of busbw per series (cluster, op, ranks, nodes, settings, dtype) over ranges of adjacent
    sizes: a shift sustained for at least 3 runs, beyond 3% and beyond the series' own noise, with its 95%
    bootstrap confidence interval and what changed with it (NCCL version, plugins, node set, fabric, GPU). One
    run far off is an outlier, listed apart. Exit 1 when a regression is found (for cron and CI), 0 otherwise.
    Method: docs/observe.md.

    \b
    Examples:
      collscope observe changes --store /shared/collscope-store
      collscope observe changes --store store/ --since 2026-11-01 --cluster alpha --json
    """
    report = changes_report(store, since=parse_since(since_text, datetime.now(timezone.utc)),
                            cluster=check_cluster(cluster))
    click.echo(json.dumps(report.to_dict(), indent=1) if as_json else _render_changes(report))
    if report.regressions:
        raise click.exceptions.Exit(1)


# -- observe report (issue 27 item 5)

@observe.command("report")
@click.option("--store", "store", required=True, metavar="DIR", help="The store directory.")
@click.option("--out", "out", required=True, metavar="DIR", help="Where index.html and the figures go (created).")
@click.option("--since", default="90d", show_default=True, metavar="SPAN|ISO|all",
              help="Changes at or after this (30d, 12h, 2w back from now, an ISO date or time, or all); the figures "
                   "start earlier, at the baseline observe changes reads.")
@click.option("--cluster", default=None, metavar="NAME", help="Only this cluster's series [default: every cluster].")
def report_command(store: str, out: str, since: str, cluster: str | None) -> None:
    """Write an HTML page (self-contained: figures inlined) with the table of changes and outliers that 'observe
    changes' finds and one trend figure per series: busbw per run at a few sizes, changes marked and annotated
    with what coincided (NCCL version, plugins, nodes, fabric, GPU), outliers ringed.

    \b
    Example:
      collscope observe report --store /shared/collscope-store --out fleet-report/ --since 60d
    """
    from datetime import datetime, timezone

    from collscope.observe.report import write_observe_report
    from collscope.observe.series import parse_since

    now = datetime.now(timezone.utc)
    index = write_observe_report(store, out, since=parse_since(since, now), cluster=cluster, now=now)
    click.echo(f"wrote {index}")
