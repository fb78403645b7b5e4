"""NCCL's TUNING output: the latency/bandwidth table rank 0 prints, and the per-operation choice lines.

Two table layouts exist (``src/graph/tuning.cc``):

* NCCL 2.5.6 to 2.17: one wide table. ``Latency/AlgBw |    Tree/    LL |    Tree/ LL128 | ...``, then
  `` Max NThreads |`` and one row per function (``    Broadcast |     0.0/   0.0 | ...``).
* NCCL 2.18.1 and later: blocks of three algorithms. ``  Algorithm   |`` (one centred name per three
  cells), ``  Protocol    |`` (``LL | LL128 | Simple`` per algorithm), `` Max NThreads |``, then the rows.

Each cell is ``latency_us/algbw_gbps`` (``%8.1f/%6.1f``); a disabled (function, algorithm, protocol) shows
bandwidth 0.0. The choice per operation is ``AllReduce: 16777216 Bytes -> Algo TREE proto LL128 ...``
(2.24+, names), ``AllReduce: 1024 Bytes -> Algo 1 proto 2 time 12.5`` (2.23, numeric ids) or
``1024 Bytes -> Algo 1 proto 2 time 12.5`` (2.21-2.22 and TRACE builds, without the function).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from collscope.vocab.nccl import ALGORITHMS, PROTOCOLS

__all__ = [
    "AlgoChoice",
    "TuningTable",
    "TuningCollector",
    "normalize_algorithm",
    "normalize_protocol",
    "parse_algo_choice",
]

_ALGO_KEYS = {name.lower().replace("_", ""): name for name in ALGORITHMS} | {"collnet": "CollNetDirect"}
_PROTO_KEYS = {name.lower(): name for name in PROTOCOLS}

_OLD_HEADER = re.compile(r"^\s*Latency/AlgBw\s*\|(.*)$")
_ALGO_HEADER = re.compile(r"^\s*Algorithm\s*\|(.*)$")
_PROTO_HEADER = re.compile(r"^\s*Protocol\s*\|(.*)$")
_NTHREADS = re.compile(r"^\s*Max NThreads\s*\|(.*)$")
_ROW = re.compile(r"^\s*([A-Z][A-Za-z]+)\s*\|((?:\s*-?[\d.]+/\s*-?[\d.]+\s*\|)+)\s*$")
_CELL = re.compile(r"\s*(-?\d+(?:\.\d*)?)/\s*(-?\d+(?:\.\d*)?)\s*\|")

_CHOICE = re.compile(
    r"^\s*(?:(?P<op>[A-Za-z]+): )?(?P<bytes>\d{1,20}) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
    r"(?: channel\{Lo\.\.Hi\}=\{(?P<lo>\d{1,4})\.\.(?P<hi>\d{1,4})\})?(?: time (?P<time>\d+(?:\.\d*)?))?"
)
_CHOICE_LOOSE = re.compile(  # (?=(\s*))\1: the leading blanks taken whole (atomic), else each split of a long
    # run of blanks would rescan the rest of the line: quadratic (an 80,000-space line took minutes)
    r"^(?=(\s*))\1(?:(?P<op>[A-Z][A-Za-z]+):)?.*?\b(?:Algo|algorithm) (?P<algo>\w+),? (?:proto|protocol) (?P<proto>\w+)"
)
_COLLECTIVE_TRACE = re.compile(r"^\s*Collective (?P<op>\w+)\(\w+, \w+, (?P<algo>\w+), (?P<proto>\w+)\)")


def normalize_algorithm(name: str) -> str:
    """``TREE``, ``NVLS_TREE``, ``1``, ``collnet`` -> NCCL's spelling (``Tree``, ``NVLSTree``, ``Ring``, ...).

    Unknown names come back as given, so nothing is lost.
    """
    if name.isdigit():
        index = int(name)
        return ALGORITHMS[index] if index < len(ALGORITHMS) else f"algo{index}"
    return _ALGO_KEYS.get(name.lower().replace("_", ""), name)


def normalize_protocol(name: str) -> str:
    """``SIMPLE``, ``ll128``, ``2`` -> ``Simple``, ``LL128``, ``Simple``; unknown names come back as given."""
    if name.isdigit():
        index = int(name)
        return PROTOCOLS[index] if index < len(PROTOCOLS) else f"proto{index}"
    return _PROTO_KEYS.get(name.lower(), name)


@dataclass(frozen=True, slots=True)
class AlgoChoice:
    """One per-operation choice line: which algorithm and protocol NCCL picked."""

    op: str | None
    """The function (``AllReduce``), ``None`` where the line does not name it."""
    algorithm: str
    protocol: str
    size_bytes: int | None
    kind: str
    """``tuning`` (a ``Bytes -> Algo`` line) or ``trace`` (a TRACE ``Collective ...`` line)."""
    channel_lo: int | None = None
    """``channel{Lo..Hi}={0..15}`` (2.24+): the channels the operation runs on, first and last."""
    channel_hi: int | None = None
    time_us: float | None = None
    """NCCL's own predicted time for the operation (``time 86069.97``, 2.21-2.23)."""


