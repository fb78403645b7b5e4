"""Read the result files rccl-tests writes with ``--output_file``/``-x`` (``-X`` since its nccl-tests 2.17 sync)
and ``--output_format``/``-Z json|csv`` into an :class:`NcclTestsRun` (backend ``rccl``).

Facts from the writer, ``Reporter`` in ROCm/rccl-tests ``src/common.cu`` / ``src/common.h`` (later
ROCm/rocm-systems ``projects/rccl-tests/src/``), one record per size and placement, keys in this order:
``numCycle`` (the ``-N`` cycle; since PR #116), ``name`` (the test's name: ``AllReduce``, ``AlltoAll``, ...), then
MPI builds ``nodes ranks ranksPerNode gpusPerRank`` and builds without MPI ``gpus``, then ``size type redop
inPlace time algBw busBw wrong``. Numbers are ``std::to_string`` (``55.660000``), strings are quoted, ``wrong``
is a string: the count of wrong elements, ``"N/A"`` when values were not checked. PR #93 describes the key as
``#wrong``; both are read. Shapes:

- JSON list ``[{...},\\n{...}\\n]``, written at the end of the run (since PR #140);
- JSON objects one per line, no commas, written as the rows ran (PR #93 until #140);
- CSV ``numCycle,collective,...,#wrong`` (since #140); before it ``, `` separated, written as the rows ran.
  The header of MPI builds lacked ``nodes`` (ROCm/rocm-systems #6004 fixed it): 13 names over 14 values;
  such rows are read by position, in the writer's order, and a note says so.

Geometry: ``ranksPerNode`` is not per node: the writer passes the MPI processes of the communicator
(``args->nProcs``, the ``NCCL_TESTS_SPLIT`` group), ``ranks`` the MPI processes launched, ``nodes`` their ratio
(communicators, not nodes) and ``gpusPerRank`` the GPUs per process. So the communicator has ranksPerNode x
gpusPerRank ranks, the node count is not in the file, and a file without MPI fields (``gpus``) is one process on
one node. Some versions wrote ``size`` as the receive buffer (``expectedBytes``), one rank's share for
reduce_scatter and scatter; such sizes are scaled to nccl-tests' total, said in a note.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from collscope.collectives.nccl_tests.build import build_run
from collscope.collectives.nccl_tests.records import NcclTestsHeader, NcclTestsRun, Row
from collscope.collectives.record import OPS
from collscope.errors import ParseError
from collscope.geometry import GeometryEvidence
from collscope.vocab.ops import DTYPE_ALIASES, OP_FACTS, OP_TABLE

__all__ = ["parse_rccl_tests_results", "looks_like_rccl_tests_results"]

_KEYS = {"numcycle": "numCycle", "name": "name", "collective": "name", "nodes": "nodes", "ranks": "ranks",
         "rankspernode": "ranksPerNode", "gpusperrank": "gpusPerRank", "gpus": "gpus", "size": "size",
         "type": "type", "redop": "redop", "inplace": "inPlace", "time": "time", "algbw": "algBw",
         "busbw": "busBw", "wrong": "wrong", "#wrong": "wrong"}
"""Every spelling of a field (JSON keys, CSV header names, lower case) -> the writer's key."""
_REQUIRED = ("name", "size", "type", "redop", "inPlace", "time", "algBw", "busBw", "wrong")
_OP_BY_TEST_NAME = {row.nccl_tests_binary.removesuffix("_perf").replace("_", ""): row.name for row in OP_TABLE}
"""``allreduce`` -> all_reduce: a test's name (``testColl.name`` in ``src/<op>.cu``: ``AllReduce``, ``AlltoAll``,
``ReduceScatter``), lower case, is its binary's name without ``_perf`` and underscores."""
_CSV_HEADER = re.compile(r"^\ufeff?\s*(?:numcycle\s*,\s*)?\"?collective\"?\s*,.*\bbusbw\b", re.I)
_JSON_FRAGMENT = re.compile(r'^\s*\{\s*"(?:numCycle|name|#wrong)"\s*:')
_SPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


def looks_like_rccl_tests_results(text: str) -> bool:
    """Whether ``text`` is an rccl-tests results file: a JSON list of objects, one object per line starting with
    the writer's first key, or a CSV whose header starts ``[numCycle,]collective,`` and names busbw."""
    head = text[:4096].lstrip("\ufeff \t\r\n")
    if head.startswith("["):  # not a launcher prefix ("[1,0]<stdout>:"): a list of objects, or an empty one
        return head[1:].lstrip()[:1] in ("{", "]")
    return _JSON_FRAGMENT.match(head) is not None or _CSV_HEADER.match(head.split("\n", 1)[0]) is not None


