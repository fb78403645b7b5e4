"""The fixed-width (numpy) reading of nccl-tests table rows makes exactly what the pure path makes.

Every input is parsed twice, once with the pure path only and once with the fixed-width path for every block
(``FIXED_MIN_ROWS = 1``, no size floor), and the two outcomes must be identical: the records byte for byte as
JSON (floats as their shortest repr, ``-0.0`` included), the run's summary, warnings and errors, or the same
ParseError (message, file and line). Inputs: the shared corpus, the fixtures, a generated fixed-width table,
and that table altered the ways the fixed-width reader must refuse or read exactly (exponents, ``N/A``, signs,
long numbers, odd points, tabs, a wider row, ...), by hand and by hypothesis.
"""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.collectives.nccl_tests import parse as parse_module
from collscope.collectives.nccl_tests.fixed import fixed_columns
from collscope.collectives.nccl_tests.text import layout_from_header
from collscope.errors import ParseError
from tests.corpus import CORPUS, corpus_params, strip_corpus_header

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
_HEADER = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw"
           "   busbw  #wrong")
_HEAD = ("# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803\n"
         "# Collective test starting: all_reduce_perf\n"
         "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
         "validation: 1 graph: 0 unalign: 0\n#\n# Using devices\n"
         + "".join(f"#  Rank {r:2d} Group  0 Pid {4000 + r:6d} on {'node' + str(r // 4):>10s} device {r % 4:2d} "
                   f"[0000:{0x18 + r:02x}:00] NVIDIA H100 80GB HBM3\n" for r in range(8))
         + "#\n" + _HEADER + "\n")
_TAIL = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 100.5 \n#\n"


def _f(v: float, width: int) -> str:
    for digits in (2, 1, 0):
        s = f"{v:{width}.{digits}f}"
        if len(s) <= width:
            return s
    return f"{v:{width}.1e}"


def _rows(seed: int, cycles: int = 2) -> list[str]:
    """Fixed-width all_reduce rows (8 ranks): every dtype and redop of a few sizes, times with 2, 1 or 0
    decimals, ``cycles`` repeats."""
    rng = random.Random(seed)
    rows = []
    for _ in range(cycles):
        for dtype, width in (("float", 4), ("half", 2), ("int64", 8), ("bfloat16", 2)):
            for redop in ("sum", "max", "avg"):
                for size in (8, 1024, 1 << 20, 1 << 26, 1 << 33):
                    t = rng.choice((20.0, 123.4, 9999.0, 123456.0)) * (1 + rng.random())
                    alg = size / t / 1e3
                    rows.append(f"{size:12d}  {size // width:12d}  {dtype:>8s}  {redop:>6s}  {-1:6d}  {_f(t, 7)}  "
                                f"{_f(alg, 6)}  {_f(alg * 1.75, 6)}  {0:6g}  {_f(t * 0.99, 7)}  "
                                f"{_f(alg / 0.99, 6)}  {_f(alg * 1.75 / 0.99, 6)}  {0:6g}")
    return rows


def _table(rows: list[str], noise_every: int = 0) -> str:
    out = []
    for i, row in enumerate(rows):
        out.append(row)
        if noise_every and i % noise_every == noise_every - 1:
            out.append("node0:4000:4000 [0] NCCL INFO comm 0x55d1 rank 0 nranks 8 cudaDev 0 busId 18000 - Abort")
    return _HEAD + "\n".join(out) + "\n" + _TAIL


def _outcome(text: str, fast: bool, monkeypatch: pytest.MonkeyPatch, **kwargs: object) -> tuple:
    """What parsing ``text`` gives with one path: ("run", records as JSON, summary) or ("error", ...)."""
    monkeypatch.setattr(parse_module, "FIXED_MIN_ROWS", 1 if fast else 10 ** 12)
    monkeypatch.setattr(parse_module, "FIXED_MIN_TEXT", 0)
    try:
        run = parse_module.parse_nccl_tests(text, source="in.txt", **kwargs)  # type: ignore[arg-type]
    except ParseError as exc:
        return ("error", str(exc), exc.source, exc.line)
    return ("run", msgspec.json.encode(run.records), run.to_dict(), run.warnings, run.errors)


