"""Process groups: what a trace declares (``distributedInfo.pg_config``) and what each call's metadata says
(``Group size``, ``Process Group Ranks``, ``Global rank start`` / ``stride``), turned into the call's group size
and global ranks, each with the evidence it was read from.

Facts (PyTorch ``torch/csrc/profiler/util.cpp`` ``saveNcclMeta``, ``c10d/Backend.cpp``
``getGlobalRankStartAndStride``): ``Group size`` is the group's size; ``Process Group Ranks`` is a string,
``"[0, 1, 2, 3]"``, cut after 30 ranks as ``"[0, 1, ..., 29, ...]"``; ``Global rank start`` is the first global
rank and ``Global rank stride`` the step between ranks, written only when the ranks are evenly strided (> 0).
Clues that disagree are an error naming both (:class:`collscope.geometry.GeometryEvidence`). A call that names
no group in a trace of several groups of different sizes has an unknown group; a trace that declares no group
at all (older PyTorch) has the world as its only group, and the evidence says it was assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from collscope.errors import ParseError
from collscope.geometry import GeometryEvidence
from collscope.traces.kineto_schema import Args, decode_dims
from collscope.traces.names import op_of
from collscope.traces.nests import Nest
from collscope.vocab.ops import OP_FACTS

__all__ = ["PgInfo", "GroupFacts", "pg_infos", "parse_ranks_text", "call_group", "RANKS_CUT_AFTER",
           "MAX_REBUILT_RANKS"]

RANKS_CUT_AFTER = 30
"""PyTorch writes at most this many ranks in ``Process Group Ranks`` (``kTruncatLength``), then ``...``."""
MAX_REBUILT_RANKS = 1 << 20
"""A group's ranks are rebuilt (start + i x stride, or the whole job's) only up to this many: a damaged or hostile
``Group size`` of 2**31 must not allocate billions of ranks. Larger groups keep their size, ranks unknown."""

_INT = re.compile(r"^-?\d+$")


def parse_ranks_text(text: Any) -> tuple[tuple[int, ...], bool] | None:
    """``"[0, 1, 2]"`` -> ((0, 1, 2), True); ``"[0, 1, ..., 29, ...]"`` (cut) -> ((0, ..., 29), False); a list of
    ints as is. The flag says whether the list is complete. None when it is neither."""
    if isinstance(text, list):
        if all(isinstance(r, int) and not isinstance(r, bool) for r in text):
            return tuple(text), True
        return None
    if not isinstance(text, str):
        return None
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        return None
    items = [item.strip() for item in body[1:-1].split(",") if item.strip()]
    ranks: list[int] = []
    complete = True
    for item in items:
        if item in ("...", "\u2026"):
            complete = False
            break  # what follows a cut (PyTorch writes nothing after it) says nothing more
        if not _INT.match(item):
            return None
        ranks.append(int(item))
    return tuple(ranks), complete


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """One call's process group: its size and global ranks (None: unknown) and the evidence for each."""

    size: int | None
    ranks: tuple[int, ...] | None
    evidence: tuple[str, ...]


