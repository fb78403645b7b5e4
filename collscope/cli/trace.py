"""``collscope trace``: a training job's collectives from its traces, and whether their throughput is goodput."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from collscope.atomic import write_text_atomic
from collscope.cli.options import (
    check_output_file,
    geometry_options,
    gpu_option,
    link_options,
    nic_options,
    parse_settings,
    setting_option,
    topo_option,
)
from collscope.errors import ConfigError, ParseError
from collscope.files import check_output_dir
from collscope.traces.compare import BenchCurves, ModelFigure, ModelFn, bench_curves
from collscope.traces.geometry import NO_NCCL_VERSION, traces_gpu, traces_nccl_version
from collscope.traces.load import read_traces
from collscope.traces.render import render_text
from collscope.traces.report import TraceReport, analyze_traces

if TYPE_CHECKING:
    from collections.abc import Mapping

    from collscope.topo.cluster import Cluster
    from collscope.topo.model import NodeTopology


def _bench(against: str | None) -> BenchCurves | None:
    if against is None:
        return None
    from collscope.analysis.load import load_results

    return bench_curves(load_results(against), against)


def _model(topology: NodeTopology | Cluster | None, gpu: str | None, nvl_domain: int | None, cautions: list[str],
           alpha_us: float | None = None, bw_gbps: float | None = None, nic_gbit: float | None = None,
           nics_per_node: int | None = None, releases: tuple[str, ...] = (),
           settings: Mapping[str, str] | None = None) -> ModelFn | None:
    """NCCL's model's choice per size when it knows the GPU, else the best alpha-beta algorithm, for the nodes
    the call's group spans (the report never asks for a group whose nodes are unknown), under the job's NCCL
    ``settings`` as predict reads them. Why a model gave no figure, what the settings did, and the known NCCL
    defects that its figure does not know, go to ``cautions``."""
    if topology is None and gpu is None and bw_gbps is None:
        if alpha_us is not None:
            raise ConfigError("--alpha-us needs --bw-gbps, --topo or --gpu")
        return None
    from collscope.analysis.model_settings import model_settings
    from collscope.analysis.nccl_model.constants import JUDGING_TABLES, judged_release_notes
    from collscope.analysis.nccl_model.p2p import p2p_ll_note, p2p_ll_sizes
    from collscope.analysis.predict import predict

    cautions.extend(dict.fromkeys(note for release in releases for note in judged_release_notes(release)))

    def busbw(op: str, nranks: int, nnodes: int, sizes: list[int]) -> dict[int, ModelFigure]:
        try:
            result = predict(op, topology=topology, gpu=gpu, nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain,
                             sizes=sizes, alpha_us=alpha_us, bw_gbps=bw_gbps, nic_gbit=nic_gbit,
                             nics_per_node=nics_per_node, version=JUDGING_TABLES, settings=settings)
        except ConfigError as exc:  # an op the models do not cover (hypercube), or links they lack
            cautions.append(f"no model figure for {op} on {nranks} ranks / {nnodes} node(s): {exc}")
            return {}
        ll = p2p_ll_note(op, p2p_ll_sizes(result.nccl_choice), model_settings(settings or {}, op).p2p)
        cautions.extend(n for n in (*result.params.caveats, *result.setting_notes, *result.defects,
                                    *result.fitted_notes, ll)
                        if n and n not in cautions)
        if result.nccl_choice:
            return {c.size_bytes: ModelFigure(c.expected_busbw_gbps, None if band is None else band.brief(),
                                              choice=f"{c.algo}/{c.proto}", ceiling_gbps=c.ceiling_busbw_gbps,
                                              ties=tuple((f"{t.algo}/{t.proto}", t.expected_busbw_gbps)
                                                         for t in c.near_ties))
                    for c, band in zip(result.nccl_choice, result.accuracy, strict=True)}
        best: dict[int, float] = {}
        for p in result.predictions:
            best[p.size_bytes] = max(best.get(p.size_bytes, 0.0), p.busbw_gbps)
        return {size: ModelFigure(bw) for size, bw in best.items()}

    return busbw


@click.command("trace")
@click.argument("paths", nargs=-1, required=True, metavar="FILE|DIR...")
@click.option("--against", default=None, metavar="RESULTS_DIR",
              help="A sweep (results directory or Measurement/nccl-tests files) of the same fabric to compare with.")
@click.option("--nccl-log", "nccl_logs", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="The job's NCCL_DEBUG=INFO log with NCCL_DEBUG_SUBSYS including TUNING "
                                   "(repeatable): which algorithm/protocol NCCL ran per op and size, for calls "
                                   "whose trace does not say; the model figure is then that pair's.")
@topo_option()
@gpu_option
@geometry_options("nranks", "nnodes", "nvl_domain")
@link_options
@nic_options
@setting_option
@click.option("--json", "as_json", is_flag=True, help="Print the trace --json document (DESIGN.md).")
@click.option("--workload-out", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="F",
              help="Write the job's size mix per step (the workload file recommend --workload reads).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="Write a report: per-step timeline (exposed communication in its own colour), "
                                  "busbw per call against the sweep, index.html.")
def trace_command(paths: tuple[str, ...], against: str | None, topo: tuple[str, ...], gpu: str | None,
                  nranks: int | None, nnodes: int | None, nvl_domain: int | None, nccl_logs: tuple[Path, ...],
                  alpha_us: float | None,
                  bw_gbps: float | None, nic_gbit: float | None, nics_per_node: int | None,
                  settings: tuple[str, ...], as_json: bool,
                  workload_out: Path | None, report_dir: Path | None) -> None:
    """A training job's collectives from its traces, next to what the fabric gives at the same sizes.

    Reads PyTorch profiler (Kineto) traces, .json or .json.gz, one file per rank (NCCL or gloo backend),
    Flight Recorder dumps and NCCL Inspector JSONL. Per (op, size): the job's busbw from the transfer time
    (minimum over ranks), the sweep's at that size (--against), the model's (--topo/--gpu; without them, the
    GPU the traces' deviceProperties name), the goodput ratio, and the communication each step leaves exposed,
    split into transfer and waiting for a late peer; per step and rank compute and GPU idle (waiting on the
    host); the ranks the others wait for, with the evidence; what a faster network or no late rank would save
    per step. The job's geometry (ranks, nodes)
    and each call's process group (its size and ranks) are read from the traces, with their evidence;
    --nranks, --nnodes and --nvl-domain override them. Sizes and busbw use the call's group, the model the
    nodes that group spans. Where Inspector's records or the job's NCCL log (--nccl-log) say which algorithm
    and protocol NCCL ran, the model figure is that pair's (the choice's or a near tie's), or the choice's with
    the reason when NCCL ran a pair its model does not pick. The job's NCCL variables (the logs' "set by
    environment" lines; --setting wins) shape the model as predict's --setting does.

    \b
    Example:
      collscope trace traces/ --against results/ --workload-out job.json
      collscope trace rank0.pt.trace.json.gz rank1.pt.trace.json.gz --gpu A100 --json
      collscope trace traces/ --against results/ --report trace-report/
      collscope trace traces/ --gpu H100 --nnodes 16
      collscope trace traces/ --gpu H100 --nnodes 2 --nccl-log nccl-rank0.log
    """
    if workload_out is not None:
        check_output_file(workload_out, "--workload-out")
    if report_dir is not None:
        check_output_dir(report_dir, "--report")
    bench = _bench(against)
    cautions: list[str] = []
    overrides = {"nranks": nranks, "nnodes": nnodes, "nvl_domain": nvl_domain}
    traces = read_traces(paths)
    if not (topo or gpu or bw_gbps) and alpha_us is None:
        gpu, why = traces_gpu(traces)
        if gpu is not None:
            cautions.append(f"the model's GPU, {gpu}: {why}")
    release, why = traces_nccl_version(traces)
    if release is None and why != NO_NCCL_VERSION:
        cautions.append(f"{why}: the ranks of one job should run one NCCL release")
    releases = tuple(sorted({t.nccl_version for t in traces if t.nccl_version}))
    topology = None
    if topo:
        from collscope.analysis.predict import load_topology

        topology = load_topology(topo, gpu=gpu)
    from collscope.analysis.model_settings import merged_settings

    logs = []
    if nccl_logs:
        from collscope.collectives.nccl_log.parse import read_nccl_log

        logs = [read_nccl_log(path) for path in nccl_logs]
    job_settings, disagree = merged_settings([(log.source, log.env) for log in logs], parse_settings(settings))
    cautions.extend(disagree)
    model = _model(topology, gpu, nvl_domain, cautions, alpha_us, bw_gbps, nic_gbit, nics_per_node, releases,
                   job_settings)
    logged = None
    if logs:
        from collscope.traces.ran_pair import logged_pairs

        logged = logged_pairs(logs)
    report = analyze_traces(traces, bench=bench, model=model, overrides=overrides, logged=logged)
    if topology is not None:
        report, cautions = _captured_domain(report, topology, cautions)
    if cautions:
        report = replace(report, warnings=tuple(dict.fromkeys((*report.warnings, *cautions))))
    if not report.collectives:
        solo = report.no_communication
        alone = (f" ({solo['calls']} calls in groups of 1 rank: "
                 + ", ".join(f"{op} x{n}" for op, n in solo["ops"].items()) + "; nothing leaves the GPU)"
                 if solo["calls"] else "")
        click.echo(f"no collectives in {', '.join(report.sources)}{alone}: nothing to report")
        return
    if workload_out is not None:
        workload = report.workload()
        if not workload["workload"]:
            raise ParseError(", ".join(report.sources), None, "collectives with sizes to write a workload "
                             "(profile with record_shapes=True)")
        write_text_atomic(workload_out, json.dumps(workload, indent=2) + "\n")
    if report_dir is not None:
        from collscope.analysis.trace_report import write_trace_report

        page = write_trace_report(report, report_dir, bench=bench)
        click.echo(f"report: {page}", err=True)
    click.echo(_json_text(report.to_dict()) if as_json else render_text(report))


def _captured_domain(report: TraceReport, topology: NodeTopology | Cluster, cautions: list[str]
                     ) -> tuple[TraceReport, list[str]]:
    """The report with the job's NVLink domain from the captures' NVLink partition in its geometry, where the
    traces and --nvl-domain leave it unknown; the caveat the model gave the whole job's group for it is then
    said by the geometry instead (the groups of fewer ranks keep theirs)."""
    from collscope.analysis.params import unstated_domain_note
    from collscope.analysis.params_source import captured_domain

    nranks, nnodes = report.geometry.nranks.value, report.geometry.nnodes.value
    if nranks is None or nnodes is None:
        return report, cautions
    geometry = captured_domain(report.geometry, topology, nranks, nnodes)
    if geometry is report.geometry:
        return report, cautions
    said = geometry.nvl_domain.evidence[0].removeprefix("--topo: ")
    return replace(report, geometry=geometry), [c for c in cautions if c != unstated_domain_note(nranks, nnodes, said)]


_INT_LIST = re.compile(r"\[\s*-?\d+(?:,\s*-?\d+)*\s*\]")


def _json_text(doc: dict[str, object]) -> str:
    """Indented JSON whose lists of integers (a group's ranks) stay on one line each. Only arrays the indent
    spread over lines are joined: a JSON string never holds a raw newline, so text inside strings is untouched."""
    def join(m: re.Match[str]) -> str:
        text = m.group(0)
        return re.sub(r"\s+", " ", text).replace("[ ", "[").replace(" ]", "]") if "\n" in text else text

    return _INT_LIST.sub(join, json.dumps(doc, indent=2))
