"""The latest value of every series in the store, as a Prometheus textfile for node_exporter.

One label set per (cluster, op, nranks, nnodes, settings, dtype, size, engine): the values of the newest run that
measured it (the median over that run's records at that size: repeats, in-place and out-of-place), so the
dashboards built for NCCL Inspector's Prometheus output show collscope's data too.

Names follow Inspector's (NCCL ``plugins/profiler/inspector/inspector_prom.cc``, its ``grafana/README.md``) where
they mean the same: the metrics ``nccl_bus_bandwidth_gbs`` (busbw, decimal GB/s),
``nccl_collective_exec_time_microseconds`` (time per call) and 2.29's ``nccl_algorithm_bandwidth_gbs`` (algbw); the
labels ``cluster`` (the dashboard filters on it), ``slurm_job_id``, ``n_nodes``, ``nranks``, ``collective`` (NCCL's
function name: ``AllReduce``) and ``message_size`` (Inspector's bucket of one rank's buffer, ``1-2GB``); a value
that is unknown is ``unknown``, as Inspector writes it. Inspector's labels whose meaning differs are left out:
``version`` (Inspector's output format), ``node`` and ``gpu`` (one GPU of one host: a series spans nodes),
``comm_name``, ``algo_proto`` (what NCCL chose; collscope knows what was forced: ``settings``). collscope's own
labels: ``size_bytes`` (nccl-tests' size, exact), ``dtype``, ``settings`` (canonical K=V text), ``engine``,
``nccl_version``, ``gpu_model``. ``collscope_observe_run_timestamp_seconds`` says when the run behind each label
set ran (node_exporter refuses samples with timestamps, so the time is a value).

Inspector's families are written as Inspector writes them, without ``# HELP``/``# TYPE``: node_exporter merges a
family across the textfiles of its directory and drops one whose HELP differs between files
(prometheus/node_exporter#1885, #2962), so this file can sit beside Inspector's own. The file is replaced
atomically (a temporary ``.NAME.<random>.tmp`` beside it, renamed: the collector reads ``*.prom`` only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from collscope.atomic import write_text_atomic
from collscope.errors import ConfigError
from collscope.observe.views import query, rows_of
from collscope.traces.inspector import inspector_size_bytes
from collscope.vocab.ops import OP_FACTS

__all__ = ["LatestValue", "ExportReport", "latest_values", "render_prometheus", "export_prometheus",
           "message_size_label", "collective_label", "METRICS", "RUN_TIME_METRIC"]

METRICS: tuple[tuple[str, str], ...] = (("nccl_bus_bandwidth_gbs", "busbw_gbps"),
                                        ("nccl_algorithm_bandwidth_gbs", "algbw_gbps"),
                                        ("nccl_collective_exec_time_microseconds", "time_us"))
"""Inspector's metric name -> the :class:`LatestValue` field it carries, in file order."""
RUN_TIME_METRIC = "collscope_observe_run_timestamp_seconds"
_RUN_TIME_HELP = "Unix time of the run whose values the other metrics of this label set carry (collscope observe)"
_UNITS = ("B", "KB", "MB", "GB", "TB")
_UNKNOWN = "unknown"

_LATEST_SQL = """
WITH per_run AS (
  SELECT cluster, op, nranks, nnodes, settings_text, dtype, size_bytes, engine, run_id,
         any_value(run_time) AS run_time, any_value(slurm_job_id) AS slurm_job_id,
         any_value(nccl_version) AS nccl_version, any_value(gpu) AS gpu,
         median(busbw_gbps) AS busbw_gbps, median(algbw_gbps) AS algbw_gbps, median(time_us) AS time_us
  FROM records
  WHERE ok IS NOT FALSE AND op IS NOT NULL AND size_bytes IS NOT NULL {where}
  GROUP BY cluster, op, nranks, nnodes, settings_text, dtype, size_bytes, engine, run_id
)
SELECT * FROM per_run
QUALIFY row_number() OVER (PARTITION BY cluster, op, nranks, nnodes, settings_text, dtype, size_bytes, engine
                           ORDER BY run_time DESC, run_id DESC) = 1
ORDER BY cluster, op, nranks, nnodes, settings_text, dtype, engine, size_bytes
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class LatestValue:
    """The newest run's values of one series at one size."""

    cluster: str
    op: str
    nranks: int | None
    nnodes: int | None
    settings: str
    """Canonical settings text (``settings_text``: sorted K=V joined by ';', or 'default')."""
    dtype: str | None
    size_bytes: int
    """nccl-tests' size (all_gather/reduce_scatter: the gathered total)."""
    engine: str | None
    run_id: str
    run_time: datetime
    slurm_job_id: str | None
    nccl_version: str | None
    gpu: str | None
    busbw_gbps: float | None
    algbw_gbps: float | None
    time_us: float | None
    """Medians over the run's records at this size; None when none of them had the value."""

    def labels(self) -> dict[str, str]:
        """The Prometheus labels: Inspector's first (same names, same meaning), then collscope's."""
        def text(value: Any) -> str:
            return _UNKNOWN if value is None or value == "" else str(value)

        return {"cluster": self.cluster, "slurm_job_id": text(self.slurm_job_id), "n_nodes": text(self.nnodes),
                "nranks": text(self.nranks), "collective": collective_label(self.op),
                "message_size": message_size_label(self.op, self.size_bytes, self.nranks),
                "size_bytes": str(self.size_bytes), "dtype": text(self.dtype), "settings": self.settings,
                "engine": text(self.engine), "nccl_version": text(self.nccl_version), "gpu_model": text(self.gpu)}


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What :func:`export_prometheus` wrote."""

    path: Path
    label_sets: int
    samples: int
    newest_run: datetime | None


def collective_label(op: str) -> str:
    """NCCL's name of ``op`` as Inspector writes it (``ncclFuncToString``: the op table's first kernel name,
    ``AllReduce``); an op NCCL has no function for keeps collscope's name."""
    facts = OP_FACTS.get(op)
    return facts.kernel_names[0] if facts is not None and facts.kernel_names else op


