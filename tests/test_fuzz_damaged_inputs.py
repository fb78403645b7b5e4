"""Seeded mutation fuzzing of results directories and capture directories (issue 10).

Every file collscope reads back from a results directory (``sweep.json``, ``failures.jsonl``, a point's
``.jsonl``) or a capture directory (``meta.json`` and the tool outputs) is damaged the ways copied, killed,
hand-edited or foreign files are: truncated, bytes flipped, replaced by binary, emptied, a JSON value given
another type, a key dropped, a line or file duplicated, replaced by a directory, a FIFO or a dangling symlink,
deleted. Each mutated directory is handed to the commands in-process: no exception but collscope's own exit
(SystemExit), exit code 0 or 2 only, no traceback in the output, nothing blocks. Finally the untouched copy
still analyses to the same numbers.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from collscope.cli import main
from collscope.topo.samples import sample_path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "results" / "mpi-algos-2rank"
SEED = 20261201
RESULTS_CASES = 400
CAPTURE_CASES = 200
COMMAND_TIMEOUT_S = 20.0

_FAILURE = {"point_id": "PLACEHOLDER", "reason": "timeout", "detail": "point timed out after 30 s",
            "log_tail": "mpirun: killed", "duration_s": 30.1, "time": "2026-12-01T10:00:00+0000"}
_TYPES: tuple[Any, ...] = ("text", 7, 2.5, None, True, [1, "x"], {"k": 1})


def _small_results(dst: Path) -> Path:
    """A copy of the shipped example, cut to a few points per op (fast to analyse), with a failures.jsonl."""
    shutil.copytree(EXAMPLE, dst)
    doc = json.loads((dst / "sweep.json").read_text())
    keep: list[dict[str, Any]] = []
    per_op: dict[str, int] = {}
    for point in doc["plan"]["points"]:
        if per_op.get(point["op"], 0) < 6 and (dst / "points" / f"{point['point_id']}.jsonl").exists():
            keep.append(point)
            per_op[point["op"]] = per_op.get(point["op"], 0) + 1
    kept = {p["point_id"] for p in keep}
    for path in (dst / "points").iterdir():
        if path.name.split(".", 1)[0] not in kept:
            path.unlink()
    doc["plan"]["points"] = keep
    (dst / "sweep.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    failure = {**_FAILURE, "point_id": keep[-1]["point_id"]}
    resolved = {"point_id": keep[-1]["point_id"], "resolved": True, "time": "2026-12-01T10:01:00+0000"}
    (dst / "failures.jsonl").write_text(json.dumps(failure) + "\n" + json.dumps(resolved) + "\n")
    return dst


# ---- mutations ---------------------------------------------------------------------------------------------
def _truncate(rng: random.Random, path: Path) -> str:
    data = path.read_bytes()
    cut = rng.randrange(len(data)) if data else 0
    path.write_bytes(data[:cut])
    return f"truncated to {cut} bytes"


def _flip(rng: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    if not data:
        return "flip: empty file left as is"
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    path.write_bytes(bytes(data))
    return "bytes flipped"


def _binary(rng: random.Random, path: Path) -> str:
    path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(1, 600))))
    return "replaced by binary"


def _empty(rng: random.Random, path: Path) -> str:
    path.write_bytes(b"")
    return "emptied"


def _json_docs(path: Path) -> tuple[list[Any], bool] | None:
    """The JSON documents of a file (one per line for JSONL), or None when it is not JSON."""
    text = path.read_text(errors="replace")
    try:
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()], True
        return [json.loads(text)], False
    except ValueError:
        return None


def _write_docs(path: Path, docs: list[Any], lines: bool) -> None:
    text = "".join(json.dumps(d) + "\n" for d in docs) if lines else json.dumps(docs[0], indent=2) + "\n"
    path.write_text(text)


def _containers(doc: Any, out: list[Any]) -> list[Any]:
    if isinstance(doc, dict):
        out.append(doc)
        for value in doc.values():
            _containers(value, out)
    elif isinstance(doc, list):
        out.append(doc)
        for value in doc:
            _containers(value, out)
    return out


def _retype(rng: random.Random, path: Path) -> str:
    parsed = _json_docs(path)
    if not parsed or not parsed[0]:
        return _flip(rng, path)
    docs, lines = parsed
    boxes = [b for b in _containers(rng.choice(docs), []) if b]
    if not boxes:
        return _truncate(rng, path)
    box = rng.choice(boxes)
    key = rng.choice(list(box)) if isinstance(box, dict) else rng.randrange(len(box))
    old = box[key]
    box[key] = rng.choice([t for t in _TYPES if type(t) is not type(old)])
    _write_docs(path, docs, lines)
    return f"{key!r}: {type(old).__name__} -> {type(box[key]).__name__}"


def _drop_key(rng: random.Random, path: Path) -> str:
    parsed = _json_docs(path)
    if not parsed or not parsed[0]:
        return _truncate(rng, path)
    docs, lines = parsed
    boxes = [b for b in _containers(rng.choice(docs), []) if isinstance(b, dict) and b]
    if not boxes:
        return _empty(rng, path)
    box = rng.choice(boxes)
    key = rng.choice(list(box))
    del box[key]
    _write_docs(path, docs, lines)
    return f"dropped {key!r}"


def _duplicate(rng: random.Random, path: Path) -> str:
    if path.suffix == ".jsonl":
        lines = path.read_bytes().splitlines(keepends=True)
        if lines:
            line = rng.choice(lines)
            lines.insert(rng.randrange(len(lines) + 1), line if line.endswith(b"\n") else line + b"\n")
            path.write_bytes(b"".join(lines))
            return "a line duplicated"
    twin = path.with_name(f"{path.stem}-copy{path.suffix}")
    shutil.copyfile(path, twin)
    return f"duplicated as {twin.name}"


def _directory(rng: random.Random, path: Path) -> str:
    path.unlink()
    path.mkdir()
    (path / "inner.txt").write_text("x\n")
    return "replaced by a directory"


def _fifo(rng: random.Random, path: Path) -> str:
    path.unlink()
    os.mkfifo(path)
    return "replaced by a FIFO"


def _dangling(rng: random.Random, path: Path) -> str:
    path.unlink()
    path.symlink_to(path.with_name("missing-target"))
    return "replaced by a dangling symlink"


def _delete(rng: random.Random, path: Path) -> str:
    path.unlink()
    return "deleted"


MUTATIONS: tuple[Callable[[random.Random, Path], str], ...] = (
    _truncate, _flip, _binary, _empty, _retype, _retype, _drop_key, _duplicate, _directory, _fifo, _dangling,
    _delete)


# ---- running -----------------------------------------------------------------------------------------------
def _invoke(args: list[str]) -> Result:
    """The command in-process, in a thread: a blocking read must show up as a failure, not hang the suite."""
    box: list[Result] = []
    worker = threading.Thread(target=lambda: box.append(CliRunner().invoke(main, args)), daemon=True)
    worker.start()
    worker.join(COMMAND_TIMEOUT_S)
    assert not worker.is_alive(), f"collscope {' '.join(args)} blocked for {COMMAND_TIMEOUT_S:.0f} s"
    return box[0]


EXIT_CODES: dict[tuple[str, int], int] = {}
"""(command, exit code) -> runs, printed by the tests (``pytest -s``) as the fuzz's summary."""


