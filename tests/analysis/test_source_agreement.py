"""bench/source_agreement.py: the published rows of two or more systems that share the models' inputs and the size,
how far apart their sources are, the most rows one value per group can place within 15%, and where the sources
agree and the models still miss."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from types import ModuleType

import pytest

from collscope.analysis.predict import predict
from tests.scripts import load_bench

ROOT = Path(__file__).resolve().parents[2]
H100 = "NVIDIA H100 80GB HBM3"
GIB, MIB = 1 << 30, 1 << 20


@pytest.fixture(scope="module")
def agreement() -> ModuleType:
    return load_bench("source_agreement", "source_agreement_under_test")


def _write(agreement: ModuleType, path: Path, rows: list[tuple[str, str, float, str]]) -> Path:
    """Rows of one geometry (8 H100 on one node, all_reduce): (system, size, busbw, off_reason)."""
    columns = agreement.scorecard.COLUMNS
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for system, size, busbw, reason in rows:
        writer.writerow(dict(zip(columns, [system, H100, "8", "1", "8", "all_reduce", size, f"{busbw}", "2.21.5",
                                           "https://example.org/run", "", "", "", "", "", "", reason], strict=True)))
    path.write_text(out.getvalue())
    return path


def _expected(size_bytes: int) -> float:
    (choice,) = predict("all_reduce", gpu=H100, nranks=8, nnodes=1, nvl_domain=8, sizes=[size_bytes]).nccl_choice
    return choice.expected_busbw_gbps


def test_groups_spreads_ceilings_and_the_models_count(agreement: ModuleType, tmp_path: Path) -> None:
    at_1g = _expected(GIB)
    path = _write(agreement, tmp_path / "rows.csv", [
        ("box A", "1G", at_1g, ""),               # two systems that agree at 1 GiB ...
        ("box B", "1G", at_1g * 1.25, ""),        # ... within 15% of one value (spread 1.25), one off the models
        ("box A", "256M", 300.0, ""),             # two systems no one value holds (spread 1.5)
        ("box B", "256M", 450.0, ""),
        ("box A", "64M", 300.0, ""),              # one system only: no group
        ("box A", "16M", 200.0, ""),              # a stated reason takes a row out: no group left
        ("box B", "16M", 210.0, "the source is a bug report"),
    ])
    scored = agreement.scorecard.score(agreement.scorecard.read_published(path))
    groups = agreement.groups(scored)
    assert [g.rows[0].row.size_bytes for g in groups] == [GIB, 256 * MIB]
    at_1g_group, at_256m = groups
    assert at_1g_group.agree and at_1g_group.spread == pytest.approx(1.25)
    assert not at_256m.agree and at_256m.spread == pytest.approx(1.5)
    assert at_1g_group.ceiling == 2 and at_256m.ceiling == 1
    assert at_1g_group.within == 1  # the prediction is box A's figure; box B's is 25% above it
    expected_256m = _expected(256 * MIB)
    assert at_256m.within == sum(abs(expected_256m / f - 1) <= 0.15 for f in (300.0, 450.0))
    lines = agreement.report(groups)
    assert lines[0].startswith("2 groups of published rows from two or more systems") and "(4 rows" in lines[0]
    assert "every source within 15% of one value: 1 groups" in lines[1] and "above 1.35): 1" in lines[1]
    assert "one value per group places 3/4 rows" in lines[2]
    assert lines[3] == "groups where the sources agree and the models miss (1, 1 rows):"
    assert "all_reduce 1G on 8 x NVIDIA H100 80GB HBM3 (1 node, NVLink domain 8)" in lines[4]
    assert "spread 1.25" in lines[4] and "box B" in lines[4]
    assert lines[5].startswith("groups whose sources no one value holds within 15% (1)")
    assert "all_reduce 256M" in lines[6] and "spread 1.50" in lines[6]


def test_the_script_reads_the_given_file_and_refuses_a_bad_one(agreement: ModuleType, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(agreement, tmp_path / "rows.csv", [("box A", "1G", 400.0, ""), ("box B", "1G", 410.0, "")])
    assert agreement.main(["--data", str(path)]) == 0
    assert capsys.readouterr().out.startswith("1 groups of published rows")
    bad = tmp_path / "bad.csv"
    bad.write_text(path.read_text().replace("all_reduce", "allreduce"))
    assert agreement.main(["--data", str(bad)]) == 2
    assert f"{bad}:2: unknown op 'allreduce'" in capsys.readouterr().err
    assert agreement.main(["--bogus"]) == 2


def test_on_the_published_rows_no_model_beats_the_ceiling(agreement: ModuleType) -> None:
    """Each group joins rows of two or more systems with one prediction; the models' count never passes the
    ceiling, and the groups where sources agree are most of them (the sources' own scatter is small)."""
    card = agreement.scorecard
    groups = agreement.groups(card.score(card.read_published()))
    assert len(groups) >= 20
    for g in groups:
        assert len({s.row.system for s in g.rows}) >= 2
        assert len({(card.model_inputs(s.row), s.row.size_bytes) for s in g.rows}) == 1
        assert len({s.predicted_gbps for s in g.rows}) == 1
        assert all(s.claimed for s in g.rows)
        assert g.within <= g.ceiling <= len(g.rows)
    assert sum(g.agree for g in groups) > 0.9 * len(groups)


def test_the_docs_paragraph_gives_todays_figures(agreement: ModuleType) -> None:
    """docs/reading-results.md ("Whose misses") quotes the script's counts; a change of rows or models that moves
    them must move the paragraph too."""
    card = agreement.scorecard
    groups = agreement.groups(card.score(card.read_published()))
    rows = sum(len(g.rows) for g in groups)
    text = " ".join((ROOT / "docs" / "reading-results.md").read_text(encoding="utf-8").split())
    assert f"there are {len(groups)} such groups ({rows} rows)" in text
    assert f"In {sum(g.agree for g in groups)} of them every source lies within 15% of one value" in text
    assert (f"One value per group would place {sum(g.ceiling for g in groups)} of the {rows} rows within 15%; the "
            f"models place {sum(g.within for g in groups)}.") in text
    missed = [g for g in groups if g.agree and g.within < len(g.rows)]
    assert f"Of the {len(missed)} groups where the sources agree and the models still miss" in text