@dataclass(slots=True)
class PgInfo:
    sizes: dict[str, int]
    """pg_name -> pg_size."""
    by_uid: dict[str, str]
    """``uid`` (older traces) -> pg_name."""
    ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """pg_name -> its global ranks, when pg_config lists them."""
    descs: dict[str, str] = field(default_factory=dict)
    world: int | None = None
    """``distributedInfo.world_size``."""
    source: str = "<trace>"
    _cache: dict[tuple[Any, ...], GroupFacts] = field(default_factory=dict)

    def name_of(self, key: Any) -> str | None:
        """The group a call names (``Process Group Name`` or ``ID``); the only group when it names none."""
        if key is None:
            return next(iter(self.sizes)) if len(self.sizes) == 1 else None
        text = str(key)
        if text in self.sizes:
            return text
        return self.by_uid.get(text, text)

    def size_of(self, name: str | None) -> int | None:
        return None if name is None else self.sizes.get(name)

    def group(self, name: str | None, *, group_size: int | None = None, ranks_text: Any = None,
              rank_start: Any = None, rank_stride: Any = None, where: str = "record_param_comms",
              list_len: tuple[int, str] | None = None, ratio: tuple[int, str] | None = None) -> GroupFacts:
        """The group of a call that names ``name`` (None: none) with these metadata values (absent: None).

        ``list_len``: (n, what) when the call's tensors say the group size (``c10d::allgather_`` lists one
        output tensor per rank of its group); ``ratio``: (n, what) when a gathering or scattering op's element
        counts differ n-fold (``Out msg nelems`` = n x ``In msg nelems`` of an all_gather), used only when no other
        clue says the size exactly."""
        rank_start = rank_start if _is_int(rank_start) else None
        rank_stride = rank_stride if _is_int(rank_stride) else None
        key = (name, group_size, ranks_text if isinstance(ranks_text, (str, type(None))) else str(ranks_text),
               rank_start, rank_stride, where, list_len, ratio)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._group(name, group_size, ranks_text, rank_start, rank_stride, where,
                                                   list_len, ratio)
        return found

    def _group(self, name: str | None, group_size: int | None, ranks_text: Any, rank_start: Any,
               rank_stride: Any, where: str, list_len: tuple[int, str] | None,
               ratio: tuple[int, str] | None = None) -> GroupFacts:
        ev = GeometryEvidence(self.source)
        label = f"process group '{name}'" if name is not None else "the call's process group"
        if _is_int(group_size) and group_size > 0:
            ev.exact("group_size", group_size, f"Group size {group_size} in {where}")
        listed = parse_ranks_text(ranks_text) if ranks_text is not None else None
        ranks: tuple[int, ...] | None = None
        if listed is not None and listed[0]:
            shown, complete = listed
            if complete:
                ev.exact("group_size", len(shown), f"Process Group Ranks lists {len(shown)} ranks")
                ranks = shown
            else:
                ev.at_least("group_size", len(shown) + 1,
                            f"Process Group Ranks lists {len(shown)} ranks, then '...' (PyTorch cuts it after "
                            f"{RANKS_CUT_AFTER})")
        if name is not None and name in self.sizes:
            ev.exact("group_size", self.sizes[name],
                     f"pg_size {self.sizes[name]} of {label} in distributedInfo.pg_config")
            if ranks is None and name in self.ranks:
                ranks = self.ranks[name]
        elif name is None and self.sizes and len(set(self.sizes.values())) == 1:
            every = next(iter(self.sizes.values()))
            ev.exact("group_size", every, f"every process group in distributedInfo.pg_config has {every} ranks")
        if list_len is not None:
            ev.exact("group_size", list_len[0], list_len[1])
        known_so_far = ev.clues.get("group_size", [])
        if ratio is not None and not any(c.low == c.high for c in known_so_far) and all(
                c.low is None or ratio[0] >= c.low for c in known_so_far):
            ev.exact("group_size", ratio[0], ratio[1])
        assumed = False
        if not ev.clues and not self.sizes and self.world is not None:
            ev.exact("group_size", self.world, f"world_size {self.world} in distributedInfo: the trace declares "
                                               "no process group and the call names none, so the whole job is "
                                               "assumed")
            assumed = True
        elif not ev.clues and self.world is not None and name is not None and self.descs.get(name) == "default_pg":
            ev.exact("group_size", self.world, f"world_size {self.world} in distributedInfo ({label} is "
                                               "default_pg)")
        try:
            known = ev.resolve().group_size
        except ParseError as exc:  # its hint names --group-size, which trace does not have: the trace is damaged
            raise ParseError(self.source, None, f"one size of {label} (the trace's metadata disagree)",
                             found=exc.found) from None
        size: int | None = known.value
        if ranks is None and size is not None:
            ranks = _strided(size, rank_start, rank_stride, listed)
            if ranks is None and size <= MAX_REBUILT_RANKS and (
                    assumed or (name is not None and self.descs.get(name) == "default_pg")):
                ranks = tuple(range(size))
        if ranks is not None and size is not None and len(ranks) != size:
            ranks = None  # a list that does not hold the group: not its ranks
        return GroupFacts(size=size, ranks=ranks, evidence=known.evidence)


