"""Read the JSON file nccl-tests writes with ``-J file.json`` (v2.17.3+, JSON_FILE_VERSION 3).

The format as written by nccl-tests ``src/util.cu`` (v2.19.6): a top-level object with ``version``,
``start_time``, ``args`` (the binary's argv), ``env`` (``"K=V"`` strings), ``nccl_version`` (the
NCCL_VERSION_CODE integer), ``config`` (``nthreads ngpus minimum_bytes maximum_bytes step_factor|step_bytes
warmup_iters iterations aggregated_iterations validation graph blocking_collectives per_iter_timing
per_iter_skip parallel_init`` and ``devices`` [{rank group pid hostname device device_hex device_info}]),
``results`` [{size count type redop root out_of_place in_place actual_iterations experiment_name}] where each
placement is {``time`` or ``cpu_time``, ``alg_bw``, ``bus_bw``, ``nwrong``} (doubles printed ``%lf``, NaN as
the string ``"nan"``, ``nwrong`` null when unchecked), ``root`` a ``%6i`` string, booleans written as the
strings ``"true"``/``"false"``; then ``out_of_bounds`` {count okay}, ``average_bus_bandwidth`` {bandwidth
okay}, ``errors`` [...], ``end_time``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from collscope.collectives.nccl_tests.build import build_run
from collscope.collectives.nccl_tests.launch import average_from_argv, registration_from_argv
from collscope.collectives.nccl_tests.records import (
    NcclTestsDevice,
    NcclTestsHeader,
    NcclTestsRun,
    Row,
    nccl_version_from_code,
    op_from_binary,
)
from collscope.collectives.record import OPS
from collscope.errors import ParseError
from collscope.json_input import load_json
from collscope.vocab.ops import DTYPE_ALIASES

__all__ = ["parse_nccl_tests_json"]

_CONFIG_KEYS = {"nthreads": "nthreads", "ngpus": "ngpus", "minimum_bytes": "min_bytes",
                "maximum_bytes": "max_bytes", "step_factor": "step_factor", "step_bytes": "step_bytes",
                "warmup_iters": "warmup_iters", "iterations": "iters", "aggregated_iterations": "agg_iters",
                "validation": "validation", "graph": "graph", "unalign": "unalign"}


class _Bad(Exception):
    def __init__(self, where: str, expected: str, found: Any) -> None:
        super().__init__(where)
        self.where, self.expected, self.found = where, expected, found


def _num(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise _Bad(where, "a number", value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise _Bad(where, "a number", value)


def _int(value: Any, where: str) -> int:
    number = _num(value, where)
    if not math.isfinite(number) or number != int(number):
        raise _Bad(where, "an integer", value)
    if not -(2**63) <= number < 2**63:  # records hold 64-bit integers (record.Int64): never an OverflowError later
        raise _Bad(where, "an integer within 64 bits", value)
    return int(number)


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(where, "an object", value)
    return value


def _placement(value: Any, where: str) -> tuple[float, float, float, int | None] | None:
    """(time, algbw, busbw, nwrong) of one placement object; None for a JSON null (placement not run)."""
    if value is None:
        return None
    p = _obj(value, where)
    time_key = "time" if "time" in p else "cpu_time"
    nwrong = p.get("nwrong")
    return (_num(p.get(time_key), f"{where}.{time_key}"), _num(p.get("alg_bw"), f"{where}.alg_bw"),
            _num(p.get("bus_bw"), f"{where}.bus_bw"), None if nwrong is None else _int(nwrong, f"{where}.nwrong"))


def _devices(values: Any) -> list[NcclTestsDevice]:
    if values is None:
        return []
    if not isinstance(values, list):
        raise _Bad("config.devices", "a list", values)
    devices = []
    for i, value in enumerate(values):
        d = _obj(value, f"config.devices[{i}]")
        where = f"config.devices[{i}]"
        group = d.get("group")
        devices.append(NcclTestsDevice(rank=_int(d.get("rank"), f"{where}.rank"),
                                       group=None if group is None else _int(group, f"{where}.group"),
                                       pid=_int(d.get("pid", -1), f"{where}.pid"), host=str(d.get("hostname", "")),
                                       device=_int(d.get("device", -1), f"{where}.device"),
                                       bus_id=str(d.get("device_hex", "")), name=str(d.get("device_info", ""))))
    return devices


def _truth(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    return None


def _read(doc: dict[str, Any], source: str, op: str | None, nranks: int | None, run_env: Mapping[str, str] | None,
          argv: Sequence[str] | None, nnodes: int | None, nvl_domain: int | None) -> NcclTestsRun:
    warnings: list[str] = []
    args = doc.get("args") or []
    if not isinstance(args, list):
        raise _Bad("args", "a list", args)
    found = op_from_binary(str(args[0])) if args else None
    op_evidence: str | None = "--op (as passed)"
    if op is not None:
        if op not in OPS:
            raise ParseError(source, None, f"a collective among {', '.join(OPS)}", found=op)
        if found is not None and found != op:
            raise ParseError(source, None, f"output of {op} (as passed)", found=f"args[0] {args[0]}")
    else:
        op = found
        op_evidence = f"args[0] {args[0]}" if found is not None else None

    env = doc.get("env") or []
    settings = {}
    launch_env = {}
    if isinstance(env, list):
        for item in env:
            if isinstance(item, str) and "=" in item:
                key, _, value = item.partition("=")
                launch_env[key] = value
                if key.startswith("NCCL_"):
                    settings[key] = value

    config = _obj(doc.get("config", {}), "config")
    params = {mine: _int(config[theirs], f"config.{theirs}") for theirs, mine in _CONFIG_KEYS.items()
              if config.get(theirs) is not None}
    devices = _devices(config.get("devices", doc.get("devices")))

    results = doc.get("results", [])
    if not isinstance(results, list):
        raise _Bad("results", "a list", results)
    rows: list[Row] = []
    seen: dict[tuple[Any, ...], int] = {}
    iters: set[int] = set()
    for i, value in enumerate(results):
        where = f"results[{i}]"
        r = _obj(value, where)
        redop = r.get("redop")
        redop = None if redop in (None, "", "none") else str(redop)
        root_value = r.get("root")
        root = None if root_value in (None, "") else _int(str(root_value).strip(), f"{where}.root")
        if root is not None and root < 0:
            root = None
        count = r.get("count")
        if r.get("actual_iterations") is not None:
            iters.add(_int(r["actual_iterations"], f"{where}.actual_iterations"))
        size = _int(r.get("size"), f"{where}.size")
        count_value = None if count is None else _int(count, f"{where}.count")
        dtype = str(r.get("type", ""))
        dtype = DTYPE_ALIASES.get(dtype, dtype)
        for in_place, key in ((False, "out_of_place"), (True, "in_place")):
            p = _placement(r.get(key), f"{where}.{key}")
            if p is not None:
                row_key = (size, dtype, redop, root, in_place)
                rows.append(Row(size, count_value, dtype, redop, root, in_place, p[0], p[1], p[2], p[3], None, None,
                                seen.get(row_key, 0)))
                seen[row_key] = rows[-1].repeat + 1

    oob_doc = doc.get("out_of_bounds")
    oob = oob_failed = None
    if oob_doc is not None:
        oob_obj = _obj(oob_doc, "out_of_bounds")
        oob = _int(oob_obj.get("count"), "out_of_bounds.count")
        okay = _truth(oob_obj.get("okay"))
        oob_failed = (oob > 0) if okay is None else not okay
    avg = min_bw_failed = None
    if doc.get("average_bus_bandwidth") is not None:
        avg_obj = _obj(doc["average_bus_bandwidth"], "average_bus_bandwidth")
        avg = _num(avg_obj.get("bandwidth"), "average_bus_bandwidth.bandwidth")
        min_bw_failed = _truth(avg_obj.get("okay")) is False
    errors = [f"error: {e}" for e in (doc.get("errors") or []) if isinstance(e, str) and e]
    code = doc.get("nccl_version")
    if any(c.get("cpu_time") is not None for c in (
            _obj(r.get("out_of_place") or {}, "results") for r in results if isinstance(r, dict))):
        warnings.append("times are CPU time per op (-C 1), not latency")
    return build_run(op=op, rows=rows, devices=devices, ranks_elided=False, header=NcclTestsHeader(**params),
                     nccl_version=None if code is None else nccl_version_from_code(_int(code, "nccl_version")),
                     nccl_tests_version=None, avg_busbw_gbps=avg, out_of_bounds=oob, oob_failed=bool(oob_failed),
                     min_bw_failed=bool(min_bw_failed), complete="end_time" in doc or oob_doc is not None,
                     errors=errors, warnings=warnings, source=source, nranks=nranks, settings=settings,
                     timestamp=str(doc["start_time"]) if doc.get("start_time") else None,
                     iters=iters.pop() if len(iters) == 1 else None, env=run_env,
                     average=average_from_argv(argv if argv is not None else [str(a) for a in args]),
                     registration=registration_from_argv(argv if argv is not None else [str(a) for a in args]),
                     nnodes=nnodes, nvl_domain=nvl_domain, launch_env=launch_env, op_evidence=op_evidence)


def parse_nccl_tests_json(text: str, source: str = "<json>", op: str | None = None, *, nranks: int | None = None,
                          env: Mapping[str, str] | None = None, argv: Sequence[str] | None = None,
                          nnodes: int | None = None, nvl_domain: int | None = None) -> NcclTestsRun:
    """Parse the ``-J`` JSON document; a cut-off file (the run was killed) raises ParseError with its line.

    ``nranks``, ``env``, ``argv``, ``nnodes`` and ``nvl_domain`` as
    :func:`~collscope.collectives.nccl_tests.parse.parse_nccl_tests`; the document's own ``args`` (its ``-a``)
    and ``env`` (its split; the launcher's variables, for the geometry) are read when they are not given."""
    doc = load_json(text, source, "a complete nccl-tests -J JSON document (a run killed mid-way leaves it cut off; "
                    "its text output still has the rows)")
    if not isinstance(doc, dict) or "results" not in doc:
        raise ParseError(source, None, "an nccl-tests -J JSON object with 'results'",
                         found=type(doc).__name__ if not isinstance(doc, dict) else ", ".join(list(doc)[:8]))
    try:
        return _read(doc, source, op, nranks, env, argv, nnodes, nvl_domain)
    except _Bad as exc:
        raise ParseError(source, None, f"{exc.expected} at {exc.where}", found=repr(exc.found)) from exc
