"""Seeded fuzz of every input format the CLI reads with out-of-range values, deep nesting, long lines and
special strings (issue 22, items 12-14).

Each case plants a value into a valid input (a results directory, an nccl-tests output, an NCCL debug log, a
capture directory, a trace, a sweep spec) and runs the command in-process: exit code 0, 1 or 2, no exception
but collscope's own exit, no traceback, no raw control character in what is printed, no markup from the input
in report.md, and nothing written outside the command's directories (canary files beside them keep their
content). Bounded: a fixed number of cases per format, each line at most 40,000 characters.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from collscope.cli import main
from collscope.topo.samples import sample_path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "results" / "mpi-algos-2rank"
NCCL_TESTS = ROOT / "tests" / "fixtures" / "nccl-tests" / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"
SEED = 20261202
CASES_PER_FORMAT = 8
CANARY = "canary: collscope must not write here\n"
_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

NUMBERS: tuple[Any, ...] = (2**64, 2**63, 10**30, 1e300, -1, 0, float("nan"), float("inf"), -0.0)
STRINGS = ("$SLURM_SUBMIT_DIR/topo_$SLURM_JOB_ID.xml", "$\\frac{$", "<script>alert(1)</script>",
           "[x](javascript:alert(1))", "\x1b]52;c;aGVsbG8=\x07", "\x1b[2J", "a|b\nc`d`*e*_f_", "\x9b31m")


def _special(rng: random.Random) -> Any:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice(NUMBERS)
    if kind == 1:
        return rng.choice(STRINGS)
    if kind == 2:
        depth = rng.choice((50, 2000, 100_000))
        return json.loads("[" * min(depth, 900) + "]" * min(depth, 900)) if depth < 1000 else "DEEP"
    return rng.choice((" ", "a", "0", "\t", "a:")) * rng.choice((5_000, 40_000))


def _json_text(value: Any) -> str:
    if value == "DEEP":
        return "[" * 100_000 + "]" * 100_000
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "1e999" if value > 0 else "-1e999"
    return json.dumps(value)


def _plant(doc: dict[str, Any], key: str, value: Any) -> str:
    """``doc`` as JSON with ``key`` holding ``value`` (written raw: NaN, 1e999, 100,000 brackets)."""
    return json.dumps({**doc, key: "@@PLANT@@"}).replace('"@@PLANT@@"', _json_text(value))


def _check(result: Result, outside: Path) -> None:
    assert result.exit_code in (0, 1, 2), result.output[-2000:]
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert _RAW_CONTROL.search(result.output) is None, repr(_RAW_CONTROL.search(result.output))
    for canary in outside.glob("canary*"):
        assert canary.read_text() == CANARY, canary


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    """``work`` (inputs and outputs) and ``outside`` (canaries: nothing may change there)."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    for name in ("canary.txt", "canary.jsonl"):
        (outside / name).write_text(CANARY)
    (work / "link-out").symlink_to(outside / "canary.txt")  # a planted link next to the inputs
    return work, outside


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


# ---- one case per format -------------------------------------------------------------------------------------
def _results_case(rng: random.Random, work: Path) -> list[list[str]]:
    results = work / "results"
    shutil.copytree(EXAMPLE, results)
    path = rng.choice(sorted((results / "points").glob("*.jsonl")))
    lines = path.read_text().splitlines()
    i = rng.randrange(len(lines))
    doc = json.loads(lines[i])
    where = rng.choice(("size_bytes", "time_us", "count", "nranks", "busbw_gbps", "hosts", "settings", "op"))
    value = _special(rng)
    if where == "settings" and isinstance(value, str) and value != "DEEP":
        lines[i] = json.dumps({**doc, "settings": {**doc["settings"], "NCCL_TOPO_FILE": value}})
    elif where == "hosts" and isinstance(value, str) and value != "DEEP":
        lines[i] = json.dumps({**doc, "hosts": [value]})
    else:
        lines[i] = _plant(doc, where, value)
    path.write_text("\n".join(lines) + "\n")
    return [["analyze", str(results)], ["recommend", str(results)],
            ["report", str(results), "--out", str(work / "report")]]


