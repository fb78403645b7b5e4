"""The geometry of a traced job, and of each call's process group, from what the traces say.

The job (:func:`job_geometry`): ``nranks`` from ``distributedInfo.world_size`` (and the default group's
``pg_size``, and the highest rank traced); ``nnodes`` from the hosts the traces name (a trace's ``host_name``,
the ``<host>_<pid>.<ns>.pt.trace.json`` names of ``tensorboard_trace_handler``, Inspector's ``hostname`` and
``nnodes``): exact only when every rank of the job was traced, else a lower bound; ``nvl_domain`` only from
``--nvl-domain``. A call's group (:func:`group_geometry`): its size and ranks as the reader found them
(:mod:`collscope.traces.pgroups`), and the nodes it spans: the job's when the group is the whole job, the hosts
of its ranks when every one was traced, else ranks in blocks of ``ranks_per_node`` (torchrun's and srun's
default placement, said as an assumption), else unknown. Nothing defaults to one node.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from collscope.geometry import Geometry, GeometryEvidence, Known
from collscope.traces.record import CollectiveCall, RankTrace, TraceClue

__all__ = ["job_geometry", "group_geometry", "group_nodes", "host_from_name", "kineto_clues", "rank_hosts",
           "ranks_text", "traces_gpu", "traces_nccl_version", "NO_NCCL_VERSION"]

_HANDLER_NAME = re.compile(r"^(?:rank\d+_)?(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*)_(?P<pid>\d+)\.\d{16,}\.pt\.trace\.json"
                           r"(?:\.gz)?$")


_KIND = {"kineto": "PyTorch profiler trace", "flight_recorder": "Flight Recorder dump",
         "inspector": "NCCL Inspector record", "inspector_prom": "NCCL Inspector Prometheus file"}


def host_from_name(source: str) -> str | None:
    """The host in a file name ``tensorboard_trace_handler`` gave (``<host>_<pid>.<time_ns>.pt.trace.json``,
    PyTorch ``torch/profiler/profiler.py``); None for any other name."""
    m = _HANDLER_NAME.match(Path(source).name)
    return m.group("host") if m else None


def kineto_clues(info: Mapping[str, Any], host_name: Any, source: str) -> tuple[str | None, tuple[TraceClue, ...]]:
    """(host, clues) of one Kineto trace: ``world_size``, the default group's ``pg_size``, the host."""
    clues: list[TraceClue] = []
    world = info.get("world_size")
    if _pos_int(world):
        clues.append(TraceClue("nranks", world, world, f"world_size {world} in distributedInfo"))
    config = info.get("pg_config")
    for pg in config if isinstance(config, list) else []:
        if isinstance(pg, dict) and pg.get("pg_desc") == "default_pg" and _pos_int(pg.get("pg_size")):
            size = pg["pg_size"]
            clues.append(TraceClue("nranks", size, size, f"pg_size {size} of default_pg in distributedInfo.pg_config"))
    if isinstance(host_name, str) and host_name.strip():
        return host_name.strip(), tuple(clues)
    return host_from_name(source), tuple(clues)


def _pos_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _named_by_all(traces: Iterable[RankTrace], field: str) -> tuple[str | None, list[str], list[int]]:
    """(value, values, ranks): the one value of ``field`` the traces that name it name, with the ranks that do;
    value None when none names it (values empty) or they differ (values sorted)."""
    named: dict[str, list[int]] = defaultdict(list)
    for t in traces:
        value = getattr(t, field)
        if value:
            named[value].append(t.rank)
    if len(named) != 1:
        return None, sorted(named), []
    value, ranks = next(iter(named.items()))
    return value, [value], ranks