class _Record(NamedTuple):
    line: int
    where: str
    """``record 3`` (JSON) or ``column`` names (CSV), for messages."""
    fields: Mapping[str, Any]


class _Shape(NamedTuple):
    records: list[_Record]
    what: str
    """The shape, for notes and errors."""
    complete: bool
    """Written at the end of the run (the JSON list, the CSV since #140): the file shows the whole run."""


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _json_records(text: str, source: str) -> _Shape:
    """The objects of the JSON list, or of the objects written one per line, each with its line."""
    expected = "rccl-tests' JSON results (a list of objects, or one object per line)"
    pos = _SPACE.match(text, 1 if text.startswith("\ufeff") else 0).end()  # type: ignore[union-attr]
    listed = text.startswith("[", pos)
    if listed:
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    records: list[_Record] = []
    while pos < len(text):
        if listed and text.startswith("]", pos):
            end = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            if end < len(text):
                raise ParseError(source, _line_at(text, end), "nothing after the closing ']'", found=text[end:end + 40])
            return _Shape(records, "JSON list", True)
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise ParseError(source, exc.lineno, expected + " (a file cut off: the run was killed?)",
                             found=f"{exc.msg} at column {exc.colno}") from None
        except (RecursionError, ValueError) as exc:
            raise ParseError(source, _line_at(text, pos), expected, found=type(exc).__name__) from None
        line = _line_at(text, pos)
        if not isinstance(value, dict):
            raise ParseError(source, line, f"an object (record {len(records)})", found=type(value).__name__)
        fields = {_KEYS.get(str(key).lower(), str(key)): v for key, v in value.items()}
        records.append(_Record(line, f"record {len(records)}", fields))
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        if listed and text.startswith(",", pos):
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            if pos < len(text) and not text.startswith("{", pos):  # at the end: cut off, said below
                raise ParseError(source, _line_at(text, pos), "an object after ','", found=text[pos:pos + 40])
        elif listed and not text.startswith("]", pos) and pos < len(text):
            raise ParseError(source, _line_at(text, pos), "',' or ']' after an object", found=text[pos:pos + 40])
    if listed:
        raise ParseError(source, _line_at(text, len(text)), "the list's closing ']' (the file is cut off: the run "
                         "was killed, or the copy is partial)", found="the end of the file")
    return _Shape(records, "JSON objects, one per line", False)


def _csv_records(text: str, source: str, warnings: list[str]) -> _Shape:
    """The rows of the CSV, each a mapping by the header's names; rows one value longer than a header without
    ``nodes`` (MPI builds before ROCm/rocm-systems #6004) read by the writer's positions."""
    lines = text.lstrip("\ufeff").split("\n")
    header = [name.strip().strip('"').lower() for name in lines[0].split(",")]
    names = [_KEYS.get(name, name) for name in header]
    missing = [key for key in _REQUIRED if key not in names]
    if missing:
        raise ParseError(source, 1, f"rccl-tests' CSV header (columns {', '.join(_REQUIRED)})",
                         found=f"no {', '.join(missing)} in {lines[0].strip()!r}")
    unknown = [h for h, key in zip(header, names, strict=True) if key not in _KEYS.values()]
    if unknown:
        warnings.append(f"CSV columns not written by rccl-tests, ignored: {', '.join(unknown)}")
    without_nodes = shown = None
    if "ranks" in names and "nodes" not in names:
        at = names.index("ranks")
        without_nodes, shown = [*names[:at], "nodes", *names[at:]], [*header[:at], "nodes", *header[at:]]
    records: list[_Record] = []
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        try:
            values = next(csv.reader([line], skipinitialspace=True))
        except csv.Error as exc:
            raise ParseError(source, lineno, "a CSV row", found=str(exc)) from None
        values = [v.strip() for v in values]
        keys = names
        if len(values) != len(names):
            if without_nodes is None or len(values) != len(without_nodes):
                raise ParseError(source, lineno, f"a row of the {len(names)} columns of the header "
                                 f"({', '.join(header)})", found=f"{len(values)} values: {line.strip()}")
            keys = without_nodes
            if len(records) == 0:
                warnings.append(f"the CSV header has {len(names)} columns but the rows {len(values)}: rccl-tests' MPI "
                                "builds left 'nodes' out of the header (fixed by ROCm/rocm-systems #6004); rows read "
                                f"by position as {','.join(shown or keys)}")
        records.append(_Record(lineno, "the row", dict(zip(keys, values, strict=True))))
    spaced = ", " in lines[0]
    return _Shape(records, "CSV, ', ' separated" if spaced else "CSV", not spaced)


class _Bad(Exception):
    def __init__(self, key: str, expected: str, found: Any) -> None:
        super().__init__(key)
        self.key, self.expected, self.found = key, expected, found


