"""No traceback on anything ingest accepts (issue 23, item 6): every nccl-tests fixture and every file of the shared
corpus goes through ``ingest -> analyze -> recommend -> report`` and every trace input through ``trace`` and
``trace --report``, in-process (click's CliRunner), each step exiting 0, 1 or 2 with no exception but collscope's
own exit and no traceback in what it printed.

An input ingest refuses (exit 2) stops its chain there: the refusal itself must be one clean line. recommend reads
the records ingest wrote (the JSONL), analyze and report the output itself (the path a user takes: ``collscope
report all_reduce.txt``). Run time: about 1 s of CPU per input, nearly all of it report's matplotlib figures.
Corpus files are read without the corpus' own ``# source:`` header lines (tests/corpus.py); the corpus tests
skip, with its path, when it is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from collscope.cli import main
from collscope.collectives.nccl_tests.parse import looks_like_nccl_tests
from tests.corpus import CORPUS, corpus_params, strip_corpus_header
from tests.traces import trace_fixtures as fx

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NCCL_TESTS_DIR = FIXTURES / "nccl-tests"
TRACE_DIR = FIXTURES / "traces"


def _text(path: Path) -> str:
    return path.read_text(errors="replace")


def _nccl_tests_fixtures() -> list[Path]:
    """Every file under tests/fixtures/nccl-tests, and every other fixture that reads as nccl-tests output."""
    files = {p for p in NCCL_TESTS_DIR.rglob("*") if p.is_file()}
    files |= {p for p in FIXTURES.rglob("*") if p.is_file() and p.stat().st_size < 4 << 20
              and TRACE_DIR not in p.parents and looks_like_nccl_tests(_text(p))}
    return sorted(files)


def _corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name != "SOURCES.md")


def _trace_inputs() -> list[Path]:
    """Each entry of tests/fixtures/traces (a file, or a directory read as one job) and the corpus traces."""
    inputs = sorted(TRACE_DIR.iterdir()) if TRACE_DIR.is_dir() else []
    return inputs + (sorted((CORPUS / "traces").iterdir()) if (CORPUS / "traces").is_dir() else [])


def _check(result: Result, args: list[str]) -> Result:
    shown = " ".join(args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"collscope {shown}: {result.exception!r}\n{result.output[-3000:]}")
    assert result.exit_code in (0, 1, 2), f"collscope {shown}: exit {result.exit_code}\n{result.output[-3000:]}"
    assert "Traceback" not in result.output, f"collscope {shown}\n{result.output[-3000:]}"
    return result


def _run(*args: str) -> Result:
    return _check(CliRunner().invoke(main, list(args)), list(args))


def chain(path: Path, work: Path) -> list[tuple[str, int]]:
    """``ingest -> analyze -> recommend -> report`` of one nccl-tests output; (step, exit code) per step run."""
    records = work / "records.jsonl"
    ingest = _run("ingest", str(path), "--out", str(records))
    steps = [("ingest", ingest.exit_code)]
    if ingest.exit_code == 2:
        errors = [line for line in ingest.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, f"a refusal is one line:\n{ingest.output}"
        return steps
    assert records.is_file(), ingest.output
    for args in (["analyze", str(path)], ["recommend", str(records)],
                 ["report", str(path), "--out", str(work / "report")]):
        steps.append((args[0], _run(*args).exit_code))
    return steps


@pytest.mark.parametrize("path", _nccl_tests_fixtures(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_nccl_tests_fixture_goes_through_the_chain(path: Path, tmp_path: Path) -> None:
    steps = chain(path, tmp_path)
    if steps[0][1] != 2 and steps[-1][1] != 2:  # report refuses cleanly what analysis never pools (2 machines' runs)
        assert (tmp_path / "report" / "index.html").is_file(), steps


@pytest.mark.parametrize("path", corpus_params(_corpus_files()))
def test_every_corpus_file_ingest_accepts_goes_through_the_chain(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / path.name
    copy.write_bytes(strip_corpus_header(_text(path)).encode() if path.suffix != ".gz" else path.read_bytes())
    chain(copy, tmp_path)


@pytest.mark.parametrize("path", corpus_params(_trace_inputs()), ids=lambda p: p.name)
def test_every_trace_input_goes_through_trace_and_its_report(path: Path, tmp_path: Path) -> None:
    _run("trace", str(path))
    _run("trace", str(path), "--report", str(tmp_path / "report"))


BUILT_TRACES = {
    "kineto-nccl-2-ranks": lambda d: [fx.write(d / f"rank{r}.json", fx.nccl_kernel_metadata(r, delay_us=80))
                                      for r in (0, 1)],
    "kineto-old-input-dims": lambda d: [fx.write(d / "rank0.json", fx.nccl_old_input_dims(0))],
    "kineto-gloo-no-shapes": lambda d: [fx.write(d / "rank0.json", fx.gloo_trace(0, record_shapes=False))],
    "flight-recorder-json": lambda d: [fx.write(d / f"fr_{r}.json", fx.flight_recorder(r)) for r in (0, 1)],
    "inspector-jsonl": lambda d: [(d / f"insp_{r}.log").write_text(fx.inspector_lines(r)) for r in (0, 1)],
}


@pytest.mark.parametrize("kind", sorted(BUILT_TRACES))
def test_every_built_trace_goes_through_trace_and_its_report(kind: str, tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    BUILT_TRACES[kind](job)
    _run("trace", str(job))
    _run("trace", str(job), "--report", str(tmp_path / "report"))


# ---- what the chain and its fuzz found (each failed on the code before its fix) ---------------------------------
AG_SIZE_ZERO = NCCL_TESTS_DIR / "all_gather_perf-v2.19.6-2x8-b8-five-size-0-rows.txt"


def test_runs_with_nodes_known_and_unknown_in_one_file_recommend_and_report(tmp_path: Path) -> None:
    """Two runs pasted into one file, the second's rank list elided after Rank 6: its records say nodes unknown,
    the first's 2 nodes. recommend sorted its groups by (backend, op, nranks, nnodes) and compared None with 2
    (TypeError); analysis/recommend/core.py orders unknown first."""
    full = AG_SIZE_ZERO.read_text()
    lines = [line for line in full.splitlines() if not (line.startswith("#  Rank ") and int(line.split()[2]) > 6)]
    lines.insert(max(i for i, line in enumerate(lines) if line.startswith("#  Rank ")) + 1, "# ...")
    path = tmp_path / "two-runs.txt"
    path.write_text(full + "\n".join(lines) + "\n")
    assert "16 ranks (nodes unknown)" in _run("ingest", str(path)).output
    assert chain(path, tmp_path) == [("ingest", 0), ("analyze", 0), ("recommend", 0), ("report", 0)]


@pytest.mark.parametrize(("column", "value", "what"), [
    (1, "99999999999999999999", "count"), (4, "9223372036854775808", "root"), (12, "1e308", "#wrong")])
def test_integers_beyond_64_bits_in_a_row_are_refused_by_ingest(column: int, value: str, what: str,
                                                                 tmp_path: Path) -> None:
    """A count, root or #wrong beyond 64 bits was accepted by ingest and ended analyze in an OverflowError (the
    records' integer columns are 64-bit); nccl_tests/text.py refuses it with the line, as it refuses a size."""
    lines = AG_SIZE_ZERO.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["256"])
    parts = lines[row].split()
    parts[column] = value
    lines[row] = "  ".join(parts)
    path = tmp_path / "big.txt"
    path.write_text("\n".join(lines) + "\n")
    for command in ("ingest", "analyze"):
        result = _run(command, str(path))
        assert result.exit_code == 2 and f"{path}:{row + 1}: expected every {what} within 64 bits" in result.output


def test_a_json_count_beyond_64_bits_is_refused_by_ingest(tmp_path: Path) -> None:
    import json

    doc = json.loads((NCCL_TESTS_DIR / "all_reduce_perf-v2.19.6-J-output.json").read_text())
    doc["results"][0]["count"] = 10**20
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    for command in ("ingest", "analyze"):
        result = _run(command, str(path))
        assert result.exit_code == 2 and "an integer within 64 bits at results[0].count" in result.output