def _nccl_tests_case(rng: random.Random, work: Path) -> list[list[str]]:
    lines = NCCL_TESTS.read_text().splitlines()
    rows = [i for i, line in enumerate(lines) if line.split()[1:3] == ["2", "float"] or
            line.split()[1:3] == ["16", "float"]]
    i = rng.choice(rows)
    parts = lines[i].split()
    column = rng.choice((0, 5, 6, 7, 9))
    value = _special(rng)
    parts[column] = "[]" if isinstance(value, list) else str(value) if value != "DEEP" else "[" * 50_000
    lines[i] = "  ".join(parts)
    if rng.random() < 0.3:
        lines.insert(rng.randrange(len(lines)), str(_special(rng))[:40_000])
    (work / "nt.txt").write_text("\n".join(lines) + "\n")
    return [["ingest", str(work / "nt.txt"), "--out", str(work / "nt.jsonl")]]


def _nccl_log_case(rng: random.Random, work: Path) -> list[list[str]]:
    value = str(_special(rng))[:40_000]
    prefix = rng.choice(("host:1:2 [0] NCCL INFO ", "host:1:2 [0] NCCL WARN ", "host:1:2 [0] NCCL INFO Algo ",
                         "", "host$1$:1:2 [0] NCCL INFO "))
    lines = ["host:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", prefix + value,
             f"{value[:200]}:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE"]
    (work / "nccl.log").write_text("\n".join(lines) + "\n")
    return [["nccl-log", str(work / "nccl.log")]]


def _capture_case(rng: random.Random, work: Path) -> list[list[str]]:
    capture = work / "capture"
    shutil.copytree(sample_path(), capture)
    value = _special(rng)
    if rng.random() < 0.5:
        meta = json.loads((capture / "meta.json").read_text())
        (capture / "meta.json").write_text(_plant(meta, rng.choice(("host", "files", "errors")), value))
    else:
        name = rng.choice(sorted(p.name for p in capture.iterdir() if p.suffix in (".txt", ".csv")))
        lines = (capture / name).read_text().splitlines()
        middle = rng.randrange(len(lines))
        lines.insert(middle, lines[middle][:8] + str(value)[:40_000])
        (capture / name).write_text("\n".join(lines) + "\n")
    return [["topo", "show", "--from", str(capture), "--png", str(work / "topo.png")]]


def _trace_case(rng: random.Random, work: Path) -> list[list[str]]:
    value = _special(rng)
    event = {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 0, "tid": 1, "ts": 1.0, "dur": 2.0,
             "args": {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
                      "Group size": 2, "dtype": "Float", "Process Group Name": "0"}}
    key = rng.choice(("In msg nelems", "Group size", "dtype", "Process Group Name", "ts"))
    planted = _plant(event["args"], key, value) if key != "ts" else None
    text = ('{"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2}, "traceEvents": ['
            + (json.dumps({**event, "args": "@@ARGS@@"}).replace('"@@ARGS@@"', planted) if planted
               else _plant(event, "ts", value)) + "]}")
    path = work / "rank0.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    return [["trace", str(path)]]


def _spec_case(rng: random.Random, work: Path) -> list[list[str]]:
    value = _special(rng)
    spec = {"name": "fuzz", "op": "all_reduce", "engine": "mpi", "nranks": 2, "min_bytes": 8, "max_bytes": 64,
            "grid": {"OMPI_MCA_coll_tuned_allreduce_algorithm": ["1", "2"]}}
    key = rng.choice(("name", "nranks", "max_bytes", "grid", "fixed_env"))
    if rng.random() < 0.5:
        path = work / "spec.json"
        path.write_text(_plant(spec, key, value))
    else:
        path = work / "spec.yaml"
        path.write_text(f"name: fuzz\nop: all_reduce\nengine: mpi\n{key}: {_json_text(value)}\n"
                        "a: &a [x, x, x, x, x, x, x, x, x]\nb: [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n")
    return [["sweep", "run", str(path), "--out", str(work / "sweep"), "--dry-run"]]


FORMATS: dict[str, Callable[[random.Random, Path], list[list[str]]]] = {
    "results": _results_case, "nccl-tests": _nccl_tests_case, "nccl-log": _nccl_log_case,
    "capture": _capture_case, "trace": _trace_case, "spec": _spec_case}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_special_values_in_every_input_format(tmp_path: Path, fmt: str) -> None:
    rng = random.Random(f"{SEED}-{fmt}")
    for case in range(CASES_PER_FORMAT):
        root = tmp_path / str(case)
        root.mkdir()
        work, outside = _workspace(root)
        for args in FORMATS[fmt](rng, work):
            result = _run(*args)
            _check(result, outside)
        report = work / "report" / "report.md"
        if report.exists():
            md = report.read_text()
            assert "<script" not in md and "](javascript" not in md