def _check(args: list[str], what: str, problems: list[str]) -> None:
    result = _invoke(args)
    key = (" ".join(a for a in args[:2] if not a.startswith("/")), result.exit_code)
    EXIT_CODES[key] = EXIT_CODES.get(key, 0) + 1
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        problems.append(f"{what}: collscope {' '.join(args[:2])} raised {type(exc).__name__}: {exc}")
    elif result.exit_code not in (0, 2):
        problems.append(f"{what}: collscope {' '.join(args[:2])} exited {result.exit_code}: {result.output[-300:]}")
    elif "Traceback" in result.output:
        problems.append(f"{what}: collscope {' '.join(args[:2])} printed a traceback")


def _summary(what: str, cases: int, problems: list[str]) -> None:
    runs = ", ".join(f"{cmd} exit {code}: {n}" for (cmd, code), n in sorted(EXIT_CODES.items()))
    print(f"\nfuzz {what}: {cases} mutated inputs; {runs}; crashes: {len(problems)}")
    EXIT_CODES.clear()


def _targets(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and p.suffix != ".log")


def _mutated_copies(base: Path, rng: random.Random, cases: int, prefix: str) -> Iterator[tuple[int, Path, str]]:
    """``cases`` copies of ``base``, one file of each damaged by a random mutation: (case, copy, what was done).
    Each copy is removed once the caller has checked it."""
    files = [p.relative_to(base) for p in _targets(base)]
    for case in range(cases):
        work = base.parent / f"{prefix}{case}"
        shutil.copytree(base, work, symlinks=True)
        rel = rng.choice(files)
        how = rng.choice(MUTATIONS)(rng, work / rel)
        yield case, work, f"case {case} {rel} ({how})"
        shutil.rmtree(work)


def test_fuzzed_results_directories(tmp_path: Path) -> None:
    base = _small_results(tmp_path / "base")
    pristine = _invoke(["analyze", str(base), "--json"])
    assert pristine.exit_code == 0, pristine.output
    problems: list[str] = []
    for case, work, what in _mutated_copies(base, random.Random(SEED), RESULTS_CASES, "r"):
        _check(["sweep", "status", str(work)], what, problems)
        _check([("analyze", "recommend")[case % 2], str(work)], what, problems)
        if case % 40 == 0:
            _check(["report", str(work), "--out", str(tmp_path / f"report{case}")], what, problems)
        if case % 8 == 0:
            _check(["sweep", "status", str(work), "--json"], what, problems)
    _summary("results directories", RESULTS_CASES, problems)
    assert not problems, f"{len(problems)} of {RESULTS_CASES} mutated results directories crashed:\n" + \
        "\n".join(problems[:40])
    again = _invoke(["analyze", str(base), "--json"])
    assert again.exit_code == 0 and json.loads(again.output) == json.loads(pristine.output)


def test_fuzzed_capture_directories(tmp_path: Path) -> None:
    base = tmp_path / "node01"
    shutil.copytree(sample_path(), base)
    pristine = _invoke(["topo", "show", "--from", str(base), "--json"])
    assert pristine.exit_code == 0, pristine.output
    problems: list[str] = []
    for _, work, what in _mutated_copies(base, random.Random(SEED + 1), CAPTURE_CASES, "c"):
        _check(["topo", "show", "--from", str(work)], what, problems)
    _summary("capture directories", CAPTURE_CASES, problems)
    assert not problems, f"{len(problems)} of {CAPTURE_CASES} mutated capture directories crashed:\n" + \
        "\n".join(problems[:40])
    again = _invoke(["topo", "show", "--from", str(base), "--json"])
    assert again.exit_code == 0 and json.loads(again.output) == json.loads(pristine.output)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.__name__.strip("_"))
def test_every_mutation_changes_the_file(tmp_path: Path, mutation: Callable[[random.Random, Path], str]) -> None:
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"sweep_id": "s", "plan": {"points": [{"point_id": "p", "op": "all_reduce"}]}}))
    before = path.read_bytes()
    mutation(random.Random(3), path)
    after = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    assert after != before or (tmp_path / "sweep-copy.json").exists()
