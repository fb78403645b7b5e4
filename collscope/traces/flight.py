"""Read a Flight Recorder dump: JSON (``torch._C._distributed_c10d._dump_fr_trace_json()``) here, the default
pickle through :mod:`collscope.traces.flight_pickle`, both into the same records.

Entries (format version "2.10" in torch 2.13): ``pg_id``, ``process_group`` ([name, desc]),
``collective_seq_id``, ``profiling_name`` (``nccl:all_reduce``, ``gloo:all_gather``), ``input_sizes`` /
``output_sizes`` and their dtypes, ``time_created_ns``, ``time_discovered_started_ns``, ``duration_ms`` (only with
``TORCH_NCCL_ENABLE_TIMING=1``), ``state``. The dump does not name its rank: it comes from the file name
(``TORCH_FR_DUMP_TEMP_FILE`` + rank). gloo runs reduce_scatter as an all-reduce and records it so.
``pg_config`` maps each group name to ``{name, desc, ranks}``, ``ranks`` a string (``"[0, 1, 2, 3]"``): each call
carries its group's ranks. The JSON dump leaves ``entries`` out when there are none, and writes the keys sorted
(``entries`` before ``pg_config``); the pickle writes ``version`` and ``pg_config`` first, ``None`` where JSON has
0 for a time not yet seen, ints where JSON has strings in ``pg_status``.
"""

from __future__ import annotations

from math import prod
from typing import Any

import msgspec

from collscope.errors import ParseError
from collscope.traces.names import dtype_of, element_bytes, op_of
from collscope.traces.record import Backend, CollectiveCall, RankTrace, TraceClue, release_text
from collscope.vocab.ops import SPLIT_OPS

__all__ = ["FrEntry", "FrDump", "parse_flight_json", "looks_like_flight_json", "flight_recorder_from_doc"]


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
    entries: list[FrEntry] = []
    version: str | None = None
    comm_lib_version: Any = None
    """The communication library's version: NCCL's for an nccl process group (torch 2.13's FlightRecorder.hpp
    ``comm_lib_version_key``)."""
    nccl_version: Any = None
    """The same under its earlier name (c10d FlightRecorder's ``nccl_version`` key)."""
    pg_config: dict[str, Any] | None = None


_EXPECTED = "a Flight Recorder dump (entries with profiling_name, collective_seq_id, input_sizes)"
_FR_KEYS = (b'"entries"', b'"pg_config"', b'"pg_status"')


def looks_like_flight_json(head: bytes) -> bool:
    return head.lstrip()[:1] == b"{" and any(key in head for key in _FR_KEYS)