def _number(fields: Mapping[str, Any], key: str) -> float:
    value = fields.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        try:
            number = float(value) if isinstance(value, str) else math.nan
        except ValueError:
            number = math.nan
    if not math.isfinite(number) or number < 0:
        raise _Bad(key, "a number >= 0", value)
    return number


def _integer(fields: Mapping[str, Any], key: str) -> int:
    number = _number(fields, key)
    if number != int(number) or number >= 2**63:
        raise _Bad(key, "an integer", fields.get(key))
    return int(number)


def _wrong(fields: Mapping[str, Any]) -> int | None:
    value = fields.get("wrong")
    if isinstance(value, str) and value.strip().upper() in ("N/A", ""):
        return None  # not checked (-c 0)
    return _integer({"wrong": value}, "wrong")


class _Geometry(NamedTuple):
    """The file's own geometry fields (None where the build does not write them)."""

    gpus: int | None
    nodes: int | None
    ranks: int | None
    ranks_per_comm: int | None
    gpus_per_rank: int | None


def _describe(geometry: _Geometry) -> str:
    if geometry.gpus is not None:
        return f"gpus {geometry.gpus}"
    return (f"nodes {geometry.nodes}, ranks {geometry.ranks}, ranksPerNode {geometry.ranks_per_comm}, gpusPerRank "
            f"{geometry.gpus_per_rank}")


def _geometry_fields(fields: Mapping[str, Any]) -> _Geometry:
    if "ranks" in fields or "gpusPerRank" in fields:
        return _Geometry(None, _integer(fields, "nodes") if "nodes" in fields else None, _integer(fields, "ranks"),
                         _integer(fields, "ranksPerNode"), _integer(fields, "gpusPerRank"))
    return _Geometry(_integer(fields, "gpus"), None, None, None, None)


def _row(fields: Mapping[str, Any], seen: dict[tuple[Any, ...], int]) -> Row:
    in_place = _integer(fields, "inPlace")
    if in_place not in (0, 1):
        raise _Bad("inPlace", "0 or 1", fields.get("inPlace"))
    size = _integer(fields, "size")
    dtype = str(fields.get("type", ""))
    redop = None if fields.get("redop") in (None, "", "none") else str(fields["redop"])
    key = (size, dtype, redop, bool(in_place))
    repeat = seen.get(key, 0)
    seen[key] = repeat + 1
    return Row(size, None, DTYPE_ALIASES.get(dtype, dtype), redop, None, bool(in_place), _number(fields, "time"),
               _number(fields, "algBw"), _number(fields, "busBw"), _wrong(fields), None, None, repeat)


def _test_op(name: str, op: str | None, source: str, line: int) -> tuple[str, str]:
    """(op, evidence) of the records' test name, checked against the op passed."""
    found = _OP_BY_TEST_NAME.get(name.lower())
    if op is not None:
        if op not in OPS:
            raise ParseError(source, None, f"a collective among {', '.join(OPS)}", found=op)
        if found is not None and found != op:
            raise ParseError(source, line, f"results of {op} (as passed)", found=f"name {name!r}")
        return op, "--op (as passed)"
    if found is None:
        raise ParseError(source, line, f"a test rccl-tests names for one of {', '.join(OPS)} (or pass --op)",
                         found=f"name {name!r}")
    return found, f"the records' name {name!r}"


def _sizes_per_rank(op: str, rows: list[Row], n: int, warnings: list[str]) -> list[Row]:
    """Rows whose size is one rank's receive buffer (``expectedBytes``, older writers) scaled to nccl-tests'
    total, when algbw x time says every size is n times larger; the rows as they are otherwise."""
    facts = OP_FACTS[op]
    usable = [r for r in rows if r.algbw_gbps >= 0.01 and r.time_us > 0 and r.size_bytes > 0]
    if n < 2 or not usable or not facts.size_is_total or facts.recv_blocks_nranks:
        return rows
    if all(abs(r.algbw_gbps * r.time_us * 1e3 / (r.size_bytes * n) - 1) < 0.02 for r in usable):
        warnings.append(f"sizes are one rank's output (this rccl-tests version wrote the receive buffer's bytes): "
                        f"algbw x time is {n} x size in every row; sizes scaled by {n} to nccl-tests' total")
        return [r._replace(size_bytes=r.size_bytes * n) for r in rows]
    return rows