def _which(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks: {ranks_text(sorted(ranks))}"


def traces_gpu(traces: Iterable[RankTrace]) -> tuple[str | None, str]:
    """The GPU the traces name, and how that was found: ``(name, evidence)`` when every trace that names one
    names the same; ``(None, why)`` when none does or they differ (a mix is never modelled as one GPU)."""
    name, names, ranks = _named_by_all(traces, "gpu")
    if not names:
        return None, "the traces do not name their GPU"
    if name is None:
        return None, f"the traces name {len(names)} GPUs ({', '.join(names)}): pass --gpu NAME for the model's"
    return name, f"named by the traces' deviceProperties ({_which(ranks)}); --gpu NAME overrides"


NO_NCCL_VERSION = "the traces do not name their NCCL version"


def traces_nccl_version(traces: Iterable[RankTrace]) -> tuple[str | None, str]:
    """The NCCL release the traces name, and how that was found: ``(release, evidence)`` when every trace that
    names one names the same; ``(None, why)`` when none does or they differ."""
    release, releases, ranks = _named_by_all(traces, "nccl_version")
    if not releases:
        return None, NO_NCCL_VERSION
    if release is None:
        return None, f"the traces name {len(releases)} NCCL versions ({', '.join(releases)})"
    return release, f"named by the traces ({_which(ranks)})"


def rank_hosts(traces: Iterable[RankTrace]) -> dict[int, str]:
    """rank -> host, for the traces that name their host."""
    return {t.rank: t.host for t in traces if t.host}


def job_geometry(traces: Sequence[RankTrace], overrides: Mapping[str, int | None] | None = None,
                 source: str = "the traces") -> Geometry:
    """The job's geometry from every trace's clues and the user's overrides (``nranks``, ``nnodes``,
    ``nvl_domain``); ParseError naming two clues that disagree (unless overridden)."""
    ev = GeometryEvidence(source)
    seen: dict[tuple[str, int | None, int | None, str], int] = defaultdict(int)
    for t in traces:
        for c in t.clues:
            seen[(c.name, c.low, c.high, c.says)] += 1
        kind = _KIND.get(t.kind, t.kind)
        if not any(c.name == "nranks" for c in t.clues):
            sizes = [c.group_size for c in t.calls if c.group_size is not None]
            if t.world_size is not None:
                seen[("nranks", t.world_size, None,
                      f"the largest process group of a {kind} has {t.world_size} ranks")] += 1
            elif sizes:
                seen[("nranks", max(sizes), None, f"a call of a {kind} runs on {max(sizes)} ranks")] += 1
        nodes = [c.group_nnodes for c in t.calls if c.group_nnodes is not None]
        if nodes:
            seen[("nnodes", max(nodes), None, f"a communicator of a {kind} spans {max(nodes)} node(s)")] += 1
    for (name, low, high, says), count in seen.items():
        ev.between(name, low, high, says + (f" ({count} traces)" if count > 1 else ""))  # type: ignore[arg-type]
    ranks = sorted({t.rank for t in traces})
    if ranks:
        ev.at_least("nranks", ranks[-1] + 1, f"rank {ranks[-1]} is the highest rank traced")
    every_rank = ev.resolve(overrides).nranks.value
    whole = sorted({c.group_nnodes for t in traces for c in t.calls
                    if c.group_nnodes is not None and every_rank is not None and c.group_size == every_rank})
    for spans in whole:
        ev.exact("nnodes", spans, f"a communicator of all {every_rank} ranks spans {spans} node(s) (Inspector)")
    hosts = rank_hosts(traces)
    if hosts:
        names = sorted(set(hosts.values()))
        shown = ", ".join(names[:4]) + (f", ... ({len(names)})" if len(names) > 4 else "")
        every = ev.resolve(overrides).nranks.value
        if every is not None and len(hosts) == every and set(hosts) == set(range(every)):
            ev.exact("nnodes", len(names), f"hosts of the {every} traced ranks: {len(names)} ({shown})")
            per = {h: sum(1 for x in hosts.values() if x == h) for h in names}
            if len(set(per.values())) == 1:
                ev.exact("ranks_per_node", next(iter(per.values())),
                         f"{next(iter(per.values()))} traced ranks on each host")
        else:
            ev.at_least("nnodes", len(names), f"hosts of the {len(hosts)} traced ranks that name one: "
                                              f"{len(names)} ({shown})")
    return ev.resolve(overrides)


def group_geometry(call: CollectiveCall, job: Geometry) -> Geometry:
    """One call's geometry: the job's fields, and its group's size and ranks with the evidence they were read
    from (``Group size 64 in record_param_comms``, ``Process Group Ranks lists 30 ranks, then '...'``)."""
    group = Known(call.group_size, call.group_evidence) if call.group_size is not None else \
        Known(None, call.group_evidence or ("the trace does not say which process group ran it",))
    return Geometry(nranks=job.nranks, nnodes=job.nnodes, ranks_per_node=job.ranks_per_node,
                    gpus_per_node=job.gpus_per_node, nvl_domain=job.nvl_domain, group_size=group,
                    group_ranks=call.group_ranks, notes=job.notes)


def group_nodes(call: CollectiveCall, job: Geometry, hosts: Mapping[int, str]) -> Known:
    """The nodes a call's group spans (what its model needs), with the evidence; unknown when nothing says."""
    n, ranks = call.group_size, call.group_ranks
    if call.group_nnodes is not None:
        return Known(call.group_nnodes, ("nnodes of the communicator in the trace",))
    if n is None:
        return Known(None, ("the group's size is unknown",))
    if n == job.nranks.value and job.nnodes.known:
        return Known(job.nnodes.value, (f"the group is the whole job: {job.nnodes.describe()}",))
    if ranks is not None and all(r in hosts for r in ranks):
        count = len({hosts[r] for r in ranks})
        return Known(count, (f"hosts of the group's {len(ranks)} ranks: {count}",))
    per = job.ranks_per_node.value
    if ranks is not None and per is not None:
        count = len({r // per for r in ranks})
        return Known(count, (f"ranks {ranks_text(ranks)} in blocks of {per} ranks per node (assumed: torchrun's "
                             "and srun's default placement)",))
    if ranks is None:
        return Known(None, ("the trace does not list the group's ranks",))
    return Known(None, ("ranks per node unknown; pass --nnodes N",))


def ranks_text(ranks: Sequence[int]) -> str:
    """``0..63``, ``0..126 step 2``, or the first 8 ranks and ``...``."""
    if len(ranks) > 2 and all(b - a == ranks[1] - ranks[0] for a, b in zip(ranks, ranks[1:], strict=False)):
        step = ranks[1] - ranks[0]
        return f"{ranks[0]}..{ranks[-1]}" + (f" step {step}" if step != 1 else "")
    return ", ".join(str(r) for r in ranks[:8]) + (", ..." if len(ranks) > 8 else "")