def _ranks_of(value: Any) -> tuple[int, ...] | None:
    """``"[0, 1, 2]"`` (as PyTorch writes it) or a list of ints -> the ranks; None when it is neither."""
    items: list[Any]
    if isinstance(value, str):
        items = [r.strip() for r in value.strip().strip("[]").split(",") if r.strip()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return None
    try:
        return tuple(int(r) for r in items)
    except (TypeError, ValueError):
        return None


def _group_ranks(dump: FrDump) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for key, cfg in (dump.pg_config or {}).items():
        if isinstance(cfg, dict):
            ranks = _ranks_of(cfg.get("ranks"))
            if ranks is not None:
                out[str(cfg.get("name") or key)] = ranks
    return out


def parse_flight_json(data: bytes, source: str, rank_hint: int | None) -> list[RankTrace]:
    try:
        dump = msgspec.json.decode(data, type=FrDump)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ParseError(source, None, _EXPECTED, found=str(exc)) from None
    return [_trace(dump, source, rank_hint)]


def flight_recorder_from_doc(doc: dict[str, Any], source: str, *, rank: int | None) -> RankTrace:
    """The rank trace of a dump already decoded to plain Python data (the pickle form)."""
    try:
        dump = msgspec.convert(doc, type=FrDump)
    except msgspec.ValidationError as exc:
        raise ParseError(source, None, _EXPECTED, found=str(exc)) from None
    return _trace(dump, source, rank)


def _trace(dump: FrDump, source: str, rank: int | None) -> RankTrace:
    if rank is None:
        raise ParseError(source, None, "a rank number in the Flight Recorder file name (a dump does not record "
                         "its rank; TORCH_FR_DUMP_TEMP_FILE appends it)")
    groups = _group_ranks(dump)
    sizes = {name: len(ranks) for name, ranks in groups.items()}
    only = next(iter(groups)) if len(groups) == 1 else None
    # torch 2.13's gloo dumps: pg_config's one entry is unnamed ('') while every call names it '0'/'default_pg'
    unnamed_default = only == "" and any(_is_default(e.process_group) for e in dump.entries)
    calls: list[CollectiveCall] = []
    untimed = 0
    for e in dump.entries:
        op = op_of(e.profiling_name)
        if op is None:
            continue
        pg = e.process_group[0] if e.process_group else (None if e.pg_id is None else str(e.pg_id))
        known = pg if pg in groups else (None if e.process_group else only)  # a named group pg_config lacks
        if known is None and unnamed_default and _is_default(e.process_group):
            known = only
        group = max(sizes[known], 1) if known is not None else None  # not named in pg_config: unknown
        said = (f"pg_config lists {group} ranks for process group '{known}'"
                + (" (the dump's only group)" if known != pg else ""),) if known is not None else ()
        if known == "" and pg != "":
            said = (f"pg_config's only group (unnamed) lists {group} ranks; the calls name '{pg}' (default_pg)",)
        dtype = dtype_of(e.input_dtypes[0] if e.input_dtypes else None)
        eb = element_bytes(dtype)
        elems_in = sum(prod(s) for s in e.input_sizes)
        elems_out = sum(prod(s) for s in e.output_sizes)
        size = None
        if eb is not None and (elems_in or elems_out):
            split = op in SPLIT_OPS
            size = (max(elems_in, elems_out) if split else elems_in) * eb
        start_ns = e.time_discovered_started_ns or e.time_created_ns
        if e.duration_ms is None:
            untimed += 1
        calls.append(CollectiveCall(rank=rank, op=op, size_bytes=size, dtype=dtype, group_size=group,
                                    process_group=pg, seq=e.collective_seq_id, step=None, start_us=start_ns / 1000.0,
                                    duration_us=None if e.duration_ms is None else e.duration_ms * 1000.0,
                                    stream=None, size_source="flight_recorder" if size is not None else "none",
                                    group_ranks=groups.get(known) if known is not None else None,
                                    group_evidence=said))
    warnings = []
    if untimed:
        warnings.append(f"{source}: {untimed} Flight Recorder entries carry no duration (set "
                        "TORCH_NCCL_ENABLE_TIMING=1; gloo records none): sizes and order only")
    names = {e.profiling_name.partition(":")[0] for e in dump.entries}
    on_nccl = "nccl" in names  # the dump's library version is NCCL's only then
    backend: Backend = "nccl" if on_nccl else "gloo" if "gloo" in names else "unknown"
    world = max(sizes.values()) if sizes else None  # the largest group declared: the default one
    defaults = [str(cfg.get("name") or key) for key, cfg in (dump.pg_config or {}).items()
                if isinstance(cfg, dict) and cfg.get("desc") == "default_pg"]
    if unnamed_default and "" not in defaults:
        defaults.append("")
    clues = tuple(TraceClue("nranks", len(groups[name]), len(groups[name]),
                            f"default_pg lists {len(groups[name])} ranks in the Flight Recorder pg_config")
                  for name in defaults if groups.get(name))
    return RankTrace(source=source, kind="flight_recorder", rank=rank, world_size=world, backend=backend,
                     device="cpu", calls=tuple(calls), warnings=tuple(warnings), clues=clues,
                     nccl_version=release_text(dump.comm_lib_version or dump.nccl_version) if on_nccl else None)


def _is_default(process_group: list[str] | None) -> bool:
    """An entry's ``process_group`` is ``[name, desc]``; the default group's desc is ``default_pg``."""
    return (process_group or [])[1:2] == ["default_pg"]