def _clues(geometry: _Geometry, n: int) -> Callable[[GeometryEvidence], None]:
    def add(ev: GeometryEvidence) -> None:
        if geometry.gpus is not None:
            ev.exact("nranks", n, f"the file's gpus {n} (a build without MPI: one process drives every rank)")
            ev.exact("nnodes", 1, "the file's gpus field: a build without MPI, one process on one node")
            ev.at_least("gpus_per_node", n, f"the file's gpus {n}: one process on one node drives them all")
        else:
            ev.exact("nranks", n, f"the file's ranksPerNode {geometry.ranks_per_comm} x gpusPerRank "
                                  f"{geometry.gpus_per_rank} (MPI processes of the communicator x GPUs each)")
    return add


def _geometry_notes(geometry: _Geometry, n: int, nnodes_passed: bool) -> list[str]:
    if geometry.ranks is None or geometry.ranks_per_comm is None:
        return []
    notes = [] if nnodes_passed else [
        f"the file's nodes={geometry.nodes} is not a node count: rccl-tests writes ranks / ranksPerNode, and its "
        "ranksPerNode counts the MPI processes of the communicator, not of a node; nodes unknown from this file "
        "(pass --nnodes N)"]
    if geometry.ranks > geometry.ranks_per_comm:
        notes.append(f"NCCL_TESTS_SPLIT: {geometry.ranks} MPI processes in communicators of "
                     f"{geometry.ranks_per_comm}; bandwidths are rank 0's communicator's ({n} ranks)")
    return notes


def parse_rccl_tests_results(text: str, source: str = "<rccl-tests results>", op: str | None = None, *,
                             nranks: int | None = None, nnodes: int | None = None,
                             nvl_domain: int | None = None) -> NcclTestsRun:
    """The run of an rccl-tests results file (JSON or CSV, any shape above); raises only ParseError, naming the
    file, the line (and the record or column) and what was expected there.

    ``op``, ``nranks``, ``nnodes``, ``nvl_domain`` override what the file says, as for
    :func:`~collscope.collectives.nccl_tests.parse.parse_nccl_tests` (a note names the clue that disagreed)."""
    if not isinstance(text, str):
        raise ParseError(source, None, "text (str)", found=type(text).__name__)
    warnings: list[str] = []
    head = text.lstrip("\ufeff \t\r\n")
    shape = (_json_records(text, source) if head[:1] in ("[", "{")
             else _csv_records(text.replace("\r\n", "\n"), source, warnings))
    if not shape.records:
        raise ParseError(source, None, "rccl-tests results: at least one record", found=f"none ({shape.what})")
    first = shape.records[0]
    name = str(first.fields.get("name", ""))
    rows: list[Row] = []
    seen: dict[tuple[Any, ...], int] = {}
    geometry: _Geometry | None = None
    for record in shape.records:
        try:
            missing = [key for key in _REQUIRED if key not in record.fields]
            if missing:
                raise _Bad(missing[0], "the field", "none")
            if str(record.fields["name"]) != name:
                raise _Bad("name", f"{name!r} (one test per file, as on line {first.line})", record.fields["name"])
            fields_geometry = _geometry_fields(record.fields)
            if geometry is not None and fields_geometry != geometry:
                raise _Bad("ranks", f"the geometry of line {first.line} ({_describe(geometry)})",
                           _describe(fields_geometry))
            geometry = fields_geometry
            rows.append(_row(record.fields, seen))
        except _Bad as bad:
            raise ParseError(source, record.line, f"{bad.expected} for {bad.key} ({record.where})",
                             found=repr(bad.found)) from None
    assert geometry is not None
    op, op_evidence = _test_op(name, op, source, first.line)
    n = geometry.gpus if geometry.gpus is not None else (geometry.ranks_per_comm or 0) * (geometry.gpus_per_rank or 0)
    if n < 1:
        raise ParseError(source, first.line, "ranks >= 1 in the file's gpus / ranksPerNode x gpusPerRank",
                         found=_describe(geometry))
    rows = _sizes_per_rank(op, rows, n, warnings)
    warnings.extend(_geometry_notes(geometry, n, nnodes is not None))
    if not shape.complete:
        warnings.append(f"{shape.what}: written row by row as the run went, so the file does not show whether the "
                        "run finished")
    run = build_run(op=op, rows=rows, devices=(), ranks_elided=False, header=NcclTestsHeader(), nccl_version=None,
                    nccl_tests_version=None, avg_busbw_gbps=None, out_of_bounds=None, oob_failed=False,
                    min_bw_failed=False, complete=shape.complete, errors=(), warnings=warnings, source=source,
                    nranks=nranks, backend="rccl", nnodes=nnodes, nvl_domain=nvl_domain, op_evidence=op_evidence,
                    clues=_clues(geometry, n))
    groups = geometry.nodes if geometry.nodes is not None else 1
    world = geometry.ranks * (geometry.gpus_per_rank or 1) if geometry.ranks is not None else n
    return dataclasses.replace(run, world_nranks=world, groups=groups)
