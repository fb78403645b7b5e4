"""Read a Flight Recorder dump (JSON from ``torch._C._distributed_c10d._dump_fr_trace_json()``).

Entries (format version "2.10" in torch 2.13): ``pg_id``, ``process_group`` ([name, desc]),
``collective_seq_id``, ``profiling_name`` (``nccl:all_reduce``, ``gloo:all_gather``), ``input_sizes`` /
``output_sizes`` and their dtypes, ``time_created_ns``, ``time_discovered_started_ns``, ``duration_ms`` (only with
``TORCH_NCCL_ENABLE_TIMING=1``), ``state``. The dump does not name its rank: it comes from the file name
(``TORCH_FR_DUMP_TEMP_FILE`` + rank). gloo runs reduce_scatter as an all-reduce and records it so.
"""

from __future__ import annotations

from math import prod
from typing import Any

import msgspec

from collscope.errors import ParseError
from collscope.traces.names import dtype_of, element_bytes, op_of
from collscope.traces.record import Backend, CollectiveCall, RankTrace

__all__ = ["FrEntry", "FrDump", "parse_flight_recorder", "looks_like_flight_recorder"]


class FrEntry(msgspec.Struct, gc=False):
    profiling_name: str
    collective_seq_id: int = 0
    pg_id: int | str | None = None
    process_group: list[str] | None = None
    input_sizes: list[list[int]] = []
    output_sizes: list[list[int]] = []
    input_dtypes: list[str] = []
    output_dtypes: list[str] = []
    time_created_ns: int = 0
    time_discovered_started_ns: int | None = None
    duration_ms: float | None = None
    is_p2p: bool = False
    state: str | None = None


class FrDump(msgspec.Struct, gc=False):
    entries: list[FrEntry]
    version: str | None = None
    pg_config: dict[str, Any] | None = None


def looks_like_flight_recorder(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("entries"), list) and "traceEvents" not in doc


def _group_sizes(dump: FrDump) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, cfg in (dump.pg_config or {}).items():
        if isinstance(cfg, dict) and isinstance(cfg.get("ranks"), str):
            ranks = [r for r in cfg["ranks"].strip("[]").split(",") if r.strip()]
            out[str(cfg.get("name") or key)] = len(ranks)
    return out


def parse_flight_recorder(data: bytes, source: str, *, rank: int | None) -> RankTrace:
    try:
        dump = msgspec.json.decode(data, type=FrDump)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ParseError(source, None, "a Flight Recorder dump (entries with profiling_name, "
                         "collective_seq_id, input_sizes)", found=str(exc)) from None
    if rank is None:
        raise ParseError(source, None, "a rank number in the Flight Recorder file name (a dump does not record "
                         "its rank; TORCH_FR_DUMP_TEMP_FILE appends it)")
    sizes = _group_sizes(dump)
    only = next(iter(sizes.values())) if len(sizes) == 1 else None
    calls: list[CollectiveCall] = []
    untimed = 0
    for e in dump.entries:
        op = op_of(e.profiling_name)
        if op is None:
            continue
        pg = e.process_group[0] if e.process_group else (None if e.pg_id is None else str(e.pg_id))
        group = max(sizes.get(pg or "", only or 1), 1)
        dtype = dtype_of(e.input_dtypes[0] if e.input_dtypes else None)
        eb = element_bytes(dtype)
        elems_in = sum(prod(s) for s in e.input_sizes)
        elems_out = sum(prod(s) for s in e.output_sizes)
        size = None
        if eb is not None and (elems_in or elems_out):
            split = op in ("all_gather", "reduce_scatter")
            size = (max(elems_in, elems_out) if split else elems_in) * eb
        start_ns = e.time_discovered_started_ns or e.time_created_ns
        if e.duration_ms is None:
            untimed += 1
        calls.append(CollectiveCall(rank=rank, op=op, size_bytes=size, dtype=dtype, group_size=group,
                                    process_group=pg, seq=e.collective_seq_id, step=None, start_us=start_ns / 1000.0,
                                    duration_us=None if e.duration_ms is None else e.duration_ms * 1000.0,
                                    stream=None, size_source="flight_recorder" if size is not None else "none"))
    warnings = []
    if untimed:
        warnings.append(f"{source}: {untimed} Flight Recorder entries carry no duration (set "
                        "TORCH_NCCL_ENABLE_TIMING=1; gloo records none): sizes and order only")
    names = {e.profiling_name.partition(":")[0] for e in dump.entries}
    backend: Backend = "nccl" if "nccl" in names else "gloo" if "gloo" in names else "unknown"
    world = max(sizes.values()) if sizes else None  # the largest group declared: the default one
    return RankTrace(source=source, kind="flight_recorder", rank=rank, world_size=world, backend=backend,
                     device="cpu", calls=tuple(calls), warnings=tuple(warnings))