def _same(text: str, monkeypatch: pytest.MonkeyPatch, **kwargs: object) -> tuple:
    pure = _outcome(text, False, monkeypatch, **kwargs)
    fast = _outcome(text, True, monkeypatch, **kwargs)
    assert fast == pure
    return pure


def _inputs() -> list[Path]:
    files = sorted(FIX.glob("*.txt"))
    files += sorted((CORPUS / "nccl-tests").glob("*.txt")) + sorted((CORPUS / "from-nccl-research").glob("*.txt"))
    return files


@pytest.mark.parametrize("path", corpus_params(_inputs()))
def test_corpus_and_fixtures_read_the_same_by_both_paths(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = strip_corpus_header(path.read_text())
    _same(text, monkeypatch)
    _same(text, monkeypatch, op="all_reduce", nranks=16)  # the files that need them; the others must agree too


def test_the_generated_table_is_read_by_the_fixed_width_path(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows(1)
    lay = layout_from_header(_HEADER.lstrip("#").split(), "t", 0)
    block = "\n".join(rows)
    cols = fixed_columns(block, 0, len(block), lay)
    assert cols is not None
    assert cols.ints(0) == [int(r.split()[0]) for r in rows]
    assert cols.floats(5) == [float(r.split()[5]) for r in rows]  # 2, 1 and 0 decimals mixed
    assert cols.floats(11) == [float(r.split()[11]) for r in rows]
    assert cols.names(2, "type") == [r.split()[2] for r in rows]
    kind, records, summary, *_ = _same(_table(rows), monkeypatch)
    assert kind == "run" and summary["records"] == 2 * len(rows) and summary["nranks"] == 8
    assert {r["repeat"] for r in msgspec.json.decode(records)} == {0, 1}
    _same(_table(rows, noise_every=7), monkeypatch)  # many blocks, cut by NCCL INFO lines
    _same(_table(rows).replace("# Using devices", "# Using devices \u2026"), monkeypatch)  # not ASCII elsewhere
    _same(_table(rows).rstrip("\n").rsplit("\n", 4)[0], monkeypatch)  # the table ends the text, no line break


# One row of the table changed (the token of column ``col`` replaced), or a whole column.
_ALTERED_TOKENS = [
    (5, "1.2e+03"), (5, "1e3"), (5, "N/A"), (5, "nan"), (5, "inf"), (5, "-1.00"), (5, "-0.00"), (5, "+12.5"),
    (5, "012.50"), (5, "12."), (5, ".50"), (5, "."), (5, "1.2.3"), (5, "1_2.5"), (5, "12345678901234.5"),
    (5, "1234567890123456.5"), (5, "0.000000000000001"), (5, "9007199254740993"), (5, "-"), (5, "12,5"),
    (6, "1.5e-07"), (6, "0x1p3"), (7, "١٢"), (0, "+8"), (0, "08"), (0, "1_024"), (0, "99999999999999999999"),
    (0, "12.0"), (0, "-8"), (1, "N/A"), (1, "-0"), (2, "floaty"), (2, "9float"), (3, "none"), (3, "prod"),
    (3, "-"), (4, "0"), (4, "3"), (4, "-2"), (8, "N/A"), (8, "5"), (8, "1.04858e+06"), (12, "N/A"),
    (9, "10.00"), (10, "0.00"),
]


def _replace(row: str, col: int, token: str) -> str:
    """``row`` with token ``col`` replaced, right-aligned in the same field when it fits (the line keeps its
    width), else simply wider."""
    starts, ends, inside = [], [], False
    for i, c in enumerate(row + " "):
        if c != " " and not inside:
            starts.append(i)
        if c == " " and inside:
            ends.append(i)
        inside = c != " "
    lo = ends[col - 1] + 1 if col else 0
    return row[:lo] + token.rjust(ends[col] - lo) + row[ends[col]:]


@pytest.mark.parametrize(("col", "token"), _ALTERED_TOKENS, ids=[f"{c}:{t}" for c, t in _ALTERED_TOKENS])
def test_an_altered_cell_reads_the_same_by_both_paths(col: int, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows(2)
    for where in (0, len(rows) // 2, len(rows) - 1):
        altered = rows[:where] + [_replace(rows[where], col, token)] + rows[where + 1:]
        _same(_table(altered), monkeypatch)
    _same(_table([_replace(r, col, token) for r in rows]), monkeypatch)  # the whole column


@pytest.mark.parametrize("change", [
    lambda r: r + " ", lambda r: r.replace("  ", "\t", 1), lambda r: r[:-1], lambda r: " " + r,
    lambda r: r[:40], lambda r: r + "  extra", lambda r: r.replace(" ", "\x1f", 1), lambda r: r.replace("0", "０", 1),
    lambda r: r + "\r", lambda r: r.replace("  ", "\x0b", 1),
], ids=["trailing-space", "tab", "last-char-cut", "wider", "cut-row", "extra-token", "unit-separator",
        "fullwidth-digit", "carriage-return", "vertical-tab"])
def test_an_altered_row_shape_reads_the_same_by_both_paths(change, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows(3)
    for where in (0, 7, len(rows) - 1):
        _same(_table(rows[:where] + [change(rows[where])] + rows[where + 1:]), monkeypatch)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_random_cells_read_the_same_by_both_paths(data: st.DataObject) -> None:
    rows = _rows(data.draw(st.integers(0, 3)), cycles=1)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(rows) - 1))
        col = data.draw(st.integers(0, 12))
        token = data.draw(st.text(alphabet="0123456789.-+eE_NA/ ", min_size=1, max_size=9).map(str.strip)
                          .filter(bool))
        rows[i] = _replace(rows[i], col, token)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _same(_table(rows), monkeypatch)


def test_small_inputs_do_not_import_numpy() -> None:
    import subprocess
    import sys

    code = ("import sys; from collscope.collectives.nccl_tests.parse import parse_nccl_tests; "
            f"parse_nccl_tests(open({str(FIX / 'all_reduce_perf-v2.19.6-2x4-wrong-redop-root.txt')!r}).read()); "
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_a_check_column_in_one_placement_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Out-of-place without ``#wrong``, in-place with it: the records keep None and 0 apart on both paths."""
    rows = [_drop_token(r, 8) for r in _rows(4)]
    header = _HEADER.replace("  #wrong     time", "     time", 1)
    kind, records, *_ = _same(_HEAD.replace(_HEADER, header) + "\n".join(rows) + "\n" + _TAIL, monkeypatch)
    assert kind == "run"
    decoded = msgspec.json.decode(records)
    assert {r["wrong"] for r in decoded if not r["in_place"]} == {None}
    assert {r["wrong"] for r in decoded if r["in_place"]} == {0}


def _drop_token(row: str, col: int) -> str:
    """``row`` without token ``col`` and the spaces before it."""
    ends = [i for i in range(len(row)) if row[i] != " " and (i + 1 == len(row) or row[i + 1] == " ")]
    return row[:ends[col - 1] + 1] + row[ends[col] + 1:]


def test_records_read_by_the_fixed_width_path_pass_the_records_own_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from collscope.collectives.nccl_tests import fixed

    real, read_fixed = fixed.fixed_columns, []

    def spy(*args: object) -> object:
        cols = real(*args)  # type: ignore[arg-type]
        read_fixed.append(cols is not None)
        return cols

    monkeypatch.setattr(parse_module, "FIXED_MIN_ROWS", 1)
    monkeypatch.setattr(parse_module, "FIXED_MIN_TEXT", 0)
    monkeypatch.setattr(fixed, "fixed_columns", spy)
    rows = _rows(3, cycles=4)
    run = parse_module.parse_nccl_tests(_table(rows), source="in.txt")
    assert len(run.records) == 2 * len(rows) and read_fixed and all(read_fixed)
    for rec in run.records:  # made inside columns_checked: each is checked here one by one, as ever
        assert msgspec.structs.replace(rec) == rec