def call_group(pgs: PgInfo, name: str | None, meta: Args | None, *, where: str, nest: Nest | None) -> GroupFacts:
    """The group of one call: ``meta`` is its ``record_param_comms`` (or kernel) metadata, ``where`` names
    it in the evidence; a ``c10d::allgather_`` in ``nest`` lists one output tensor per rank of the group as its
    first argument (``Input Dims`` ``[[[n], [n], ...], [[n]], ...]``)."""
    list_len = None
    caller = nest.by_prefix("c10d::allgather_") if nest is not None else None
    if caller is not None and caller.args is not None and len(caller.args.input_dims):
        dims = decode_dims(caller.args.input_dims)
        first = dims[0] if isinstance(dims, list) and dims else None
        if isinstance(first, list) and first and all(isinstance(t, list) for t in first):
            list_len = (len(first), f"the output list of {caller.name} holds {len(first)} tensors")
    if meta is None:
        return pgs.group(name, list_len=list_len)
    return pgs.group(name, group_size=meta.group_size, ranks_text=meta.pg_ranks, rank_start=meta.rank_start,
                     rank_stride=meta.rank_stride, where=where, list_len=list_len, ratio=_ratio(meta, where))


def _ratio(meta: Args, where: str) -> tuple[int, str] | None:
    """n when a gathering (scattering) op's ``Out msg nelems`` is n x its ``In msg nelems`` (the reverse), read
    from the op table; None otherwise."""
    op = op_of(meta.collective) if meta.collective else None
    facts = OP_FACTS.get(op) if op is not None else None
    small, large = meta.in_nelems, meta.out_nelems
    if facts is None or not (_is_int(small) and _is_int(large)) or facts.send_blocks_nranks == facts.recv_blocks_nranks:
        return None
    if facts.send_blocks_nranks:
        small, large = large, small
    if small <= 0 or large % small or large // small < 2:
        return None
    n = large // small
    outer, inner = ("In", "Out") if facts.send_blocks_nranks else ("Out", "In")
    return n, f"{outer} msg nelems {large} = {n} x {inner} msg nelems {small} of {meta.collective} in {where}"


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _strided(size: int, start: Any, stride: Any,
             listed: tuple[tuple[int, ...], bool] | None) -> tuple[int, ...] | None:
    """The ranks ``Global rank start`` + i x ``Global rank stride``, when both are there and agree with the
    ranks listed before a cut."""
    if not (_is_int(start) and _is_int(stride)) or start < 0 or stride <= 0 or size > MAX_REBUILT_RANKS:
        return None
    ranks = tuple(start + i * stride for i in range(size))
    if listed is not None and ranks[:len(listed[0])] != listed[0]:
        return None
    return ranks


def pg_infos(info: dict[str, Any], source: str = "<trace>") -> PgInfo:
    sizes: dict[str, int] = {}
    by_uid: dict[str, str] = {}
    ranks: dict[str, tuple[int, ...]] = {}
    descs: dict[str, str] = {}
    config = info.get("pg_config")
    if isinstance(config, list):
        for pg in config:
            if not isinstance(pg, dict) or "pg_name" not in pg:
                continue
            name = str(pg["pg_name"])
            size: Any = pg.get("pg_size")
            listed = parse_ranks_text(pg.get("ranks"))
            if listed is not None and listed[1] and listed[0]:
                ranks[name] = listed[0]
            if not _is_int(size) and name in ranks:
                size = len(ranks[name])
            if _is_int(size) and size > 0:
                sizes[name] = size
            if isinstance(pg.get("pg_desc"), str):
                descs[name] = pg["pg_desc"]
            if "uid" in pg:
                by_uid[str(pg["uid"])] = name
    world: Any = info.get("world_size")
    return PgInfo(sizes=sizes, by_uid=by_uid, ranks=ranks, descs=descs,
                  world=world if _is_int(world) and world > 0 else None, source=source)
