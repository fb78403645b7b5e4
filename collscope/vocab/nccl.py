"""NCCL_ALGO / NCCL_PROTO syntax and which algorithm/protocol pairs NCCL can run.

Syntax (``reference/nccl-facts.md`` section 2, NCCL 2.30.7): a comma list of names, case-insensitive, with a
leading ``^`` to exclude them. Since NCCL 2.24 the value may hold ``;``-separated entries ``func:list``; the first
entry may omit ``func:`` and then applies to every function, e.g. ``ring,collnetdirect;allreduce:tree``.

Pairs (section 1.4): Broadcast/Reduce run Ring only; AllGather/ReduceScatter run PAT, Ring, NVLS and
CollNetDirect; AllReduce runs everything except PAT. NVLS, NVLSTree and PAT run only with Simple; CollNet* with
LL or LL128 is unsupported (bandwidth 0). Tree and Ring run with every protocol.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collscope.errors import ConfigError
from collscope.vocab.ops import OP_TABLE, OPS

__all__ = [
    "ALGORITHMS", "PROTOCOLS", "PATH_TYPES", "PATH_LEVELS", "FUNCTIONS", "ALGOS_FOR_FUNC", "OP_FUNC", "SelectEntry",
    "SelectionError", "parse_selection", "format_selection", "enabled", "listed", "covers", "pair_runs",
    "per_function_syntax", "ll128_network_limit", "pxn_disabled", "NET_GDR_DEFAULT_LEVEL", "net_gdr_level",
    "release_major_minor", "SYMMETRIC_KERNELS_FROM", "nccl_param_int", "ignored_unit_note",
]

ALGORITHMS: tuple[str, ...] = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
"""NCCL's algorithms in index order (``ncclAlgoStr``; NCCL <= 2.11 called index 2 ``CollNet``); ties in NCCL's
choice go to the lower index, and logs print the index where they do not print the name."""
PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")
"""NCCL's protocols in index order (``ncclProtoStr``)."""
PATH_TYPES: tuple[str, ...] = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")
"""NCCL's path types, closest first, as its rules compare them with ``<=`` (``src/include/graph.h`` of 2.30.7 and
``topoPathTypeStr`` since 2.28.3: P2C 6 before PXN 7; 2.27 numbered PXN 6 before P2C 7; 2.19-2.26 had neither C2C
nor P2C, and their other types keep this order)."""
PATH_LEVELS: tuple[str, ...] = PATH_TYPES[:PATH_TYPES.index("SYS") + 1]
"""The path types a level variable names (``NCCL_NET_GDR_LEVEL``, ``NCCL_P2P_LEVEL``): LOC .. SYS."""
FUNCTIONS: tuple[str, ...] = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
"""NCCL's collective functions that NCCL_ALGO/NCCL_PROTO can select for (``ncclFuncStr``)."""

ALGOS_FOR_FUNC: dict[str, frozenset[str]] = {
    "Broadcast": frozenset({"Ring"}),
    "Reduce": frozenset({"Ring"}),
    "AllGather": frozenset({"PAT", "Ring", "NVLS", "CollNetDirect"}),
    "ReduceScatter": frozenset({"PAT", "Ring", "NVLS", "CollNetDirect"}),
    "AllReduce": frozenset(set(ALGORITHMS) - {"PAT"}),
}
"""NCCL function -> algorithms NCCL's tuning model has for it (``ncclTopoTuneModel``)."""

OP_FUNC: dict[str, str] = {row.name: row.nccl_func for row in OP_TABLE if row.nccl_func}
"""collscope op -> NCCL function (the op table's). Ops not here (alltoall, sendrecv, ...) are point-to-point:
NCCL_ALGO and NCCL_PROTO do not apply to them."""

if not set(OP_FUNC) <= set(OPS) or set(OP_FUNC.values()) != set(FUNCTIONS) or set(ALGOS_FOR_FUNC) != set(FUNCTIONS):
    raise AssertionError("OP_FUNC / ALGOS_FOR_FUNC disagree with OPS or FUNCTIONS")

_SIMPLE_ONLY = frozenset({"NVLS", "NVLSTree", "PAT", "CollNetDirect", "CollNetChain"})


