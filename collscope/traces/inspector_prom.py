"""Read NCCL Inspector's Prometheus text output (``NCCL_INSPECTOR_PROM_DUMP=1``): one file per GPU,
``<dump dir>/nccl_inspector_metrics_<GPU UUID>.prom``, rewritten every dump interval (at least 30 s) for
node_exporter's textfile collector.

Two shapes, both from NCCL's ``plugins/profiler/inspector`` (``inspector_prom.cc``, README):

- NCCL 2.30 and later (``version="v5.1"``): a summary per (communicator, collective, size bucket, algorithm):
  ``nccl_bus_bandwidth_gbs`` (geometric mean) and ``nccl_collective_exec_time_microseconds`` (mean) with labels
  ``version, slurm_job_id, node, gpu, comm_name, n_nodes, nranks, collective, message_size, algo_proto``;
  ``message_size`` a power-of-1024 bucket, ``4-5GB`` = [4 GiB, 5 GiB) of one rank's buffer; ``nccl_p2p_*`` with
  ``p2p_operation`` for sends and receives. No rank, no call count, no time of day.
- Before (2.29): the last collective of each communicator, ``nccl_algorithm_bandwidth_gbs``,
  ``nccl_bus_bandwidth_gbs``, ``nccl_collective_exec_time_microseconds`` with labels ``comm_id, hostname, rank,
  nranks, n_nodes, gpu_device_id, collective, coll_sn, timestamp, message_size`` (``2.00GB``).

Each label set becomes one call: the collective, the time, and its size: 2.29's rounded size, or for a bucket
the size Inspector's own busbw and time imply (busbw / nccl-tests' factor x time), kept within the bucket (its
lower bound when busbw is missing); the communicator (``comm_id`` or ``comm_name``) is the process group,
``nranks`` its size and ``n_nodes`` its node count. ``algo_proto`` (``RING_SIMPLE`` as ``inspector_prom.cc`` joins
NCCL's names, ``Ring_ll`` as the README shows it) is kept, in collscope's spelling, in
:attr:`PromRead.choices` (:func:`read_inspector_prom`), with ``version`` and ``slurm_job_id``. The per-device
counters of ``NCCL_INSPECTOR_PROM_DUMP_STATS=1`` (``nccl_collectives_total``, ``nccl_collectives_dropped_total``,
``nccl_p2p_total``, ``nccl_p2p_dropped_total``; labels ``version, slurm_job_id, node, gpu``) are read: a loss is
warned. Comment lines (``# HELP``) are ignored; other metrics and labels are tolerated, left out and named in a
warning; a sample given twice keeps its last value (a file appended to rather than rewritten).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from collscope.errors import ParseError
from collscope.traces.inspector import INSPECTOR_OPS, inspector_size_bytes
from collscope.traces.inspector_prom_stats import KNOWN_LABELS, STATS_METRICS, PromRead, loss_warning
from collscope.traces.inspector_stream import AlgoProto, parse_algo_proto_label
from collscope.traces.names import op_of
from collscope.traces.record import CollectiveCall, RankTrace
from collscope.vocab.ops import OPS, busbw_factor

__all__ = ["looks_like_inspector_prom", "parse_inspector_prom", "read_inspector_prom", "PromRead",
           "parse_message_size", "parse_prom_line", "COLL_METRICS", "P2P_METRICS", "STATS_METRICS", "KNOWN_LABELS",
           "NO_RANK_WARNING"]

COLL_METRICS = {"nccl_bus_bandwidth_gbs": "busbw_gbps", "nccl_collective_exec_time_microseconds": "time_us",
                "nccl_algorithm_bandwidth_gbs": "algbw_gbps"}
P2P_METRICS = {"nccl_p2p_bus_bandwidth_gbs": "busbw_gbps", "nccl_p2p_exec_time_microseconds": "time_us"}
_UNITS = {"B": 0, "KB": 1, "MB": 2, "GB": 3, "TB": 4}
_BUCKET = re.compile(r"(\d+)-(\d+)([KMGT]?B)")
_EXACT = re.compile(r"(\d+(?:\.\d+)?)([KMGT]?B)")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_GPU = re.compile(r"GPU(\d+)")
NO_RANK_WARNING = ("Inspector's Prometheus output (NCCL 2.30 and later) names a node and a GPU, not a rank: each "
                   "GPU's file is read as one rank, numbered by its GPU index (across nodes: in the order of node, "
                   "then GPU)")
_EXPECTED = "NCCL Inspector Prometheus samples (nccl_bus_bandwidth_gbs{...} / " \
            "nccl_collective_exec_time_microseconds{...} with collective, nranks, message_size labels)"


def looks_like_inspector_prom(head: bytes) -> bool:
    """Among the first lines that are not comments, one is a sample of an Inspector metric with labels."""
    text = head[:65536].decode("utf-8", "replace")
    seen = 0
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = line.partition("{")[0].strip()
        if (name in COLL_METRICS or name in P2P_METRICS) and "{" in line:
            return True
        seen += 1
        if seen >= 20:
            break
    return False


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], value)


def parse_prom_line(line: str) -> tuple[str, dict[str, str], float] | None:
    """``name{a="x",b="y"} 1.5 [timestamp]`` -> (name, labels, value); None when the line is not a sample."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    if "{" in line.partition(" ")[0]:
        name, _, rest = line.partition("{")
        body, brace, tail = rest.rpartition("}")
        if not brace:
            return None
    else:
        name, _, tail = line.partition(" ")
        body = ""
    fields = tail.split()
    if not fields:
        return None
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        m = _LABEL.match(body, pos)
        if m is None:
            return None
        labels[m[1]] = _unescape(m[2])
        pos = m.end()
    try:
        value = float(fields[0])
    except ValueError:
        return None
    return name.strip(), labels, value


def parse_message_size(text: str) -> tuple[int, int | None] | None:
    """``4-5GB`` -> (4 GiB, 5 GiB: a bucket, [low, high)); ``2.00GB`` -> (2 GiB, None); ``0B`` -> (0, None)."""
    m = _BUCKET.fullmatch(text.strip())
    if m:
        unit = 1024 ** _UNITS[m[3]]
        return int(m[1]) * unit, int(m[2]) * unit
    m = _EXACT.fullmatch(text.strip())
    if m:
        return round(float(m[1]) * 1024 ** _UNITS[m[2]]), None
    return None


def _bucket_size(op: str, low: int, high: int, nranks: int, metrics: Mapping[str, float]) -> tuple[int, bool]:
    """nccl-tests' size of a bucket's calls: busbw / factor x time (Inspector's own figures), kept within the
    bucket; its lower bound when busbw is missing (then True)."""
    lo, hi = inspector_size_bytes(op, low, nranks), inspector_size_bytes(op, high, nranks) - 1
    busbw, time_us = metrics.get("busbw_gbps", 0.0), metrics["time_us"]
    factor = busbw_factor(op, nranks) if op in OPS else 0.0
    if not (busbw > 0 and time_us > 0 and factor > 0 and math.isfinite(busbw)):
        return lo, True
    return min(max(round(busbw / factor * 1e9 * time_us * 1e-6), lo), hi), False


def _int(labels: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = labels.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _start_us(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1e6
    except ValueError:
        return 0.0


def parse_inspector_prom(data: bytes, source: str, rank_hint: int | None = None) -> list[RankTrace]:
    """One RankTrace per GPU (``node``/``hostname`` + ``gpu``/``gpu_device_id``) in the file. ``rank_hint`` is
    not used: the file is named by the GPU's UUID, and its labels say the rank (2.29) or the GPU (2.30)."""
    return list(read_inspector_prom(data, source).traces)


def _device(labels: Mapping[str, str]) -> tuple[str, str]:
    return (labels.get("node") or labels.get("hostname") or "", labels.get("gpu") or labels.get("gpu_device_id") or "")


def read_inspector_prom(data: bytes, source: str) -> PromRead:
    """The file's traces (as :func:`parse_inspector_prom`) with each call's algorithm and protocol, the job and
    format the labels name, the per-device counters, and what was left out; ParseError naming the line when a
    sample of a metric it reads is damaged."""
    text = data.decode("utf-8", "replace")
    samples: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    where: dict[tuple[tuple[str, str], ...], int] = {}
    p2p: set[tuple[tuple[str, str], ...]] = set()
    counters: dict[tuple[str, str], dict[str, float]] = {}
    unread: dict[str, int] = {}
    labels_seen: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        parsed = parse_prom_line(line)
        if parsed is None:
            if line.strip() and not line.lstrip().startswith("#") and line.lstrip().startswith("nccl_"):
                raise ParseError(source, lineno, _EXPECTED, found=line.strip())
            continue
        name, labels, value = parsed
        key = tuple(sorted(labels.items()))
        if name in P2P_METRICS:
            p2p.add(key)
        elif name in COLL_METRICS:
            if not math.isfinite(value) or value < 0:
                raise ParseError(source, lineno, f"a finite, non-negative {name}", found=str(value))
            samples.setdefault(key, {})[COLL_METRICS[name]] = value
            where.setdefault(key, lineno)
        elif name in STATS_METRICS:
            if not math.isfinite(value) or value < 0:
                raise ParseError(source, lineno, f"a finite, non-negative counter {name}", found=str(value))
            counters.setdefault(_device(labels), {})[name] = value
        else:
            unread[name] = unread.get(name, 0) + 1
            continue
        labels_seen.update(labels)
    if not samples:
        found = f"only {len(p2p)} point-to-point samples (nccl_p2p_*)" if p2p else "no Inspector samples"
        raise ParseError(source, None, _EXPECTED, found=found)
    devices: dict[tuple[str, str], list[tuple[dict[str, str], dict[str, float], int]]] = {}
    for key, metrics in samples.items():
        labels = dict(key)
        devices.setdefault(_device(labels), []).append((labels, metrics, where[key]))
    read = [_device_trace(source, host, gpu, rows) for (host, gpu), rows in sorted(devices.items())]
    traces = [trace for trace, _ in read]
    index = {device: i for i, device in enumerate(sorted(devices))}
    for device, counts in sorted(counters.items()):
        lost = loss_warning(device, counts)
        if lost:
            i = index.get(device, 0)
            traces[i] = _with_warning(traces[i], lost)
    left = ["Inspector's point-to-point samples (nccl_p2p_*) left out: collscope reads collectives"
            if p2p else "",
            "metrics collscope does not read, left out: " + ", ".join(
                f"{n} ({c} samples)" for n, c in sorted(unread.items())) if unread else "",
            "labels collscope does not read, left out: " + ", ".join(sorted(labels_seen - KNOWN_LABELS))
            if labels_seen - KNOWN_LABELS else ""]
    for note in (x for x in left if x):
        traces[0] = _with_warning(traces[0], note)
    values = {name: tuple(sorted({dict(k)[name] for k in samples if dict(k).get(name)}))
              for name in ("version", "slurm_job_id")}
    return PromRead(traces=tuple(traces), choices=tuple(ch for _, ch in read), versions=values["version"],
                    slurm_job_ids=values["slurm_job_id"], counters=counters, unread_metrics=unread,
                    unread_labels=tuple(sorted(labels_seen - KNOWN_LABELS)))


def _with_warning(trace: RankTrace, warning: str) -> RankTrace:
    return replace(trace, warnings=trace.warnings + (warning,))


def _device_trace(source: str, host: str, gpu: str, rows: list[tuple[dict[str, str], dict[str, float], int]]
                  ) -> tuple[RankTrace, tuple[AlgoProto | None, ...]]:
    calls: list[CollectiveCall] = []
    choices: list[AlgoProto | None] = []
    unread_pairs: set[str] = set()
    buckets = lower_bounds = 0
    rank_of_largest: tuple[int, int] | None = None  # (nranks, rank) of the largest communicator naming a rank
    rows.sort(key=lambda row: row[2])  # the file's order
    for labels, metrics, lineno in rows:
        coll = labels.get("collective", "")
        op = INSPECTOR_OPS.get(coll) or op_of(coll)
        if op is None:
            raise ParseError(source, lineno, "a collective label naming a collective (AllReduce, AllGather, ...)",
                             found=coll)
        nranks = _int(labels, "nranks", "n_ranks")
        if nranks is None or nranks < 1:
            raise ParseError(source, lineno, "an nranks label with the communicator's rank count",
                             found=labels.get("nranks", labels.get("n_ranks", "none")))
        size = parse_message_size(labels.get("message_size", ""))
        if size is None:
            raise ParseError(source, lineno, "a message_size label such as 4-5GB or 2.00GB",
                             found=labels.get("message_size", "none"))
        if "time_us" not in metrics:
            raise ParseError(source, lineno, "nccl_collective_exec_time_microseconds for every label set",
                             found="only " + ", ".join(sorted(metrics)))
        low, high = size
        if high is None:
            total = inspector_size_bytes(op, low, nranks)
        else:
            buckets += 1
            total, at_low = _bucket_size(op, low, high, nranks, metrics)
            lower_bounds += at_low
        pair = labels.get("algo_proto")
        choice = parse_algo_proto_label(pair) if pair else None
        if pair and choice is None and pair.strip().lower() != "unknown_unknown":
            unread_pairs.add(pair)
        choices.append(choice)
        rank = _int(labels, "rank")
        if rank is not None and (rank_of_largest is None or nranks > rank_of_largest[0]):
            rank_of_largest = (nranks, rank)
        calls.append(CollectiveCall(
            rank=0, op=op, size_bytes=total, dtype=None, group_size=nranks,
            process_group=labels.get("comm_id") or labels.get("comm_name") or None, seq=_int(labels, "coll_sn"),
            step=None, start_us=_start_us(labels.get("timestamp")), duration_us=metrics["time_us"], stream=None,
            size_source="inspector", group_nnodes=_int(labels, "n_nodes", "nnodes"),
            algorithm=None if choice is None else choice.algorithm,
            protocol=None if choice is None else choice.protocol))
    gpu_index = _GPU.fullmatch(gpu)
    warnings = []
    if rank_of_largest is not None:
        rank = rank_of_largest[1]
    else:
        rank = int(gpu_index[1]) if gpu_index else 0  # the file is named by the GPU's UUID, not its rank
        warnings.append(NO_RANK_WARNING)
    if buckets:
        warnings.append("Inspector's Prometheus output is a summary per communicator, collective, size bucket and "
                        "algorithm (mean time, geometric-mean busbw, no call count): each bucket is read as one call "
                        "of the mean time, its size Inspector's busbw / factor x that time, kept within the bucket "
                        "(4-5GB: 4 to 5 GiB)")
    if lower_bounds:
        warnings.append(f"{lower_bounds} Inspector buckets without busbw are read at their lower size (4-5GB as "
                        "4 GiB)")
    if unread_pairs:
        warnings.append("algo_proto labels not read as <algorithm>_<protocol> (their calls' algorithm and protocol "
                        "are unknown): " + ", ".join(sorted(unread_pairs)))
    calls = [replace(c, rank=rank) for c in calls]
    return RankTrace(source=source, kind="inspector_prom", rank=rank, world_size=None, backend="nccl", device="gpu",
                     calls=tuple(calls), warnings=tuple(warnings), host=host or None), tuple(choices)