def message_size_label(op: str, size_bytes: int, nranks: int | None) -> str:
    """Inspector's ``message_size`` bucket of one rank's buffer: the size in the largest unit (B, KB, ... TB, powers
    of 1024) that leaves at least 1, floored: ``[n, n+1)`` as ``n-(n+1)UNIT``; ``0B`` for 0 (inspector_prom.cc's
    ``inspectorPromFormatMessageSizeRange``). One rank's buffer is nccl-tests' size divided by the ranks for the
    ops whose size is the total (the inverse of :func:`collscope.traces.inspector.inspector_size_bytes`);
    ``unknown`` when that needs the ranks and they are unknown."""
    total = inspector_size_bytes(op, 1, 2) > 1  # nccl-tests' size of this op is the ranks' total
    if total and not nranks:
        return _UNKNOWN
    value = float(max(size_bytes, 0) // (nranks if total and nranks else 1))
    if value == 0:
        return "0B"
    unit = 0
    while value >= 1024.0 and unit < len(_UNITS) - 1:
        value /= 1024.0
        unit += 1
    lower = max(math.floor(value), 1)
    return f"{lower}-{lower + 1}{_UNITS[unit]}"


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def latest_values(store: str | Path, *, cluster: str | None = None) -> list[LatestValue]:
    """Per series and size, the newest run's values (records whose ``ok`` is false are left out)."""
    where = "" if cluster is None else "AND cluster = '" + cluster.replace("'", "''") + "'"
    rows = rows_of(query(store, _LATEST_SQL.format(where=where)))
    return [LatestValue(cluster=str(r["cluster"]), op=str(r["op"]), nranks=r["nranks"], nnodes=r["nnodes"],
                        settings=str(r["settings_text"] or "default"), dtype=r["dtype"],
                        size_bytes=int(r["size_bytes"]), engine=r["engine"], run_id=str(r["run_id"]),
                        run_time=r["run_time"], slurm_job_id=r["slurm_job_id"], nccl_version=r["nccl_version"],
                        gpu=r["gpu"], busbw_gbps=_number(r["busbw_gbps"]), algbw_gbps=_number(r["algbw_gbps"]),
                        time_us=_number(r["time_us"]))
            for r in rows]


def _escape(value: str) -> str:
    """A label value as the text format quotes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name: str, labels: dict[str, str], value: float) -> str:
    body = ",".join(f'{key}="{_escape(text)}"' for key, text in labels.items())
    return f"{name}{{{body}}} {value!r}"


def render_prometheus(values: list[LatestValue]) -> str:
    """The text exposition format: each family's samples together (the format requires it), Inspector's without
    HELP/TYPE (as Inspector writes them), the run time with both; no timestamps (node_exporter refuses them)."""
    lines: list[str] = []
    for name, field in METRICS:
        for v in values:
            value = getattr(v, field)
            if value is not None:
                lines.append(_sample(name, v.labels(), value))
    if values:
        lines += [f"# HELP {RUN_TIME_METRIC} {_RUN_TIME_HELP}", f"# TYPE {RUN_TIME_METRIC} gauge"]
        lines += [_sample(RUN_TIME_METRIC, v.labels(), float(v.run_time.timestamp())) for v in values]
    return "".join(line + "\n" for line in lines)


def export_prometheus(store: str | Path, path: str | Path, *, cluster: str | None = None) -> ExportReport:
    """Write the latest value of every series (of ``cluster``, or all) to ``path`` for node_exporter's textfile
    collector, atomically. ConfigError when ``path`` does not end in ``.prom`` (the collector reads nothing
    else), its directory is missing, or the store is not a store."""
    target = Path(path)
    if target.suffix != ".prom":
        raise ConfigError(f"{target}: node_exporter's textfile collector reads only files named *.prom; valid: "
                          f"a path like {target.with_suffix('.prom').name} in its --collector.textfile.directory")
    if not target.parent.is_dir():
        raise ConfigError(f"{target}: its directory {target.parent} does not exist; valid: a path in an existing "
                          "directory (node_exporter's --collector.textfile.directory)")
    values = latest_values(store, cluster=cluster)
    text = render_prometheus(values)
    write_text_atomic(target, text)
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    newest = max((v.run_time for v in values), default=None)
    return ExportReport(target, len(values), samples, newest)