class SelectionError(ConfigError):
    """An invalid NCCL_ALGO/NCCL_PROTO value; ``problem`` says what is wrong without the valid values."""

    def __init__(self, env: str, text: str, problem: str, valid: str) -> None:
        self.problem = problem
        super().__init__(f"{env}={text!r}: {problem}; valid: {valid}")


@dataclass(frozen=True, slots=True)
class SelectEntry:
    """One ``;``-separated entry: the function it applies to (None = all), exclusion, and the names."""

    func: str | None
    exclude: bool
    names: tuple[str, ...]


def _canon(vocabulary: tuple[str, ...]) -> dict[str, str]:
    return {v.lower(): v for v in vocabulary}


def parse_selection(text: str, vocabulary: tuple[str, ...], env: str) -> tuple[SelectEntry, ...]:
    """Parse an NCCL_ALGO/NCCL_PROTO value; SelectionError (a ConfigError) names the bad token and the valid ones."""
    names = _canon(vocabulary)
    funcs = _canon(FUNCTIONS)
    valid = f"{', '.join(vocabulary)} (case-insensitive, '^' to exclude, 'func:list;func:list' per function " \
            f"with func in {', '.join(FUNCTIONS)})"
    if not text.strip():
        raise SelectionError(env, text, "empty value", valid)
    entries: list[SelectEntry] = []
    seen_funcs: set[str | None] = set()
    for i, raw in enumerate(text.split(";")):
        part = raw.strip()
        func: str | None = None
        if ":" in part:
            fname, _, part = part.partition(":")
            fname = fname.strip()
            if fname.lower() not in funcs:
                raise SelectionError(env, text, f"unknown function {fname!r}", valid)
            func = funcs[fname.lower()]
            part = part.strip()
        elif i > 0:
            raise SelectionError(env, text, f"entry {i + 1} ({raw!r}) needs a 'func:' prefix (only the first "
                                 "entry may omit it)", valid)
        if func in seen_funcs:
            raise SelectionError(env, text, f"{func or 'the all-functions entry'} is given twice", valid)
        seen_funcs.add(func)
        exclude = part.startswith("^")
        if exclude:
            part = part[1:]
        tokens = [t.strip() for t in part.split(",")]
        if not tokens or any(not t for t in tokens):
            raise SelectionError(env, text, f"empty name in entry {raw!r}", valid)
        out: list[str] = []
        for tok in tokens:
            if tok.lower() not in names:
                raise SelectionError(env, text, f"unknown name {tok!r}", valid)
            if names[tok.lower()] not in out:
                out.append(names[tok.lower()])
        entries.append(SelectEntry(func, exclude, tuple(out)))
    return tuple(entries)


def format_selection(entries: tuple[SelectEntry, ...]) -> str:
    """The normalised text: canonical spelling, no spaces."""
    parts = []
    for e in entries:
        body = ("^" if e.exclude else "") + ",".join(e.names)
        parts.append(body if e.func is None else f"{e.func}:{body}")
    return ";".join(parts)


def per_function_syntax(entries: tuple[SelectEntry, ...]) -> bool:
    """True when the value uses the NCCL 2.24+ ``func:list`` syntax."""
    return any(e.func is not None for e in entries)


def _entry_for(entries: tuple[SelectEntry, ...], func: str) -> SelectEntry | None:
    for e in entries:
        if e.func == func:
            return e
    for e in entries:
        if e.func is None:
            return e
    return None


def enabled(entries: tuple[SelectEntry, ...], func: str, universe: tuple[str, ...]) -> frozenset[str]:
    """The names the value leaves enabled for ``func`` (its own entry, else the all-functions entry)."""
    e = _entry_for(entries, func)
    if e is None:
        return frozenset(universe)
    return frozenset(universe) - set(e.names) if e.exclude else frozenset(e.names)


def covers(entries: tuple[SelectEntry, ...], func: str) -> bool:
    """Whether the value has an entry for ``func`` (its own, or the all-functions one): NCCL then sets every name
    of ``func`` to enabled or disabled (src/graph/tuning.cc ``parseList``), LL128's "by default only where tested"
    state included."""
    return _entry_for(entries, func) is not None


def listed(entries: tuple[SelectEntry, ...], func: str) -> frozenset[str]:
    """The names explicitly forced (not excluded) for ``func``; empty when nothing is forced."""
    e = _entry_for(entries, func)
    return frozenset() if e is None or e.exclude else frozenset(e.names)