def parse_algo_choice(message: str) -> AlgoChoice | None:
    """The algorithm/protocol choice in one message, or ``None``."""
    m = _CHOICE.match(message)
    if m:
        lo, hi, time = m.group("lo"), m.group("hi"), m.group("time")
        return AlgoChoice(m.group("op"), normalize_algorithm(m.group("algo")), normalize_protocol(m.group("proto")),
                          int(m.group("bytes")), "tuning", None if lo is None else int(lo),
                          None if hi is None else int(hi), None if time is None else float(time))
    m = _COLLECTIVE_TRACE.match(message)
    if m:
        return AlgoChoice(m.group("op"), normalize_algorithm(m.group("algo")), normalize_protocol(m.group("proto")),
                          None, "trace")
    m = _CHOICE_LOOSE.match(message)
    if m:
        return AlgoChoice(m.group("op"), normalize_algorithm(m.group("algo")), normalize_protocol(m.group("proto")),
                          None, "tuning")
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class TuningTable:
    """NCCL's cost-model table as printed by rank 0 (latency in µs, algorithm bandwidth in GB/s)."""

    layout: str
    """``one-line`` (NCCL 2.5.6-2.17) or ``blocks`` (2.18+)."""
    columns: tuple[tuple[str, str], ...]
    """(algorithm, protocol) of every cell, in printed order; algorithm names as printed."""
    max_nthreads: dict[tuple[str, str], int] = field(default_factory=dict)
    cells: dict[str, dict[tuple[str, str], tuple[float, float]]] = field(default_factory=dict)
    """function -> (algorithm, protocol) -> (latency_us, algbw_gbps)."""

    def predicted_time_us(self, func: str, algorithm: str, protocol: str, size_bytes: int) -> float | None:
        """NCCL's predicted time from this table: latency + size / algbw (``tuning.cc`` ncclTopoGetAlgoTime,
        with one latency per operation); ``None`` when the cell is missing or disabled (bandwidth 0)."""
        for (algo, proto), (lat, bw) in self.cells.get(func, {}).items():
            if normalize_algorithm(algo) == algorithm and normalize_protocol(proto) == protocol:
                return lat + size_bytes / (1000.0 * bw) if bw > 0 else None
        return None

    def to_json(self) -> dict[str, Any]:
        algorithms = list(dict.fromkeys(a for a, _ in self.columns))
        protocols = list(dict.fromkeys(p for _, p in self.columns))
        nthreads: dict[str, dict[str, int]] = {}
        for (algo, proto), n in self.max_nthreads.items():
            nthreads.setdefault(algo, {})[proto] = n
        cells: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
        for func, row in self.cells.items():
            for (algo, proto), (lat, bw) in row.items():
                cells.setdefault(func, {}).setdefault(algo, {})[proto] = {"latency_us": lat, "algbw_gbps": bw}
        return {"layout": self.layout, "algorithms": algorithms, "protocols": protocols,
                "max_nthreads": nthreads, "cells": cells}


def _split_cells(body: str) -> list[str]:
    parts = [p.strip() for p in body.split("|")]
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@dataclass
class _Stream:
    """Table state of one printing thread: the column layout the next rows refer to."""

    layout: str = ""
    algorithms: list[str] = field(default_factory=list)
    protocols: list[str] = field(default_factory=list)
    columns: list[tuple[str, str]] = field(default_factory=list)


class TuningCollector:
    """Feed it messages in log order; it keeps the first table it sees (one per communicator is printed)."""

    def __init__(self) -> None:
        self._streams: dict[object, _Stream] = {}
        self._layout = ""
        self._columns: list[tuple[str, str]] = []
        self._nthreads: dict[tuple[str, str], int] = {}
        self._cells: dict[str, dict[tuple[str, str], tuple[float, float]]] = {}
        self.conflicts = 0
        """Cells printed again with another value (several communicators or several tables)."""

    def feed(self, stream: object, message: str) -> bool:
        """Take one message; ``True`` when it was a line of a TUNING table."""
        state = self._streams.setdefault(stream, _Stream())
        m = _OLD_HEADER.match(message)
        if m:
            state.layout = "one-line"
            state.columns = []
            for cell in _split_cells(m.group(1)):
                algo, _, proto = cell.partition("/")
                state.columns.append((algo.strip(), proto.strip()))
            self._add_columns(state)
            return True
        m = _ALGO_HEADER.match(message)
        if m:
            state.layout = "blocks"
            state.algorithms = [a for a in _split_cells(m.group(1)) if a]
            state.protocols, state.columns = [], []
            return True
        m = _PROTO_HEADER.match(message)
        if m:
            state.protocols = _split_cells(m.group(1))
            state.columns = [(algo, state.protocols[i * 3 + j])
                             for i, algo in enumerate(state.algorithms) for j in range(3)
                             if i * 3 + j < len(state.protocols)]
            self._add_columns(state)
            return True
        m = _NTHREADS.match(message)
        if m:
            for column, cell in zip(state.columns, _split_cells(m.group(1)), strict=False):
                if cell.lstrip("-").isdigit() and len(cell) < 10:
                    self._nthreads.setdefault(column, int(cell))
            return bool(state.columns)
        m = _ROW.match(message)
        if m and state.columns:
            row = self._cells.setdefault(m.group(1), {})
            for column, cell in zip(state.columns, _CELL.findall(m.group(2)), strict=False):
                lat, bw = _number(cell[0]), _number(cell[1])
                if lat is None or bw is None:
                    continue
                old = row.setdefault(column, (lat, bw))
                if old != (lat, bw):
                    self.conflicts += 1
            return True
        return False

    def _add_columns(self, state: _Stream) -> None:
        if not self._layout:
            self._layout = state.layout
        for column in state.columns:
            if column not in self._columns:
                self._columns.append(column)

    def table(self) -> TuningTable | None:
        """The table seen so far, or ``None`` when the log printed none."""
        if not self._columns:
            return None
        return TuningTable(layout=self._layout, columns=tuple(self._columns), max_nthreads=dict(self._nthreads),
                           cells={func: dict(row) for func, row in self._cells.items()})