def pair_runs(algo: str, proto: str) -> bool:
    """Whether NCCL ever runs ``algo`` with ``proto``."""
    return proto == "Simple" or algo not in _SIMPLE_ONLY


def ll128_network_limit(sm: int) -> str:
    """The farthest network path (a graph's ``typeInter``) on which NCCL enables LL128 by default: PXN on Hopper and
    newer (``NCCL_LL128_C2C=1``, the default), PXB before (src/graph/tuning.cc ``ncclTopoTuneModel``)."""
    return "PXN" if sm >= 90 else "PXB"


def pxn_disabled(value: str | None) -> bool:
    """Whether ``NCCL_PXN_DISABLE`` as set turns PXN off: only the integer 1 does (src/graph/paths.cc
    ``ncclTopoComputePaths`` keeps its relays while ``ncclPxnDisable(comm) != 1``; NCCL reads the value with
    strtoll, so ``01`` is 1 too)."""
    text = (value or "").strip()
    return text.isascii() and text.isdigit() and int(text) == 1


NET_GDR_DEFAULT_LEVEL = "PXB"
"""The ``NCCL_NET_GDR_LEVEL`` NCCL takes when it is unset (src/graph/paths.cc ncclTopoCheckGdr: ``PATH_PXB``)."""
_LEGACY_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")
"""The path types of the old integer levels 0..5 (src/graph/paths.cc ``levelsOldToNew``; larger is the last)."""


def net_gdr_level(value: str | None) -> str:
    """The level NCCL reads from ``NCCL_NET_GDR_LEVEL`` as set (``None``: :data:`NET_GDR_DEFAULT_LEVEL`), as a path
    type name: one of :data:`PATH_LEVELS` matched exactly (upper case) or an old integer level (src/graph/paths.cc
    ``ncclGetLevel``, which logs the result as ``NCCL_NET_GDR_LEVEL set by environment to LOC``). ConfigError for a
    value NCCL does not read."""
    if value is None:
        return NET_GDR_DEFAULT_LEVEL
    text = value.strip()
    if text in PATH_LEVELS:
        return text
    if text.isascii() and text.isdigit():
        return _LEGACY_LEVELS[min(int(text), len(_LEGACY_LEVELS) - 1)]
    raise ConfigError(f"NCCL_NET_GDR_LEVEL {value!r} is not a level NCCL reads; valid: "
                      f"{', '.join(PATH_LEVELS)} (exact upper case) or 0-5")


_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(?:-\d+)?(?:\+\S*)?")


def release_major_minor(release: str) -> tuple[int, int] | None:
    """(2, 32) for an NCCL release as runs print it (``"2.32.6-1+cuda13.0"``, ``"2.27.3"``, ``"2.30"``); None when
    the text is not one."""
    match = _RELEASE.fullmatch(release.strip())
    return (int(match[1]), int(match[2])) if match else None


SYMMETRIC_KERNELS_FROM = (2, 27)
"""The first NCCL release with symmetric-memory kernels (``ncclCommWindowRegister`` with
``NCCL_WIN_COLL_SYMMETRIC``; shared/reference/nccl-2025-2026.md, 2.27.3), which nccl-tests' ``-R 2`` registers
its buffers for (it falls back to local registration before 2.27)."""


_STRTOLL = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def nccl_param_int(text: str) -> tuple[int, str]:
    """An integer NCCL variable as NCCL reads it: ``strtoll(value, NULL, 0)`` (src/misc/param.cc ncclLoadParam),
    so ``0x`` is hex, a leading 0 octal, and reading stops at the first other character: ``"128K"`` is 128, not
    131072, and a value with no digits is 0. Returns (the value, the characters NCCL ignored)."""
    m = _STRTOLL.match(text)
    if m is None:
        return 0, text
    sign, digits = m.groups()
    value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8) if digits.startswith("0") else int(digits)
    return (-value if sign == "-" else value), text[m.end():]


def ignored_unit_note(name: str, text: str, value: int, ignored: str) -> str:
    """What to say of a byte count ``name=text`` that :func:`nccl_param_int` read as ``value``, ignoring
    ``ignored`` (a unit such as ``K``)."""
    return (f"{name}={text}: NCCL reads it with strtoll (src/misc/param.cc), as {value}: it ignores {ignored!r}, "
            f"which is not a unit to NCCL; write the bytes ({name}=<integer>)")
